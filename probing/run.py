"""One probe run: splits, labels (real or control), features, training, metrics, MDL; a result row."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import math
import os
import tempfile
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

import numpy as np

from extract.attributes import LabelError, attribute_task, read_attribute
from extract.options import LARGEST_LR, field_problem, option, seed_option
from extract.paths import canonical_path
from extract.provenance import joined, model_label
from extract.records import ProbeRow, schema_version
from probing import controls, features, metrics
from probing.data import (
    DEFAULT_SPLIT,
    SPLITS,
    Fold,
    ProbeError,
    ProbeSplits,
    attribute_column,
    leave_one_speaker_out,
    make_splits,
    shared_speakers_message,
    speaker_disjoint_refusal,
    speaker_stratified_splits,
    task_attribute,
    task_labels,
)
from probing.kinds import DEFAULT_KIND, KINDS, ProbeKind, probe_kind, refuse_what_the_store_lacks
from probing.mdl import DEFAULT_C_GRID, MDL_ORDERS, MIXTURE_GUARD, OnlineCode, online_code, online_code_logistic

# probing.train (torch, Lightning: seconds to import) is imported by the functions that train, so that
# reading a grid, planning a study and every --help stay fast (tests/cli/test_entry_point.py checks it)

PROBES = tuple(KINDS)  # the probe kinds' names (probing.kinds is their registry)
ROW_SCHEMA = schema_version("probe_row")  # the result row's version (extract.records.FORMATS); rows without ``schema`` read as version 1
RESOURCE_FIELDS = ("device", "memory_gb", "loader_workers")  # left out of the run id (loader_workers: unless set, see run_id)
# where an attribute task's labels were read: checked against the store's manifest sha256, so the labels, not
# their path, count; left out of the run id, and out of the row's config when not given (gender rows keep theirs)
LABEL_FIELDS = ("labels",)


def check_training_options(max_epochs: int, lr: float, c: float, max_iter: int) -> None:
    """The training options of every probe run (``experiments.probe``'s flags, a grid's or a study's
    options): an epoch limit of 0 would score an untrained probe, a NaN learning rate fails inside
    the optimiser. :class:`ProbeError` names the option."""
    if max_epochs < 1:
        raise ProbeError(f"max_epochs must be at least 1 (0 epochs would score an untrained probe), got {max_epochs}")
    if max_iter < 1:
        raise ProbeError(f"max_iter must be at least 1, got {max_iter}")
    for name, value in (("lr", lr), ("c", c)):
        if not (math.isfinite(value) and value > 0):
            raise ProbeError(f"{name} must be a finite positive number, got {value}")
    if lr > LARGEST_LR:
        raise ProbeError(f"lr must be at most {LARGEST_LR:.3g} (Adam's first step, lr / (1 - β1), is a float32), got {lr}")


def _kinds_help() -> str:
    """``probe``'s help: each kind of the registry (``probing.kinds``) with its headline score."""
    return "; ".join(f"{kind.name}: {kind.summary} (headline {kind.headline})" for kind in KINDS.values())


