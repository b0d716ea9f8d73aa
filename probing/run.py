"""One probe run: its config and run id, splits, labels (real or control), leave-one-speaker-out and
the result row; its kind's runner (:mod:`probing.kinds`) trains and scores."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from extract.options import LARGEST_LR, field_problem, option, seed_option
from extract.paths import canonical_path
from extract.records import ProbeRow, schema_version
from probing import controls, data, features, metrics
from probing.data import DEFAULT_SPLIT, SPLITS, Fold, ProbeError, ProbeSplits
from probing.kinds import DEFAULT_KIND, KINDS, ProbeKind, probe_kind, refuse_what_the_store_lacks
from probing.mdl import MDL_ORDERS

# probing.train (torch, Lightning: seconds to import) is imported by the functions that train, so that
# reading a grid, planning a study and every --help stay fast (tests/cli/test_entry_point.py checks it)

PROBES = tuple(KINDS)  # the probe kinds' names (probing.kinds is their registry)
ROW_SCHEMA = schema_version("probe_row")  # the result row's version (extract.records.FORMATS); rows without ``schema`` read as version 1
RESOURCE_FIELDS = ("device", "memory_gb", "loader_workers")  # left out of the run id (loader_workers: unless set, see run_id)
# where an attribute task's labels were read: checked against the store's manifest sha256, so the labels, not
# their path, count; left out of the run id, and out of the row's config when not given (gender rows keep theirs)
LABEL_FIELDS = ("labels",)


@dataclass(frozen=True)
class ProbeConfig:
    """One probe run. Its fields are the options of ``speech-gender probe``, of a grid file's ``options``
    and of a study's probe grids (``experiments.options`` derives the flags; ``docs/stages/probing.md``
    says what each does). A config that cannot run (an unknown kind or control, an option its kind
    does not take) is refused when it is made, with a :class:`probing.data.ProbeError`."""

    store: str = option(help="the store the probe learns from", role="input")
    site: str = option(help="the site of the store the probe reads")
    # help: each kind with its headline score; choices: a live view, so a kind registered later (a plug-in) is a choice too
    probe: str = option(DEFAULT_KIND, "; ".join(f"{k.name}: {k.summary} (headline {k.headline})" for k in KINDS.values()), choices=KINDS.keys())
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
    split: str = option(
        DEFAULT_SPLIT,
        "fixed (default): the manifest's train/dev/test, else speaker-disjoint 70/10/20; loso: leave one speaker out, "
        "one fold per speaker, scores pooled over folds (not with --mdl, --control speaker or --apply-to); stratified: each "
        "speaker's utterances spread 70/10/20 over train/dev/test, speakers shared (Attanasio et al. 2024, B.3)",
        choices=SPLITS,
    )
    # false: scikit-learn's defaults, as Attanasio et al. (probing.mdl says why the default guards)
    mdl_guard: bool = option(True, "logistic MDL: every block at the fixed C = 1, no mixture over a C grid", flag="--no-mdl-guard")
    # random: Voita & Titov 2020; Attanasio et al. 2024, B.3
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
        column, _ = data.task_labels(self.task)
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
        if self.max_epochs < 1:
            raise ProbeError(f"max_epochs must be at least 1 (0 epochs would score an untrained probe), got {self.max_epochs}")
        if self.max_iter < 1:
            raise ProbeError(f"max_iter must be at least 1, got {self.max_iter}")
        for name, value in (("lr", self.lr), ("c", self.c)):
            if not (math.isfinite(value) and value > 0):  # a NaN learning rate would fail inside the optimiser
                raise ProbeError(f"{name} must be a finite positive number, got {value}")
        if self.lr > LARGEST_LR:
            raise ProbeError(f"lr must be at most {LARGEST_LR:.3g} (Adam's first step, lr / (1 - β1), is a float32), got {self.lr}")
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
        without workers the field is left out. So are ``split``, ``mdl_guard``, ``mdl_order`` and
        ``allow_partial`` at their defaults: a run from before leave-one-speaker-out, the unguarded MDL
        or the MDL order option existed keeps its id."""
        at_default = {"split": DEFAULT_SPLIT, "mdl_guard": True, "mdl_order": "speaker", "allow_partial": False}
        identity = {k: v for k, v in asdict(self).items() if k not in RESOURCE_FIELDS + LABEL_FIELDS and (k, v) not in at_default.items()}
        identity |= {"store": canonical_path(self.store), "apply_to": canonical_path(self.apply_to) if self.apply_to else None}
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
    if refused := next((message for refused, message in refusals if refused), None):
        raise ProbeError(f"split loso: {refused}")


