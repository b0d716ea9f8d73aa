"""Probe kinds: one record each, and this registry.

A probe kind is what ``--probe`` names: how a run turns a site's stored states into predictions.
Its record (:class:`ProbeKind`) says which function runs it, which score is its headline (what
``experiments.probe`` prints, the reports plot and ``experiments.collect`` joins), whether it
predicts another store (``apply_to``), which :class:`probing.run.ProbeConfig` options it reads and
what it chooses on the dev split. Every rule about kinds reads these records; no module outside
this one names a kind (:data:`DEFAULT_KIND` is the one name the defaults of the options use), and a
:class:`probing.run.ProbeConfig` resolves its kind once, as ``config.kind``. Adding a kind touches
one new module (its runner) plus one record in :data:`KINDS` below; ``tests/probing/test_probe_kinds.py``
then runs it on a synthetic store and through ``experiments.collect`` and the study report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module

from probing.data import ProbeError

HEADLINES = ("f1_s", "f1_macro")  # F1_S: mean F1 over speech positions (per-position kinds); F1: macro F1 of the run


@dataclass(frozen=True)
class ProbeKind:
    """What the code needs to know about a probe kind.

    ``runner`` is the function's path, ``"module:function"``, imported when a run starts (the built-in
    runners live in :mod:`probing.run`, which reads this registry). It is called as
    ``runner(config, reader, splits, labels)`` with a :class:`probing.run.ProbeConfig`, a store
    reader, the :class:`probing.data.ProbeSplits` and each split's labels, and returns the row's
    scores (with ``headline`` among them, plus ``f1_macro``, ``accuracy`` and ``recall`` per class),
    the arrays saved beside the row (a ``per_position`` kind: the ``test_*`` scores per position, with
    ``positions_used`` and ``f1_s`` in the scores) and the attention weights of the test utterances
    (empty dicts where there are none). Leave-one-speaker-out and the controls call it once per fold
    and labelling, so it must train from ``labels`` alone."""

    name: str
    runner: str
    headline: str
    summary: str  # one line, for --help and the docs
    per_position: bool = False  # one probe per frame position: per-position ``test_*`` arrays, F1_S, ``positions_used``
    options: tuple[str, ...] = ()  # ProbeConfig fields this kind reads beyond the shared ones (store, site, control, seed, task, ...)
    selects_on_dev: str = ""  # what it chooses on the dev split ("" for nothing: then no dev split is held out of LOSO folds)
    reads: str = "frames"  # what of each utterance it needs: "frames" (all of them, or the first --positions), or "mean" (their mean)
    multiclass: bool = False  # tells three classes or more apart (an attribute task); else two only (one-vs-one: --pairs)

    @property
    def applies_to_other_stores(self) -> bool:
        """Whether ``apply_to`` works: the trained probe also predicts another store's utterances."""
        return "apply_to" in self.options

    def run(self, config, reader, splits, labels) -> tuple[dict, dict, dict]:
        module, _, function = self.runner.partition(":")
        runner: Callable = getattr(import_module(module), function)
        return runner(config, reader, splits, labels)


LOGISTIC = ("c", "max_iter")

KINDS: dict[str, ProbeKind] = {
    kind.name: kind
    for kind in (
        ProbeKind(
            "positional",
            "probing.run:positional_probe",
            "f1_s",
            "one logistic probe per frame position (the first --positions)",
            per_position=True,
            options=("positions", "memory_gb", *LOGISTIC),
        ),
        ProbeKind(
            "attention",
            "probing.run:attention_probe",
            "f1_macro",
            "attention pooling over the frames, then a linear layer (Fucci et al. 2025)",
            options=("max_epochs", "lr", "apply_to", "memory_gb", "loader_workers"),
            selects_on_dev="the epoch to stop at (early stopping)",
            multiclass=True,
        ),
        ProbeKind(
            "mean", "probing.run:pooled_probe", "f1_macro", "logistic probe on the mean over speech frames", options=LOGISTIC, reads="mean", multiclass=True
        ),
        ProbeKind("max", "probing.run:pooled_probe", "f1_macro", "logistic probe on the maximum over speech frames", options=LOGISTIC, multiclass=True),
        ProbeKind(
            "sampled",
            "probing.run:sampled_probe",
            "f1_macro",
            "logistic probes on single frames at fixed fractions of the speech, one chosen on dev",
            options=LOGISTIC,
            selects_on_dev="the sampled position",
        ),
    )
}


DEFAULT_KIND = "positional"  # what --probe, a grid's ``probes`` and a study's ``probes`` default to


def probe_kind(name: str) -> ProbeKind:
    """The record of ``name``; an unknown name is a :class:`ProbeError` listing the kinds."""
    if name not in KINDS:
        raise ProbeError(f"unknown probe {name!r}; choose from {tuple(KINDS)}")
    return KINDS[name]


def refuse_what_the_store_lacks(kind: ProbeKind, stored: dict, store, positions: int) -> None:
    """A store extracted with ``--pool`` or ``--positions`` (its ``config``, ``stored``) holds less than
    every frame: a kind that needs what it left out is refused in one line naming the option."""
    pool, kept = stored.get("pool"), stored.get("positions")
    if pool and kind.reads != pool:
        raise ProbeError(
            f"--probe {kind.name} needs each utterance's frames, but {store} holds one {pool} vector per utterance and site "
            f"(extract --pool {pool}): re-extract without --pool, or probe it with --probe {pool}"
        )
    if kept and not kind.per_position:
        raise ProbeError(
            f"--probe {kind.name} reads whole utterances, but {store} holds only the first {kept} frames of each "
            f"(extract --positions {kept}): re-extract without --positions (or with --pool mean for --probe mean)"
        )
    if kept and positions > kept:
        raise ProbeError(
            f"--positions {positions} needs {positions} frames of each utterance, but {store} holds the first {kept} "
            f"(extract --positions {kept}): probe with --positions {kept} or fewer, or re-extract with --positions {positions}"
        )


def headline(name: str) -> str:
    """The score key a row of kind ``name`` leads with (``f1_s`` or ``f1_macro``)."""
    return probe_kind(name).headline


def is_per_position(name: str) -> bool:
    """Whether rows of kind ``name`` (a row's ``config.probe``) score each frame position and lead with
    F1_S: the rows ``f1_vs_gap.csv`` joins and the study's site heatmaps plot. A name not in the
    registry (a row written by a kind this installation lacks) is not."""
    kind = KINDS.get(name)
    return bool(kind and kind.per_position)