@dataclass(frozen=True)
class ProbeConfig:
    """One probe run: which store and site, which kind of probe (``probe``, a name in
    :data:`probing.kinds.KINDS`), control, seed, split and training options. Its fields are the
    options of ``speech-gender probe``, of a grid file's ``options`` and of a study's probe grids
    (``experiments.options`` derives the flags; ``docs/stages/probing.md`` says what each does). A
    config that cannot run (an unknown kind or control, an option its kind does not take) is refused
    when it is made (:meth:`__post_init__`), with a :class:`probing.data.ProbeError`."""

    store: str = option(help="the store the probe learns from", role="input")
    site: str = option(help="the site of the store the probe reads")
    probe: str = option(DEFAULT_KIND, _kinds_help(), choices=KINDS.keys())  # a live view: a kind registered later (a plug-in) is a choice too
    control: str = option("none", "none, or the control run in place of the real labels", choices=controls.CONTROLS)
    seed: int = seed_option("seed of the split, the control labels and the training")
    mdl: bool = option(False, "also compute the online codelength")
    positions: int = option(1000, "positional probes: the first P positions")
    # the command line's --groups A,B, or --attribute NAME [--groups A,B | --pairs] (extract.attributes spells the tasks)
    task: str = option("female-male", "what the probe tells apart: female-male, other-male, attribute:NAME (every class) or attribute:NAME:A,B", command=False)
    labels: str | None = option(
        None,
        "attribute tasks: the manifest to read the attribute from (default: the one the store records); refused unless "
        "it is the manifest the store was extracted from (its sha256)",
        role="input",
        metavar="MANIFEST",
    )
    language: str | None = option(None, "only utterances in this language")
    standardize: bool = option(True, "logistic probes: raw features (scikit-learn's default)", flag="--no-standardize")
    c: float = option(1.0, "logistic probes: the inverse regularisation strength", command=False)
    max_iter: int = option(1000, "logistic probes: the solver's iteration limit", command=False)
    max_epochs: int = option(200, "attention probe: epoch limit (early stopping usually ends sooner)")
    lr: float = option(1e-4, "attention probe: Adam learning rate (Fucci et al. 2025: 1e-4)")
    apply_to: str | None = option(
        None,
        "attention probe: also predict every utterance of this store (e.g. MuST-SHE), saved in the arrays, "
        "and score those labelled with the task's classes (genders, or an attribute's values from the manifest "
        "that store records): applied_f1_macro, applied_accuracy, applied_recall",
        role="input",
    )
    allow_shared_speakers: bool = option(
        False, "allow manifest dev/test splits or the --apply-to store to share speakers with the training split (recorded in the row)"
    )
    # "loso": one fold per speaker, pooled (_loso_run); "stratified": speakers shared (Attanasio et al.); the default is left out of the run id
    split: str = option(
        DEFAULT_SPLIT,
        "fixed (default): the manifest's train/dev/test, else speaker-disjoint 70/10/20; loso: leave one speaker out, "
        "one fold per speaker, scores pooled over folds (not with --mdl, --control speaker or --apply-to); stratified: each "
        "speaker's utterances spread 70/10/20 over train/dev/test, speakers shared (Attanasio et al. 2024, B.3)",
        choices=SPLITS,
    )
    # logistic MDL: the Bayesian mixture over a C grid (probing.mdl); false: every block at the fixed c, unguarded
    # (scikit-learn's defaults, as Attanasio et al.); the default is left out of the run id
    mdl_guard: bool = option(True, "logistic MDL: every block at the fixed C = 1, no mixture over a C grid", flag="--no-mdl-guard")
    # MDL's transmission order: blocks of whole speakers (the default, left out of the run id), or the examples in a seeded random
    # order with blocks cut exactly at the fractions (Voita & Titov 2020; Attanasio et al. 2024, B.3)
    mdl_order: str = option(
        "speaker",
        "MDL: speaker (default): examples grouped by speaker, block ends moved to speaker boundaries; random: examples in a "
        "seeded random order, blocks cut at the fractions (the paper's; speakers recur across blocks)",
        choices=MDL_ORDERS,
    )
    device: str = option("cpu", "where the probe trains", command=False)  # the command line's --device (auto by default)
    memory_gb: float = option(
        4.0,
        "memory budget of a run (default 4): positional probes read as many positions at a time as fit it; attention "
        "probes hold their sequences only when they fit it, else read them from the store per batch. Not part of the run id",
    )
    loader_workers: int = option(0, "attention probe reading from the store: DataLoader workers (default 0: the main process)")
    # an incomplete store is refused by default (extract.store.ShardReader); the default is left out of the run id and the row's config
    allow_partial: bool = option(
        False,
        "use a store that lacks parts, or sits beside a writer's claims, on purpose: the row records partial: {used, expected} utterances",
    )

    def __post_init__(self):
        kind = probe_kind(self.probe)
        object.__setattr__(self, "_kind", kind)  # resolved once; not a field, so neither the run id nor the row holds it
        column, _ = task_labels(self.task)
        if column == "gender" and self.labels:
            raise ProbeError(f"labels gives an attribute's manifest, and task {self.task} reads gender from the store: leave labels out")
        if self.control not in controls.CONTROLS:
            raise ProbeError(f"unknown control {self.control!r}; choose from {controls.CONTROLS}")
        if self.language is not None and not self.language.strip():
            raise ProbeError(f"language {self.language!r} is empty: give a language code (e.g. en), or leave it out for every language")
        if (problem := field_problem(ProbeConfig, "seed", self.seed)) is not None:
            raise ProbeError(f"seed {self.seed}: {problem}")
        if self.positions <= 0:
            raise ProbeError(f"positions must be a positive number of frames, got {self.positions}")
        if self.apply_to and not kind.applies_to_other_stores:
            applying = " or ".join(name for name, other in KINDS.items() if other.applies_to_other_stores)
            raise ProbeError(f"apply_to works with the {applying} probe only, not {self.probe!r}")
        check_training_options(self.max_epochs, self.lr, self.c, self.max_iter)
        if self.memory_gb <= 0:
            raise ProbeError(f"memory_gb must be a positive budget in GB, got {self.memory_gb}")
        if self.loader_workers < 0:
            raise ProbeError(f"loader_workers must be 0 or more, got {self.loader_workers}")
        if self.split not in SPLITS:
            raise ProbeError(f"unknown split {self.split!r}; choose from {SPLITS}")
        if self.mdl_order not in MDL_ORDERS:
            raise ProbeError(f"unknown mdl_order {self.mdl_order!r}; choose from {MDL_ORDERS}")
        if self.split == "loso":
            _check_loso(self)

    @property
    def kind(self) -> ProbeKind:
        """The record of ``probe`` in :data:`probing.kinds.KINDS`, looked up when the config was made."""
        return self._kind

    def run_id(self) -> str:
        """A hash of everything that determines the result, the seed included (not the device or the
        memory budget: how a run is computed, not what). The stores count by their canonical path
        (:func:`extract.paths.canonical_path`), so ``stores/wb``, ``./stores/wb`` and ``stores/wb/``
        are one run; what they hold is the row's ``store_identity``. DataLoader workers do change an
        attention probe's training slightly (measured: probabilities within 0.02; Lightning's epoch
        loop ends differently when the last batch is full), so a run with workers has its own id;
        without workers the field is left out. So are the default ``split``, ``mdl_guard`` and
        ``mdl_order``: a run from before leave-one-speaker-out, the unguarded MDL or the MDL order
        option existed keeps its id."""
        identity = {k: v for k, v in asdict(self).items() if k not in RESOURCE_FIELDS + LABEL_FIELDS}
        identity |= {"store": canonical_path(self.store), "apply_to": canonical_path(self.apply_to) if self.apply_to else None}
        if self.split == DEFAULT_SPLIT:
            del identity["split"]
        if self.mdl_guard:
            del identity["mdl_guard"]
        if self.mdl_order == "speaker":
            del identity["mdl_order"]
        if not self.allow_partial:
            del identity["allow_partial"]
        if self.loader_workers:
            identity["loader_workers"] = self.loader_workers
        return hashlib.sha1(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


def _check_loso(config: ProbeConfig) -> None:
    """Options that do not combine with leave-one-speaker-out, refused in one line."""
    refusals = (
        (
            config.mdl,
            "MDL's online code has no test split to leave a speaker out of: it already codes each block with probes trained "
            "on earlier speakers only (a seeded speaker order); run mdl with split fixed",
        ),
        (
            config.control == "speaker",
            "the speaker control is trained and scored within speakers, and leave-one-speaker-out never scores a voice heard "
            "in training; use control shuffled, or split fixed",
        ),
        (bool(config.apply_to), "apply_to predicts with one trained probe, and leave-one-speaker-out trains one per fold; use split fixed"),
        (config.allow_shared_speakers, "leave-one-speaker-out never shares a speaker between train and test: allow_shared_speakers does not apply"),
    )
    for refused, message in refusals:
        if refused:
            raise ProbeError(f"split loso: {message}")


@dataclass
class ProbeResult:
    """What :func:`run_probe` returns: the result ``row`` (:mod:`probing.results` says every key;
    :class:`extract.records.ProbeRow` types it), the arrays saved beside it (per-position scores,
    applied-store predictions) and the test utterances' attention weights (attention probes)."""

    row: dict
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    attention: dict[str, list] = field(default_factory=dict)  # ids and weights of test utterances


def _labels(splits: ProbeSplits, control: str, seed: int) -> dict[str, np.ndarray]:
    """True labels, or a control's: ``shuffled`` replaces train and dev labels (dev selects models:
    attention early stopping, the sampled position), test stays true; ``speaker`` labels every split
    by a random class per speaker, balanced within each gender (meant for the within-speaker split)."""
    labels = {name: getattr(splits, name).labels.copy() for name in ("train", "dev", "test")}
    if control == "shuffled":
        rng = np.random.default_rng(seed)
        for name in ("train", "dev"):
            labels[name] = controls.shuffled(labels[name], rng, getattr(splits, name).speakers)
    elif control == "speaker":
        every = {n: getattr(splits, n) for n in labels}
        mapping = controls.speaker_labels(np.concatenate([s.speakers for s in every.values()]), seed, np.concatenate([s.labels for s in every.values()]))
        labels = {n: np.array([mapping[s] for s in every[n].speakers], dtype=int) for n in labels}
    return labels


def _row_metrics(scores: dict, positions: slice, names: tuple[str, str]) -> dict:
    return {
        "f1_macro": float(np.mean(scores["f1_macro"][positions])),
        "accuracy": float(np.mean(scores["accuracy"][positions])),
        "recall": {names[0]: float(np.mean(scores["recall_0"][positions])), names[1]: float(np.mean(scores["recall_1"][positions]))},
    }


def _positional_run(config, reader, splits, labels):
    """Per-position probes, a chunk of positions at a time (positions are independent): each chunk is
    read, standardized with its training statistics, fitted, scored and MDL-coded, so memory follows
    ``config.memory_gb`` rather than N x P x D. When that takes more than one chunk, the positions are
    first copied position-major to a scratch file under ``$TMPDIR`` (N x P x D in the store's dtype),
    deleted afterwards. Returns per-position scores, the positions used and the code."""
    from probing.train import fit_logistic

    ids = {n: getattr(splits, n).ids for n in ("train", "test")}  # positional probes select nothing on dev
    stored = {n: reader.stored_lengths(config.site, ids[n]) for n in ids}
    width = min(config.positions, int(max(stored["train"].max(), stored["test"].max())))
    masks = {n: features.valid_mask(np.minimum(stored[n], width), width) for n in ids}
    step = features.positions_per_chunk(config.memory_gb, len(ids["train"]) + len(ids["test"]), reader.dim(config.site), width)
    scores, codes = [], []
    with contextlib.ExitStack() as stack:
        read = partial(_read_from_store, reader, config.site, ids)
        if step < width:  # more than one chunk: one pass over the store into a position-major scratch file (see PositionMajorFile)
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="probe-positions-"))
            block = int(max(features.FLOAT32, (config.memory_gb - features.BASE_GB) * 2**30 / 4))
            scratch = features.write_position_major(reader, config.site, ids["train"] + ids["test"], width, Path(folder), block)
            stack.callback(scratch.close)
            read = partial(_read_from_scratch, scratch, len(ids["train"]))
        for begin in range(0, width, step):
            end = min(begin + step, width)
            x = read(begin, end)
            mask = {n: masks[n][:, begin:end] for n in ids}
            if config.standardize:
                scaler = features.Standardizer.fit(x["train"], mask["train"])
                x = {n: scaler(v) for n, v in x.items()}
            model = fit_logistic(x["train"], labels["train"], mask["train"], c=config.c, max_iter=config.max_iter, device=config.device, seed=config.seed)
            scores.append(metrics.position_scores(labels["test"], (model.probabilities(x["test"]) > 0.5).astype(int), mask["test"]))
            if config.mdl:
                codes.append(online_code_logistic(x["train"], labels["train"], mask["train"], splits.train.speakers, **_mdl_options(config)))
    joined = {key: np.concatenate([part[key] for part in scores]) for key in scores[0]}
    return joined, width, join_codes(codes) if codes else None