@dataclass
class ProbeResult:
    """What :func:`run_probe` returns: the result ``row`` (:mod:`probing.results` says every key;
    :class:`extract.records.ProbeRow` types it), the arrays saved beside it (per-position scores,
    applied-store predictions) and the test utterances' attention weights (attention probes)."""

    row: dict
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    attention: dict[str, list] = field(default_factory=dict)  # ids and weights of test utterances


def refuse_many_classes(config: ProbeConfig, classes: tuple[str, ...]) -> None:
    """Three classes or more are probed by a multiclass kind on a fixed or stratified split, without a control
    or MDL; any other combination is refused in one line naming ``--pairs`` (one binary probe per pair)."""
    if len(classes) <= 2:
        return
    what = f"{config.task} has {len(classes)} classes ({', '.join(classes)})"
    refusals = (
        (not config.kind.multiclass, f"--probe {config.probe} tells two classes apart"),
        (config.control != "none", f"the {config.control} control is defined for two classes"),
        (config.mdl, "the online code (--mdl) is computed for two classes"),
        (config.split == "loso", "leave-one-speaker-out pools two classes"),
    )
    if reason := next((reason for refused, reason in refusals if refused), None):
        multiclass = " or ".join(name for name, kind in KINDS.items() if kind.multiclass)
        raise ProbeError(f"{reason}, and {what}: probe each pair of classes with --pairs, or probe them all with --probe {multiclass} alone")


def row_config(config: ProbeConfig) -> dict:
    """The row's ``config``: every field, but ``labels`` only where it was given (a gender row keeps the keys it had)."""
    return {k: v for k, v in asdict(config).items() if (k not in LABEL_FIELDS or v is not None) and (k != "allow_partial" or v)}


def _control_run(config: ProbeConfig, reader, splits: ProbeSplits, runner):
    """A control run and the real probe on the same split (within-speaker for the speaker control).

    The control is trained once per seed of :func:`controls.control_seeds` and reported as the mean
    (``control_seeds``, ``control_f1_per_seed``); its MDL, when asked for, codes the first seed's
    labels (``mdl_control_seed``). Returns the split used and the runner's (scores, arrays, attention).
    """
    if config.control == "speaker":
        splits = controls.within_speaker_splits(splits, config.seed)
    seeds = controls.control_seeds(config.seed)
    without_mdl = replace(config, mdl=False)
    runs = [runner(config if i == 0 else without_mdl, reader, splits, controls.split_labels(splits, config.control, s)) for i, s in enumerate(seeds)]
    scores, arrays, attention = runs[0]
    key = config.kind.headline
    per_seed = [run[0][key] for run in runs]
    scores |= controls.mean_scores([run[0] for run in runs])
    arrays |= {name: np.mean([run[1][name] for run in runs], axis=0) for name in arrays if name.startswith("test_")}
    real, _, _ = runner(replace(without_mdl, control="none"), reader, splits, controls.split_labels(splits, "none", config.seed))
    scores |= {"selectivity": controls.selectivity(real[key], scores[key]), "f1_real": real[key], "control_seeds": seeds, "control_f1_per_seed": per_seed}
    if config.control == "speaker":
        scores["control_split"] = {"source": splits.source, "seed": config.seed, "shares": dict(controls.WITHIN_SPEAKER_SHARES)}
    if config.mdl:
        scores["mdl_control_seed"] = seeds[0]
    return splits, (scores, arrays, attention)


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
    folds = data.leave_one_speaker_out(metadata, reader.ids, config.task, config.seed, config.language, dev=bool(kind.selects_on_dev))
    refuse_many_classes(config, folds[0].splits.class_names)
    real = ("none", config.seed)
    labellings = [real] if config.control == "none" else [(config.control, s) for s in controls.control_seeds(config.seed)] + [real]
    outcomes: dict[tuple, list[dict]] = {labelling: [] for labelling in labellings}
    attention: dict[str, list] = {"ids": [], "weights": [], "probabilities": []}
    for fold in folds:
        for number, labelling in enumerate(labellings):
            scores, arrays, found = runner(config, reader, fold.splits, controls.split_labels(fold.splits, *labelling))
            outcomes[labelling].append(_fold_outcome(config, fold, scores, arrays))
            if number == 0:  # the attention of the first labelling, as a fixed split's control run keeps
                for key, values in found.items():
                    attention[key].extend(values)
    tested = [i for fold in folds for i in fold.splits.test.ids]
    mean_test_length, stored_positions = features.mean_lengths(reader, config.site, tested)
    pooled = {labelling: _pooled_scores(config, folds, found, mean_test_length) for labelling, found in outcomes.items()}
    shown = [labelling for labelling in labellings if labelling != real] or [real]
    scores = controls.mean_scores([pooled[labelling][0] for labelling in shown])
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
        count, accuracy = (np.asarray(arrays[f"test_{key}"], dtype=float) for key in ("count", "accuracy"))
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


