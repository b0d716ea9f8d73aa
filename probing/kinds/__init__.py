"""Probe kinds: one module each, and this registry.

A probe kind is what ``--probe`` names: how a run turns a site's stored states into predictions.
Each module of :data:`KIND_MODULES` holds its runners and exports their records as ``KINDS``
(:class:`probing.kinds.base.ProbeKind`: the headline score, the options it reads, what it chooses on
dev, ...). Every rule about kinds reads these records; no module outside this package names a kind
(:data:`DEFAULT_KIND` is the one name the defaults of the options use), and a
:class:`probing.run.ProbeConfig` resolves its kind once, as ``config.kind``. Adding a kind touches
one new module plus one line in :data:`KIND_MODULES`; ``tests/probing/test_probe_kinds.py`` then
runs it on a synthetic store and through ``experiments.collect`` and the study report.
"""

from __future__ import annotations

from importlib import import_module

from probing.data import ProbeError
from probing.kinds.base import HEADLINES, ProbeKind  # noqa: F401  (HEADLINES: imported from here)

KIND_MODULES = ("positional", "attention", "pooled")  # their kinds, in this order, are --probe's choices
KINDS: dict[str, ProbeKind] = {kind.name: kind for module in KIND_MODULES for kind in import_module(f"{__name__}.{module}").KINDS}


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