def _read_from_store(reader, site: str, ids: dict, begin: int, end: int) -> dict:
    return {n: reader.frames(site, begin, end, ids[n]) for n in ids}


def _read_from_scratch(scratch, train_count: int, begin: int, end: int) -> dict:
    x = scratch.read(begin, end)
    return {"train": x[:train_count], "test": x[train_count:]}


def join_codes(codes: list[OnlineCode]) -> OnlineCode:
    """Online codes of consecutive position chunks as one (blocks depend on labels and speakers only)."""
    first = codes[0]
    chosen = None if first.chosen is None else np.concatenate([code.chosen for code in codes], axis=1)
    return OnlineCode(
        np.concatenate([c.online_bits for c in codes]),
        np.concatenate([c.uniform_bits for c in codes]),
        first.block_ends,
        first.uniform_blocks,
        chosen,
        first.grid,
        first.order,
    )


def positional_probe(config, reader, splits, labels):
    """The positional kind's runner: a logistic regression per position (:func:`_positional_run`)."""
    return _finish_positional(config, reader, splits, *_positional_run(config, reader, splits, labels))


def pooled_probe(config, reader, splits, labels):
    """The mean and max kinds' runner: a logistic regression on the states pooled over speech frames
    (multinomial for three classes or more: :func:`_multiclass_pooled`)."""
    if len(splits.class_names) > 2:
        return _multiclass_pooled(config, reader, splits, labels)
    fitted = _pooled_fit(config, reader, splits, labels)
    arrays = fitted.arrays | {"test_predicted": fitted.predictions[:, 0]}
    return _logistic_row(fitted.scores, slice(0, 1), fitted.lengths, arrays, fitted.code, splits)


def sampled_probe(config, reader, splits, labels):
    """The sampled kind's runner: a logistic regression per frame at fixed fractions of the speech,
    the fraction reported chosen by its dev F1 (the first fraction without dev utterances)."""
    fitted = _pooled_fit(config, reader, splits, labels)
    chosen = 0
    if len(splits.dev):
        dev_scores = metrics.position_scores(labels["dev"], (fitted.model.probabilities(fitted.x["dev"]) > 0.5).astype(int))
        chosen = int(np.argmax(dev_scores["f1_macro"]))
    extra = {"sampled_fraction": features.SAMPLED_FRACTIONS[chosen], "chosen_on": "dev" if len(splits.dev) else "first position"}
    arrays = fitted.arrays | {"test_predicted": fitted.predictions[:, chosen]}
    return _logistic_row(fitted.scores, slice(chosen, chosen + 1), extra | fitted.lengths, arrays, fitted.code, splits)


def _multiclass_pooled(config, reader, splits, labels):
    """A multinomial logistic regression (:func:`probing.train.fit_multinomial`) on pooled states,
    scored on test by macro F1 over every class; ``test_predicted`` holds the class numbers."""
    from probing.train import fit_multinomial

    x = {n: features.pooled(reader, config.site, getattr(splits, n).ids, config.probe) for n in ("train", "test")}
    if config.standardize:
        scaler = features.Standardizer.fit(x["train"], np.ones(x["train"].shape[:2], dtype=bool))
        x = {n: scaler(v) for n, v in x.items()}
    model = fit_multinomial(x["train"][:, 0], labels["train"], c=config.c, max_iter=config.max_iter)
    predicted = model.predict(x["test"][:, 0])
    row = metrics.multiclass_summary(labels["test"], predicted, splits.class_names)
    return row | _lengths(*features.mean_lengths(reader, config.site, splits.test.ids)), {"test_predicted": predicted}, {}