def _pooled_scores(config: ProbeConfig, folds: list[Fold], outcomes: list[dict], mean_test_length: float) -> tuple[dict, dict]:
    """The row scores and ``test_*`` arrays of one labelling's folds, pooled (:func:`metrics.single_class_scores`)."""
    names = folds[0].splits.class_names
    width = max(len(outcome["count"]) for outcome in outcomes)
    correct, count = np.zeros((len(folds), width)), np.zeros((len(folds), width))
    for k, outcome in enumerate(outcomes):
        correct[k, : len(outcome["count"])], count[k, : len(outcome["count"])] = outcome["correct"], outcome["count"]
    pooled = metrics.single_class_scores(np.array([fold.label for fold in folds]), correct, count)
    arrays = {f"test_{k}": np.asarray(v) for k, v in pooled.items()}
    if config.kind.per_position:
        arrays["test_f1_ema"] = metrics.ema(pooled["f1_macro"], 3)
        row = metrics.span_summary(pooled, slice(0, int(np.ceil(mean_test_length))), names) | {"f1_s": metrics.f1_s(pooled["f1_macro"], mean_test_length)}
    else:
        row = metrics.span_summary(pooled, slice(0, 1), names)
    return row | {"fold_accuracy_mean": float(np.mean([outcome["accuracy"] for outcome in outcomes]))}, arrays


def _fold_entry(fold: Fold, outcomes: list[dict]) -> dict:
    """A fold's entry in the row's ``folds``; for a control run, ``accuracy`` is the mean over control seeds and what it chose the first seed's."""
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
    other = ShardReader(config.apply_to, allow_partial=config.allow_partial) if config.apply_to else None
    if other:
        data.refuse_an_applied_store_without_the_site(config, reader, other)
        refuse_what_the_store_lacks(config.kind, other.info.config, config.apply_to, config.positions)
    runner = config.kind.runner
    shared, only_shared = {}, {}
    metadata, labelled = data.probe_metadata(config, reader)
    if other and data.task_attribute(config.task) is not None:
        data.applied_attribute(config, other)  # its labels refused before the probe trains, not after
    if config.split == "loso":
        sizes, (scores, arrays, attention) = _loso_run(config, reader, metadata, runner)
        if labelled:
            labelled["classes"] = list(sizes["speakers"])  # speakers per class, in class order
    else:
        probed, dev_needed = (metadata, reader.ids, config.task, config.seed, config.language), bool(config.kind.selects_on_dev)
        if config.split == "stratified":
            splits = data.speaker_stratified_splits(*probed)
            if refused := data.speaker_disjoint_refusal(*probed, dev_needed):
                only_shared = {"shared_speakers_only": f"runs only with speakers shared between train and test: {refused}"}
        else:
            splits = data.make_splits(*probed, config.allow_shared_speakers, dev_needed)
        refuse_many_classes(config, splits.class_names)
        if labelled:
            labelled["classes"] = list(splits.class_names)
        shared = dict(splits.shared_speakers)
        applied_shared = data.applied_store_speakers_shared(config, splits, other) if other else []
        if applied_shared:
            shared["apply_to"] = applied_shared
        if config.control == "none":
            scores, arrays, attention = runner(config, reader, splits, controls.split_labels(splits, "none", config.seed))
        else:
            splits, (scores, arrays, attention) = _control_run(config, reader, splits, runner)
        sizes = splits.sizes()
    row = ProbeRow(
        schema=ROW_SCHEMA,
        run_id=config.run_id(),
        store_identity=data.config_store_identity(config),
        subject=data.store_subject(reader, config.language),
        site_index=reader.sites.index(config.site),
        config=row_config(config),
        seed=config.seed,
        splits=sizes,
        rest={
            **labelled,
            **data.partial_record(reader, other),
            **({"shared_speakers": shared} if shared else {}),
            **only_shared,
            **scores,
            **provenance(),
        },
    )
    return ProbeResult(row.to_dict(), arrays, attention)
