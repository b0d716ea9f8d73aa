"""One probe run: splits, labels (real or control), features, training, metrics, MDL; a result row."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field

import numpy as np

from probing import controls, features, metrics
from probing.data import ProbeSplits, make_splits
from probing.mdl import online_code, online_code_logistic
from probing.train import fit_attention, fit_logistic

PROBES = ("positional", "attention", "mean", "max", "sampled")


@dataclass(frozen=True)
class ProbeConfig:
    store: str
    site: str
    probe: str = "positional"
    control: str = "none"
    seed: int = 0
    mdl: bool = False
    positions: int = 1000
    task: str = "female-male"
    language: str | None = None
    standardize: bool = True
    c: float = 1.0
    max_iter: int = 1000
    max_epochs: int = 200
    lr: float = 1e-4  # attention probe (Fucci et al. 2025)
    apply_to: str | None = None  # attention probe: also predict every utterance of this store (e.g. MuST-SHE)
    device: str = "cpu"

    def __post_init__(self):
        if self.probe not in PROBES:
            raise ValueError(f"unknown probe {self.probe!r}; choose from {PROBES}")
        if self.control not in controls.CONTROLS:
            raise ValueError(f"unknown control {self.control!r}; choose from {controls.CONTROLS}")

    def run_id(self) -> str:
        """A hash of everything that determines the result, the seed included (not the device)."""
        identity = {k: v for k, v in asdict(self).items() if k != "device"}
        return hashlib.sha1(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class ProbeResult:
    row: dict
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    attention: dict[str, list] = field(default_factory=dict)  # ids and weights of test utterances


def _labels(splits: ProbeSplits, control: str, seed: int) -> dict[str, np.ndarray]:
    labels = {name: getattr(splits, name).labels.copy() for name in ("train", "dev", "test")}
    if control == "shuffled":
        labels["train"] = controls.shuffled(labels["train"], seed)
    elif control == "speaker":
        every = np.concatenate([getattr(splits, n).speakers for n in ("train", "dev", "test")])
        mapping = controls.speaker_labels(every, seed)
        labels = {n: np.array([mapping[s] for s in getattr(splits, n).speakers], dtype=int) for n in labels}
    return labels


def _row_metrics(scores: dict, positions: slice, names: tuple[str, str]) -> dict:
    return {
        "f1_macro": float(np.mean(scores["f1_macro"][positions])),
        "accuracy": float(np.mean(scores["accuracy"][positions])),
        "recall": {names[0]: float(np.mean(scores["recall_0"][positions])), names[1]: float(np.mean(scores["recall_1"][positions]))},
    }


def _logistic_run(config, reader, splits, labels):
    """Positional, mean, max and sampled probes: batched logistic regressions over [N, P, D]."""
    ids = {n: getattr(splits, n).ids for n in ("train", "dev", "test")}
    if config.probe == "positional":
        lengths = {}
        x = {}
        longest = max(int(reader.length(config.site, i)) for i in ids["train"] + ids["test"])
        width = min(config.positions, longest)
        for name in ("train", "test"):  # positional probes select nothing on dev
            x[name], lengths[name] = features.positional(reader, config.site, ids[name], width)
        masks = {n: features.valid_mask(lengths[n], width) for n in x}
    else:
        x = {n: features.pooled(reader, config.site, ids[n], config.probe) if ids[n] else None for n in ids}
        masks = {n: np.ones(x[n].shape[:2], dtype=bool) if x[n] is not None else None for n in x}
        lengths = {n: np.array([reader.length(config.site, i) for i in ids[n]]) for n in ids}
    if config.standardize:
        scaler = features.Standardizer.fit(x["train"], masks["train"])
        x = {n: scaler(v) if v is not None else None for n, v in x.items()}
    model = fit_logistic(x["train"], labels["train"], masks["train"], c=config.c, max_iter=config.max_iter, device=config.device, seed=config.seed)
    predictions = (model.probabilities(x["test"]) > 0.5).astype(int)
    scores = metrics.position_scores(labels["test"], predictions, masks["test"])
    arrays = {f"test_{k}": np.asarray(v) for k, v in scores.items()}
    mean_test_length = float(np.mean(lengths["test"]))
    if config.probe == "positional":
        span = slice(0, int(np.ceil(mean_test_length)))
        extra = {"f1_s": metrics.f1_s(scores["f1_macro"], mean_test_length), "positions_used": int(x["train"].shape[1])}
        arrays["test_f1_ema"] = metrics.ema(scores["f1_macro"], 3)
    elif config.probe == "sampled":
        chosen = 0
        if len(ids["dev"]):
            dev_scores = metrics.position_scores(labels["dev"], (model.probabilities(x["dev"]) > 0.5).astype(int))
            chosen = int(np.argmax(dev_scores["f1_macro"]))
        span = slice(chosen, chosen + 1)
        extra = {"sampled_fraction": features.SAMPLED_FRACTIONS[chosen], "chosen_on": "dev" if len(ids["dev"]) else "first position"}
    else:
        span, extra = slice(0, 1), {}
    extra["mean_test_length"] = mean_test_length
    row_metrics = _row_metrics(scores, span, splits.class_names)
    if config.mdl:
        code = online_code_logistic(x["train"], labels["train"], masks["train"], splits.train.speakers, seed=config.seed, c=config.c, max_iter=config.max_iter, device=config.device)
        arrays |= {"mdl_online_bits": code.online_bits, "mdl_uniform_bits": code.uniform_bits}
        extra |= _mdl_summary(code, span)
    return row_metrics | extra, arrays, {}


def _mdl_summary(code, span: slice) -> dict:
    online, uniform = float(np.sum(code.online_bits[span])), float(np.sum(code.uniform_bits[span]))
    return {
        "codelength_online_bits": online,
        "codelength_uniform_bits": uniform,
        "compression": uniform / online if online > 0 else float("nan"),
        "mdl_blocks": len(code.block_ends),
        "mdl_uniform_blocks": code.uniform_blocks,
        **({"mdl_positions": [span.start, span.stop]} if span.stop - span.start > 1 else {}),
    }


def _attention_run(config, reader, splits, labels):
    seqs = {n: features.sequences(reader, config.site, getattr(splits, n).ids) for n in ("train", "dev", "test")}
    if config.standardize:
        scaler = features.Standardizer.fit_sequences(seqs["train"])
        seqs = {n: scaler.sequences(v) for n, v in seqs.items()}
    dim = seqs["train"][0].shape[1]

    def fit(indices):
        return fit_attention(([seqs["train"][i] for i in indices], labels["train"][indices]), (seqs["dev"], labels["dev"]), dim, config.max_epochs, config.device, config.seed, lr=config.lr)

    model = fit(np.arange(len(seqs["train"])))
    probabilities, weights = model.predict(seqs["test"])
    row = metrics.summary(labels["test"], (probabilities > 0.5).astype(int), splits.class_names)
    row |= {"best_epoch": model.best_epoch, "epochs": model.epochs}
    arrays = {}
    if config.apply_to:
        from extract.store import ShardReader

        other = ShardReader(config.apply_to)
        applied = features.sequences(other, config.site, other.ids)
        applied_probabilities, _ = model.predict(scaler.sequences(applied) if config.standardize else applied)
        arrays |= {"applied_ids": np.array(other.ids), "applied_probabilities": applied_probabilities,
                   "applied_class_names": np.array(splits.class_names)}
        row["applied_to"] = {"store": config.apply_to, "utterances": len(other.ids)}
    if config.mdl:
        code = online_code(labels["train"], np.ones((len(seqs["train"]), 1), bool), splits.train.speakers, fit, lambda m, idx: m.predict([seqs["train"][i] for i in idx])[0], seed=config.seed)
        row |= _mdl_summary(code, slice(0, 1))
    return row, arrays, {"ids": splits.test.ids, "weights": weights, "probabilities": probabilities}


def run_probe(config: ProbeConfig, reader=None) -> ProbeResult:
    from extract.provenance import provenance
    from extract.store import ShardReader

    reader = reader or ShardReader(config.store)
    if config.site not in reader.sites:
        raise KeyError(f"store {config.store} has no site {config.site!r}; it has {', '.join(reader.sites)}")
    splits = make_splits(reader.metadata(), reader.ids, config.task, config.seed, config.language)
    runner = _attention_run if config.probe == "attention" else _logistic_run
    scores, arrays, attention = runner(config, reader, splits, _labels(splits, config.control, config.seed))
    if config.control != "none":
        real, _, _ = runner(ProbeConfig(**{**asdict(config), "control": "none", "mdl": False}), reader, splits, _labels(splits, "none", config.seed))
        key = "f1_s" if config.probe == "positional" else "f1_macro"
        scores["selectivity"] = controls.selectivity(real[key], scores[key])
        scores["f1_real"] = real[key]
    row = {"run_id": config.run_id(), "config": asdict(config), "seed": config.seed, "splits": splits.sizes(), **scores, **provenance()}
    return ProbeResult(row, arrays, attention)