def refuse_many_classes(config: ProbeConfig, classes: tuple[str, ...]) -> None:
    """Three classes or more are probed by a multiclass kind (:attr:`probing.kinds.ProbeKind.multiclass`)
    on a fixed or stratified split, without a control or MDL (each defined for two classes): any other
    combination is refused in one line naming ``--pairs`` (one binary probe per pair of classes)."""
    if len(classes) <= 2:
        return
    what = f"{config.task} has {len(classes)} classes ({', '.join(classes)})"
    refusals = (
        (not config.kind.multiclass, f"--probe {config.probe} tells two classes apart"),
        (config.control != "none", f"the {config.control} control is defined for two classes"),
        (config.mdl, "the online code (--mdl) is computed for two classes"),
        (config.split == "loso", "leave-one-speaker-out pools two classes"),
    )
    for refused, reason in refusals:
        if refused:
            multiclass = " or ".join(name for name, kind in KINDS.items() if kind.multiclass)
            raise ProbeError(f"{reason}, and {what}: probe each pair of classes with --pairs, or probe them all with --probe {multiclass} alone")


@dataclass
class _PooledFit:
    model: object
    x: dict  # standardized features per split (None for an empty split)
    scores: dict  # test scores per pooled position
    predictions: np.ndarray  # [test utterances, pooled positions]: the predicted class
    arrays: dict
    code: OnlineCode | None
    lengths: dict  # mean_test_length, and stored_positions where it differs


def _pooled_fit(config, reader, splits, labels) -> _PooledFit:
    """A logistic regression on pooled features (``features.pooled`` named by the kind), scored on test
    and MDL-coded when asked."""
    from probing.train import fit_logistic

    ids = {n: getattr(splits, n).ids for n in ("train", "dev", "test")}
    x = {n: features.pooled(reader, config.site, ids[n], config.probe) if ids[n] else None for n in ids}
    masks = {n: np.ones(x[n].shape[:2], dtype=bool) if x[n] is not None else None for n in x}
    if config.standardize:
        scaler = features.Standardizer.fit(x["train"], masks["train"])
        x = {n: scaler(v) if v is not None else None for n, v in x.items()}
    model = fit_logistic(x["train"], labels["train"], masks["train"], c=config.c, max_iter=config.max_iter, device=config.device, seed=config.seed)
    predictions = (model.probabilities(x["test"]) > 0.5).astype(int)
    scores = metrics.position_scores(labels["test"], predictions, masks["test"])
    arrays = {f"test_{k}": np.asarray(v) for k, v in scores.items()}
    code = None
    if config.mdl:
        code = online_code_logistic(x["train"], labels["train"], masks["train"], splits.train.speakers, **_mdl_options(config))
    return _PooledFit(model, x, scores, predictions, arrays, code, _lengths(*features.mean_lengths(reader, config.site, ids["test"])))


def _mdl_options(config: ProbeConfig) -> dict:
    """The logistic online code's options: the guarded mixture over :data:`probing.mdl.DEFAULT_C_GRID`,
    or (``mdl_guard`` false) every block at the run's fixed ``c``."""
    options = {"seed": config.seed, "max_iter": config.max_iter, "device": config.device, "order": config.mdl_order}
    return options | ({"c_grid": DEFAULT_C_GRID} if config.mdl_guard else {"c_grid": None, "c": config.c})


UNGUARDED = "none: every block at the fixed C"


def _lengths(mean_test_length: float, stored_positions: float) -> dict:
    """The row's ``mean_test_length``, and ``stored_positions`` where stored frames differ from speech frames."""
    return {"mean_test_length": mean_test_length, **({"stored_positions": stored_positions} if stored_positions != mean_test_length else {})}


def _finish_positional(config, reader, splits, scores, width, code):
    arrays = {f"test_{k}": np.asarray(v) for k, v in scores.items()}
    arrays["test_f1_ema"] = metrics.ema(scores["f1_macro"], 3)
    mean_test_length, stored_positions = features.mean_lengths(reader, config.site, splits.test.ids)
    extra = {"f1_s": metrics.f1_s(scores["f1_macro"], mean_test_length), "positions_used": int(width)} | _lengths(mean_test_length, stored_positions)
    return _logistic_row(scores, slice(0, int(np.ceil(mean_test_length))), extra, arrays, code, splits)


def _logistic_row(scores, span, extra, arrays, code, splits):
    """Row metrics over ``span``, the extras, and the MDL summary when there is a code."""
    row_metrics = _row_metrics(scores, span, splits.class_names)
    if code is not None:
        arrays |= {"mdl_online_bits": code.online_bits, "mdl_uniform_bits": code.uniform_bits, "mdl_c": code.chosen}
        extra |= _mdl_summary(code, span, MIXTURE_GUARD if code.grid else UNGUARDED)
    return row_metrics | extra, arrays, {}


def _mdl_summary(code, span: slice, guard: str) -> dict:
    """Codelengths summed over ``span``; with a grid guard, the C with most weight entering each block
    (for several positions, the lower median over ``span``; every position's is in the arrays as ``mdl_c``)."""
    online, uniform = float(np.sum(code.online_bits[span])), float(np.sum(code.uniform_bits[span]))
    guarded = {}
    if code.grid:
        chosen = code.chosen[:, span]
        guarded = {
            "mdl_c_grid": list(code.grid),
            "mdl_c_per_block": [None if np.isnan(c).all() else float(np.percentile(c[~np.isnan(c)], 50, method="lower")) for c in chosen],
        }
    return {
        "codelength_online_bits": online,
        "codelength_uniform_bits": uniform,
        "compression": uniform / online if online > 0 else float("nan"),
        "mdl_blocks": len(code.block_ends),
        "mdl_order": code.order,
        "mdl_uniform_blocks": code.uniform_blocks,
        "mdl_uniform_block_count": code.uniform_block_count,
        **({"mdl_positions": [span.start, span.stop]} if span.stop - span.start > 1 else {}),
        "mdl_guard": guard,
        **guarded,
    }


def attention_probe(config, reader, splits, labels):
    """The attention kind's runner: attention pooling trained with early stopping on the dev split.
    Three classes or more: a K-class softmax head, each test utterance predicted as its most probable
    class and scored by macro F1 over every class (:func:`probing.metrics.multiclass_summary`); the
    attention output's ``probabilities`` are then ``[N, K]`` (two classes: P(class 1), ``[N]``)."""
    from torch.utils.data import Subset

    from probing.train import fit_attention

    if not len(splits.dev):
        raise ProbeError(
            f"the attention probe stops early on a dev split, and the {splits.task} dev split is empty; give dev utterances of both classes in the manifest"
        )
    data, scaler = _sequence_data(config, reader, splits, labels)
    dim, classes = reader.dim(config.site), len(splits.class_names)

    def fit(indices):
        return fit_attention(
            Subset(data["train"], indices),
            data["dev"],
            dim,
            config.max_epochs,
            config.device,
            config.seed,
            lr=config.lr,
            workers=config.loader_workers,
            classes=classes,
        )

    model = fit(np.arange(len(data["train"])))
    if classes > 2:
        probabilities, weights = model.class_probabilities(data["test"], workers=config.loader_workers)
        row = metrics.multiclass_summary(labels["test"], probabilities.argmax(axis=1), splits.class_names)
    else:
        probabilities, weights = model.predict(data["test"], workers=config.loader_workers)
        row = metrics.summary(labels["test"], (probabilities > 0.5).astype(int), splits.class_names)
    row |= {"best_epoch": model.best_epoch, "epochs": model.epochs}
    arrays = {}
    if config.apply_to:
        applied_row, arrays = _apply(config, model, scaler, splits.class_names)
        row |= applied_row
    if config.mdl:
        code = online_code(
            labels["train"],
            np.ones((len(data["train"]), 1), bool),
            splits.train.speakers,
            fit,
            lambda m, idx: m.predict(Subset(data["train"], idx), workers=config.loader_workers)[0],
            seed=config.seed,
            order=config.mdl_order,
        )
        row |= _mdl_summary(code, slice(0, 1), "attention early stopping on the dev split")
    return row, arrays, {"ids": splits.test.ids, "weights": weights, "probabilities": probabilities}


