"""The record of a probe kind, which each module of :mod:`probing.kinds` defines beside its runner."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

HEADLINES = ("f1_s", "f1_macro")  # F1_S: mean F1 over speech positions (per-position kinds); F1: macro F1 of the run


@dataclass(frozen=True)
class ProbeKind:
    """What the code needs to know about a probe kind.

    ``runner`` is called as ``runner(config, reader, splits, labels)`` with a
    :class:`probing.run.ProbeConfig`, a store reader, the :class:`probing.data.ProbeSplits` and each
    split's labels, and returns the row's scores (with ``headline`` among them, plus ``f1_macro``,
    ``accuracy`` and ``recall`` per class), the arrays saved beside the row (a ``per_position`` kind:
    the ``test_*`` scores per position, with ``positions_used`` and ``f1_s`` in the scores) and the
    attention weights of the test utterances (empty dicts where there are none). Leave-one-speaker-out
    and the controls call it once per fold and labelling, so it must train from ``labels`` alone."""

    name: str
    runner: Callable[..., tuple[dict, dict, dict]]
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