def _sequence_data(config, reader, splits, labels):
    """The attention probe's (sequence, label) datasets per split, and the standardizer (None without).

    Held in memory when the speech frames (and their standardized copy) fit ``config.memory_gb``;
    otherwise read from the store batch by batch (statistics computed in one streaming pass), so a
    run's memory does not grow with the corpus."""
    from probing.train import SequenceDataset, StoreSequenceDataset

    ids = {n: getattr(splits, n).ids for n in ("train", "dev", "test")}
    held = sum(features.sequence_bytes(reader, config.site, ids[n]) for n in ids)
    if 2 * held <= (config.memory_gb - features.BASE_GB) * 2**30:
        seqs = {n: features.sequences(reader, config.site, ids[n]) for n in ids}
        scaler = features.Standardizer.fit_sequences(seqs["train"]) if config.standardize else None
        return {n: SequenceDataset(scaler.sequences(seqs[n]) if scaler else seqs[n], labels[n]) for n in ids}, scaler
    scaler = features.Standardizer.fit_stream(features.speech_states(reader, config.site, ids["train"])) if config.standardize else None
    return {n: StoreSequenceDataset(reader, config.site, ids[n], labels[n], scaler) for n in ids}, scaler


def _apply(config, model, scaler, class_names: tuple[str, ...]) -> tuple[dict, dict]:
    """Predict every utterance of the ``apply_to`` store; score those labelled with one of the task's classes.

    Labels are the other store's genders, or for an attribute task its values of the attribute, read
    from the manifest that store records (:func:`applied_attribute`). Utterances of other genders
    (values) are predicted but not scored; ``applied_to`` counts both. Scores need every class of the
    probe among the labelled utterances (a macro F1 over one class means nothing, and a class absent
    there would count 0). Three classes or more: ``applied_probabilities`` are ``[N, K]`` and each
    utterance is predicted as its most probable class.
    """
    from extract.store import ShardReader
    from probing.train import StoreSequenceDataset

    other = ShardReader(config.apply_to, allow_partial=config.allow_partial)
    applied = StoreSequenceDataset(other, config.site, other.ids, np.zeros(len(other.ids), dtype=int), scaler)
    many = len(class_names) > 2
    probabilities, _ = model.class_probabilities(applied) if many else model.predict(applied)  # one pass over the store, read utterance by utterance
    arrays = {"applied_ids": np.array(other.ids), "applied_probabilities": probabilities, "applied_class_names": np.array(class_names)}
    summary = {"store": config.apply_to, "subject": store_subject(other), "utterances": len(other.ids), "scored": 0}
    if task_attribute(config.task) is None:
        values = np.array(other.metadata()["gender"], dtype=object)
        labelled = np.isin(values, class_names)
    else:
        values, record = applied_attribute(config, other)
        summary["labels"] = record
        labelled = np.array([value in class_names for value in values], dtype=bool)
    labels = np.array([class_names.index(value) for value in values[labelled]], dtype=int)
    if not many and len(set(labels.tolist())) < 2:
        summary["not_scored"] = (
            f"needs utterances labelled {class_names[0]} and {class_names[1]}; "
            f"found {int(labels.sum())} {class_names[1]} and {int((1 - labels).sum())} {class_names[0]}"
        )
        return {"applied_to": summary}, arrays
    if many and len(set(labels.tolist())) < len(class_names):
        found = ", ".join(f"{int(np.sum(labels == k))} {name}" for k, name in enumerate(class_names))
        summary["not_scored"] = f"needs utterances of every class the probe tells apart ({', '.join(class_names)}); found {found}"
        return {"applied_to": summary}, arrays
    summary["scored"] = int(labelled.sum())
    if many:
        scores = metrics.multiclass_summary(labels, probabilities[labelled].argmax(axis=1), class_names)
    else:
        scores = metrics.summary(labels, (probabilities[labelled] > 0.5).astype(int), class_names)
    return {"applied_to": summary, **{f"applied_{key}": value for key, value in scores.items()}}, arrays


def applied_attribute(config: ProbeConfig, other) -> tuple[np.ndarray, dict]:
    """The ``apply_to`` store's values of the task's attribute, per utterance in store order (None
    where unlabelled), and what the row records of them (:meth:`extract.attributes.AttributeLabels.record`):
    read from the manifest that store records, refused unless its sha256 is the one recorded there,
    as the probed store's are (:func:`probe_metadata`)."""
    from extract.manifest import ManifestError

    attribute, stored = task_attribute(config.task), other.info.config
    where = f"the apply_to store {config.apply_to}"
    manifest = stored.get("manifest")
    if not manifest or not Path(manifest).is_file():
        if manifest:  # no --labels for this store: where its manifest moved, the command runs from where the store was built
            gone = (
                f"was built from the manifest {manifest}, which is not there: its {attribute} labels cannot be read; "
                "a relative path counts from where that store was built: run from there, or restore that manifest"
            )
        else:
            gone = f"records no manifest: its {attribute} labels cannot be read; rebuild the store from a manifest that holds them"
        raise ProbeError(f"{where} {gone}")
    try:
        found = read_attribute(manifest, attribute, stored.get("manifest_sha256"), where)
    except (LabelError, ManifestError) as error:
        raise ProbeError(str(error)) from error
    values = np.array([found.values.get(i) for i in other.ids], dtype=object)
    return values, found.record(int(sum(value is None for value in values)))


def _refuse_an_applied_store_without_the_site(config: ProbeConfig, reader, other) -> None:
    """The ``apply_to`` store must hold the site, as wide as the probed store's (another model's
    states cannot go through this probe): refused before the probe trains."""
    if config.site not in other.sites:
        raise ProbeError(f"the apply_to store {config.apply_to} has no site {config.site!r}; it has {', '.join(other.sites)}")
    if other.dim(config.site) != reader.dim(config.site):
        raise ProbeError(
            f"the apply_to store {config.apply_to}: its {config.site} is {other.dim(config.site)} wide and {config.store}'s is "
            f"{reader.dim(config.site)}: a probe applies to states of the same model's site; give a store extracted by the model probed"
        )


def _applied_store_speakers_shared(config: ProbeConfig, splits: ProbeSplits) -> list[str]:
    """Speakers of the ``apply_to`` store that the probe was trained on: an error unless allowed."""
    from extract.store import ShardReader

    other = ShardReader(config.apply_to, allow_partial=config.allow_partial)
    shared = sorted(set(splits.train.speakers.tolist()) & set(other.metadata()["speaker"]))
    if shared and not config.allow_shared_speakers:
        raise ProbeError(shared_speakers_message({f"the apply_to store {config.apply_to}": shared}))
    return shared


def partial_record(reader, applied=None) -> dict:
    """A row's ``partial`` (``{used, expected}`` utterances) when its store was read incomplete on
    purpose (``allow_partial``), and ``applied_partial`` for its ``apply_to`` store; nothing when whole."""
    record = {"partial": reader.partial.record()} if reader.partial is not None else {}
    if applied is not None and applied.partial is not None:
        record["applied_partial"] = applied.partial.record()
    return record


def row_config(config: ProbeConfig) -> dict:
    """The row's ``config``: every field, but ``labels`` only where it was given (a gender row keeps the keys it had)."""
    return {k: v for k, v in asdict(config).items() if (k not in LABEL_FIELDS or v is not None) and (k != "allow_partial" or v)}


def probe_metadata(config: ProbeConfig, reader) -> tuple[dict, dict]:
    """The store's metadata for ``config.task`` and what the row records of its labels. A gender task
    reads the store alone (nothing to record). An attribute task reads the attribute from the manifest
    the store was extracted from (``labels``, else the path its config records), refused unless its
    sha256 is the one the store recorded (:func:`extract.attributes.read_attribute`); its values become
    the column :func:`probing.data.attribute_column`, and the row's ``labels`` names the attribute,
    the manifest and how many utterances (of the language probed) have no value and are left out."""
    from extract.manifest import ManifestError

    metadata = reader.metadata()
    attribute = task_attribute(config.task)
    if attribute is None:
        return metadata, {}
    stored = reader.info.config
    manifest = config.labels or stored.get("manifest")
    if not manifest:
        raise ProbeError(f"store {config.store} records no manifest to read the attribute {attribute} from: pass --labels MANIFEST")
    try:
        found = read_attribute(manifest, attribute, stored.get("manifest_sha256"), f"store {config.store}", given=config.labels is not None)
    except (LabelError, ManifestError) as error:
        raise ProbeError(str(error)) from error
    values = [found.values.get(i) for i in reader.ids]
    probed = [config.language is None or language == config.language for language in metadata["language"]]
    unlabelled = sum(value is None for value, keep in zip(values, probed) if keep)
    return {**metadata, attribute_column(attribute): values}, {"labels": found.record(unlabelled)}


def pair_tasks(config: ProbeConfig) -> list[str]:
    """The one-vs-one tasks of an every-class attribute task (``attribute:NAME``): one per pair of the
    classes its utterances have (in ``config.language`` when given), each ``attribute:NAME:A,B`` with
    A before B in sorted order (A the positive class). Fewer than two classes is a :class:`ProbeError`."""
    attribute, (column, named) = task_attribute(config.task), task_labels(config.task)
    if attribute is None or named:
        raise ProbeError(f"pairs are of every class of an attribute (a task attribute:NAME), not of {config.task}")
    from extract.store import ShardReader

    reader = ShardReader(config.store, allow_partial=config.allow_partial)
    metadata, _ = probe_metadata(config, reader)
    probed = [config.language is None or language == config.language for language in metadata["language"]]
    classes = sorted({value for value, keep in zip(metadata[column], probed) if keep and value is not None})
    if len(classes) < 2:
        raise ProbeError(
            f"{config.task} has {len(classes)} class ({', '.join(classes)}) in store {config.store}{_in_language(config)}: pairs need two classes at least"
        )
    try:
        return [attribute_task(attribute, pair) for pair in itertools.combinations(classes, 2)]
    except LabelError as error:
        raise ProbeError(str(error)) from error


def _in_language(config: ProbeConfig) -> str:
    return f" in language {config.language}" if config.language else ""


def store_identity(*paths: str | Path) -> str:
    """A cheap fingerprint of stores' contents, hashed: each complete part's name, the content checksum
    its writer recorded (``content_sha256``; absent in parts written before it existed), size, inode
    and modification time, store by store (not how a store's path is spelled). Rewriting a part (a
    new file renamed into place) changes it; reading does not."""
    from extract.store import recorded_checksum, store_parts

    entries = []
    for index, path in enumerate(map(Path, paths)):
        for part in [path] if path.is_file() else store_parts(path):
            stat = os.stat(part)
            entries.append([index, part.name, recorded_checksum(part), stat.st_size, stat.st_ino, stat.st_mtime_ns])
    return hashlib.sha1(json.dumps(entries).encode()).hexdigest()[:16]


def store_subject(reader, language: str | None = None) -> dict:
    """What a store's probe rows are about, copied from the store: ``model`` (its label), ``family``,
    ``checkpoint``, ``revision``, ``manifest_sha256``, and the ``dataset`` and ``language`` of the
    utterances probed (``language``: the probe's language filter, else the store's languages; several
    values joined with ``+``). A store written before labels existed gets the default label of its
    family and checkpoint (:func:`extract.provenance.model_label`)."""
    info = reader.info
    config = info.config
    family = info.family or None
    checkpoint = config.get("checkpoint") or info.model_id or None
    metadata = reader.metadata()
    chosen = [i for i, value in enumerate(metadata["language"]) if language is None or value == language]
    return {
        "model": config.get("label") or model_label(family, checkpoint, bool(config.get("random_init"))),
        "family": family,
        "checkpoint": checkpoint,
        "revision": config.get("revision") or info.revision or None,
        "manifest_sha256": config.get("manifest_sha256"),
        "dataset": joined(metadata["dataset"][i] for i in chosen),
        "language": language or joined(metadata["language"]),
    }


def config_store_identity(config: ProbeConfig) -> str:
    """The fingerprint of every store a run reads (``store`` and ``apply_to``)."""
    return store_identity(*[p for p in (config.store, config.apply_to) if p])


def _control_run(config: ProbeConfig, reader, splits: ProbeSplits, runner):
    """A control run and the real probe on the same split (within-speaker for the speaker control).

    The control is trained once per seed of :func:`controls.control_seeds` and reported as the mean
    (``control_seeds``, ``control_f1_per_seed``); its MDL, when asked for, codes the first seed's
    labels (``mdl_control_seed``). Returns the split used and the runner's (scores, arrays, attention).
    """
    if config.control == "speaker":
        splits = controls.within_speaker_splits(splits, config.seed)
    seeds = controls.control_seeds(config.seed)
    without_mdl = ProbeConfig(**{**asdict(config), "mdl": False})
    runs = [runner(config if i == 0 else without_mdl, reader, splits, _labels(splits, config.control, s)) for i, s in enumerate(seeds)]
    scores, arrays, attention = runs[0]
    key = config.kind.headline
    per_seed = [run[0][key] for run in runs]
    scores |= _mean_scores([run[0] for run in runs])
    arrays |= {name: np.mean([run[1][name] for run in runs], axis=0) for name in arrays if name.startswith("test_")}
    real, _, _ = runner(ProbeConfig(**{**asdict(without_mdl), "control": "none"}), reader, splits, _labels(splits, "none", config.seed))
    scores |= {"selectivity": controls.selectivity(real[key], scores[key]), "f1_real": real[key], "control_seeds": seeds, "control_f1_per_seed": per_seed}
    if config.control == "speaker":
        scores["control_split"] = {"source": splits.source, "seed": config.seed, "shares": dict(controls.WITHIN_SPEAKER_SHARES)}
    if config.mdl:
        scores["mdl_control_seed"] = seeds[0]
    return splits, (scores, arrays, attention)


def _mean_scores(rows: list[dict]) -> dict:
    """The mean over control seeds of the score keys (F1, F1_S, accuracy, recall per class)."""
    means = {key: float(np.mean([row[key] for row in rows])) for key in ("f1_macro", "f1_s", "accuracy") if key in rows[0]}
    means["recall"] = {name: float(np.mean([row["recall"][name] for row in rows])) for name in rows[0]["recall"]}
    return means


FOLD_DETAILS = ("sampled_fraction", "best_epoch", "epochs")  # what a fold's run chose, kept in its entry of ``folds``


def _loso_run(config: ProbeConfig, reader, metadata: dict, runner) -> tuple[dict, tuple[dict, dict, dict]]:
    """Leave one speaker out: each fold (:func:`probing.data.leave_one_speaker_out`) trained and scored
    with the real labels, and for a control run with each control seed's labels too; then pooled.

    The row's ``f1_macro``, ``accuracy`` and ``recall`` (``f1_s`` for positional probes) pool the
    predictions of every fold, each utterance predicted once by a probe that never heard its speaker:
    ``f1_macro`` is the headline, comparable with a fixed split's. ``folds`` gives each held-out
    speaker's class, utterances and ``accuracy`` (a fold holds one class, so its F1 means nothing;
    for positional probes, the mean over its speech positions), and ``fold_accuracy_mean`` their mean,
    which weighs every speaker alike; a probe naming every utterance with the class most speakers
    have scores that class's share of speakers there, not 50, so read it beside the pooled F1. On
    features without signal, leaving a speaker out errs against it (its class's training mean moves
    away from its own values), so with few speakers scores below chance happen (F1 24.5 on 6 voices
    of equal pitch, tests/experiments/test_f0_baseline.py); the shuffled control shows where chance lies.
    A control run reports the mean over control seeds, with ``f1_real``, ``selectivity`` and each
    fold's ``accuracy_real``. Probes that predict one class per utterance (mean, max, sampled) also
    save ``test_ids`` (every utterance, in fold order) and ``test_correct`` (1 where its fold's probe
    predicted it right, 0 where not; for a control run the share of control seeds that did) in the
    run's arrays: accuracy per any grouping of utterances, e.g. per voice where a speaker reads two
    languages. Returns the splits' description and (scores, arrays, attention)."""
    kind = config.kind
    folds = leave_one_speaker_out(metadata, reader.ids, config.task, config.seed, config.language, dev=bool(kind.selects_on_dev))
    refuse_many_classes(config, folds[0].splits.class_names)
    real = ("none", config.seed)
    labellings = [real] if config.control == "none" else [(config.control, s) for s in controls.control_seeds(config.seed)] + [real]
    outcomes: dict[tuple, list[dict]] = {labelling: [] for labelling in labellings}
    attention: dict[str, list] = {"ids": [], "weights": [], "probabilities": []}
    for fold in folds:
        for number, labelling in enumerate(labellings):
            scores, arrays, found = runner(config, reader, fold.splits, _labels(fold.splits, *labelling))
            outcomes[labelling].append(_fold_outcome(config, fold, scores, arrays))
            if number == 0:  # the attention of the first labelling, as a fixed split's control run keeps
                for key, values in found.items():
                    attention[key].extend(values)
    tested = [i for fold in folds for i in fold.splits.test.ids]
    mean_test_length, stored_positions = features.mean_lengths(reader, config.site, tested)
    names = folds[0].splits.class_names
    pooled = {labelling: _pooled_scores(config, folds, found, mean_test_length, names) for labelling, found in outcomes.items()}
    shown = [labelling for labelling in labellings if labelling != real] or [real]
    scores = _mean_scores([pooled[labelling][0] for labelling in shown])
    scores["fold_accuracy_mean"] = float(np.mean([pooled[labelling][0]["fold_accuracy_mean"] for labelling in shown]))
    arrays = {name: np.mean([pooled[labelling][1][name] for labelling in shown], axis=0) for name in pooled[real][1]}
    entries = [_fold_entry(fold, [outcomes[labelling][k] for labelling in shown]) for k, fold in enumerate(folds)]
    if config.control != "none":
        key = kind.headline
        real_scores = pooled[real][0]
        scores |= {
            "selectivity": controls.selectivity(real_scores[key], scores[key]),
            "f1_real": real_scores[key],
            "fold_accuracy_mean_real": real_scores["fold_accuracy_mean"],
            "control_seeds": [seed for _, seed in shown],
            "control_f1_per_seed": [pooled[labelling][0][key] for labelling in shown],
        }
        for entry, outcome in zip(entries, outcomes[real]):
            entry["accuracy_real"] = outcome["accuracy"]
    scores |= {"folds": entries, "mean_test_length": mean_test_length}
    if kind.per_position:
        scores |= {"positions_used": int(len(arrays["test_f1_macro"]))}
    if stored_positions != mean_test_length:
        scores["stored_positions"] = stored_positions
    arrays |= {"fold_speakers": np.array([fold.speaker for fold in folds]), "fold_accuracy": np.array([entry["accuracy"] for entry in entries])}
    if all("utterance_correct" in outcome for outcome in outcomes[real]):
        correct = [np.concatenate([outcome["utterance_correct"] for outcome in outcomes[labelling]]) for labelling in shown]
        arrays |= {"test_ids": np.array(tested), "test_correct": np.mean(correct, axis=0)}
    attention = {**attention, "probabilities": np.asarray(attention["probabilities"])} if attention["ids"] else {}
    return _loso_sizes(folds, bool(kind.selects_on_dev)), (scores, arrays, attention)


def _fold_outcome(config: ProbeConfig, fold: Fold, scores: dict, arrays: dict) -> dict:
    """A fold's test utterances predicted right and scored (per position for positional probes, else
    for the span its row reports), its accuracy, and what it chose (:data:`FOLD_DETAILS`)."""
    if config.kind.per_position:
        count = np.asarray(arrays["test_count"], dtype=float)
        accuracy = np.asarray(arrays["test_accuracy"], dtype=float)
    else:
        count, accuracy = np.array([float(len(fold.splits.test))]), np.array([scores["accuracy"]])
    outcome = {
        "correct": np.rint(accuracy * count / 100),
        "count": count,
        "accuracy": scores["accuracy"],
        **{k: scores[k] for k in FOLD_DETAILS if k in scores},
    }
    if "test_predicted" in arrays:  # one prediction per utterance (mean, max, sampled): right or wrong, per utterance
        outcome["utterance_correct"] = (np.asarray(arrays["test_predicted"]) == fold.splits.test.labels).astype(float)
    return outcome


def _pooled_scores(config: ProbeConfig, folds: list[Fold], outcomes: list[dict], mean_test_length: float, names: tuple[str, str]) -> tuple[dict, dict]:
    """The row scores and ``test_*`` arrays of one labelling's folds, pooled (:func:`metrics.single_class_scores`)."""
    width = max(len(outcome["count"]) for outcome in outcomes)
    correct, count = np.zeros((len(folds), width)), np.zeros((len(folds), width))
    for k, outcome in enumerate(outcomes):
        correct[k, : len(outcome["count"])], count[k, : len(outcome["count"])] = outcome["correct"], outcome["count"]
    pooled = metrics.single_class_scores(np.array([fold.label for fold in folds]), correct, count)
    arrays = {f"test_{k}": np.asarray(v) for k, v in pooled.items()}
    if config.kind.per_position:
        arrays["test_f1_ema"] = metrics.ema(pooled["f1_macro"], 3)
        row = _row_metrics(pooled, slice(0, int(np.ceil(mean_test_length))), names) | {"f1_s": metrics.f1_s(pooled["f1_macro"], mean_test_length)}
    else:
        row = _row_metrics(pooled, slice(0, 1), names)
    return row | {"fold_accuracy_mean": float(np.mean([outcome["accuracy"] for outcome in outcomes]))}, arrays


def _fold_entry(fold: Fold, outcomes: list[dict]) -> dict:
    """A fold's entry in the row's ``folds``: speaker, class, utterances, speakers trained on, dev
    speakers where a dev split was held out, accuracy (the mean over control seeds for a control run)
    and what the fold's run chose (the first seed's)."""
    entry = {
        "speaker": fold.speaker,
        "class": fold.splits.class_names[fold.label],
        "utterances": len(fold.splits.test),
        "train_speakers": len(set(fold.splits.train.speakers.tolist())),
    }
    if len(fold.splits.dev):
        entry["dev_speakers"] = sorted(set(fold.splits.dev.speakers.tolist()))
    entry["accuracy"] = float(np.mean([outcome["accuracy"] for outcome in outcomes]))
    return entry | {k: outcomes[0][k] for k in FOLD_DETAILS if k in outcomes[0]}


def _loso_sizes(folds: list[Fold], with_dev: bool) -> dict:
    """The row's ``splits`` for a leave-one-speaker-out run."""
    names = folds[0].splits.class_names
    return {
        "source": "leave-one-speaker-out",
        "folds": len(folds),
        "speakers": {name: sum(fold.label == label for fold in folds) for label, name in enumerate(names)},
        "utterances": sum(len(fold.splits.test) for fold in folds),
        "dev": "one training speaker per class, drawn per fold" if with_dev else "none",
    }


def run_probe(config: ProbeConfig, reader=None) -> ProbeResult:
    """Trains and scores the probe ``config`` describes on its store (``reader``: the store already
    open, e.g. for several runs on one store) and returns its :class:`ProbeResult`;
    :func:`probing.results.save_result` appends it to a results file."""
    from extract.provenance import provenance
    from extract.store import ShardReader

    reader = reader or ShardReader(config.store, allow_partial=config.allow_partial)
    if config.site not in reader.sites:
        raise ProbeError(f"store {config.store} has no site {config.site!r}; it has {', '.join(reader.sites)}")
    refuse_what_the_store_lacks(config.kind, reader.info.config, config.store, config.positions)
    if config.apply_to:
        other = ShardReader(config.apply_to, allow_partial=config.allow_partial)
        _refuse_an_applied_store_without_the_site(config, reader, other)
        refuse_what_the_store_lacks(config.kind, other.info.config, config.apply_to, config.positions)
    runner = config.kind.run
    shared, only_shared = {}, {}
    metadata, labelled = probe_metadata(config, reader)
    if config.apply_to and task_attribute(config.task) is not None:
        applied_attribute(config, other)  # its labels refused before the probe trains, not after
    if config.split == "loso":
        sizes, (scores, arrays, attention) = _loso_run(config, reader, metadata, runner)
        if labelled:
            labelled["classes"] = list(sizes["speakers"])  # speakers per class, in class order
    else:
        if config.split == "stratified":
            splits = speaker_stratified_splits(metadata, reader.ids, config.task, config.seed, config.language)
            refused = speaker_disjoint_refusal(metadata, reader.ids, config.task, config.seed, config.language, bool(config.kind.selects_on_dev))
            if refused:
                only_shared = {"shared_speakers_only": f"runs only with speakers shared between train and test: {refused}"}
        else:
            dev_needed = bool(config.kind.selects_on_dev)
            splits = make_splits(metadata, reader.ids, config.task, config.seed, config.language, config.allow_shared_speakers, dev_needed)
        refuse_many_classes(config, splits.class_names)
        if labelled:
            labelled["classes"] = list(splits.class_names)
        shared = dict(splits.shared_speakers)
        applied_shared = _applied_store_speakers_shared(config, splits) if config.apply_to else []
        if applied_shared:
            shared["apply_to"] = applied_shared
        if config.control == "none":
            scores, arrays, attention = runner(config, reader, splits, _labels(splits, "none", config.seed))
        else:
            splits, (scores, arrays, attention) = _control_run(config, reader, splits, runner)
        sizes = splits.sizes()
    row = ProbeRow(
        schema=ROW_SCHEMA,
        run_id=config.run_id(),
        store_identity=config_store_identity(config),
        subject=store_subject(reader, config.language),
        site_index=reader.sites.index(config.site),
        config=row_config(config),
        seed=config.seed,
        splits=sizes,
        rest={
            **labelled,
            **partial_record(reader, other if config.apply_to else None),
            **({"shared_speakers": shared} if shared else {}),
            **only_shared,
            **scores,
            **provenance(),
        },
    )
    return ProbeResult(row.to_dict(), arrays, attention)
