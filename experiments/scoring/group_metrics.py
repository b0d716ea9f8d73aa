"""The one group-metrics frame: a metric applied per group over cached per-record values.

Shaped like Fairlearn's ``MetricFrame`` (a metric function, a group label per record,
``by_group``, ``overall``, differences between groups), with what speech scoring needs beside it:
the records' speakers (per-speaker counts) and a speaker-cluster bootstrap, since utterances of one
speaker are not independent. ASR gaps, translation quality and MuST-SHE all go through it.

A frame holds per-record columns (counts as numpy arrays, texts as lists) and never rescores a
record: every group value, and every bootstrap resample, applies the metric to a selection of the
cached records. Fairlearn's own ``MetricFrame`` is not used: its metrics are ``f(y_true, y_pred)``
pairs, its bootstrap resamples rows rather than speakers, and it has no per-speaker counts.

Between two groups A and B with values φ(A), φ(B), the named comparisons of :data:`COMPARISONS`:

- ``relative_gap``: E(A, B) = 100 (φ(A) − φ(B)) / φ(B) (Attanasio et al. 2024), undefined when
  φ(B) = 0 (infinite when φ(A) > 0, NaN when both are 0; null in JSON, "n/a" in tables);
- ``delta_rel``: Δrel = 100 (φ(A) − φ(B)) / (0.5 (φ(A) + φ(B))) (Boito et al. 2022, A female);
  0 when both are 0;
- ``difference``: φ(A) − φ(B).

A frame gives each by name (:meth:`GroupMetricFrame.compare`), and the speaker bootstrap takes
one as a parameter (default E). Adding a comparison is one function and one record in
:data:`COMPARISONS`; ``tests/experiments/test_group_comparisons.py`` checks it against its stated symmetry.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

Columns = Mapping[str, np.ndarray | list]  # per-record values, one entry per record in every column
Metric = Callable[[Columns], Any]


def relative_gap(rate_a: float, rate_b: float) -> float:
    """E(A, B) in percent of B's rate; when B makes no error it is undefined: infinite if A makes
    errors, NaN if A makes none either (0 / 0 is no measurement of a gap, not a gap of 0)."""
    if rate_b == 0:
        return float("inf") if rate_a > 0 else float("nan")
    return 100.0 * (rate_a - rate_b) / rate_b


def delta_rel(rate_female: float, rate_male: float) -> float:
    """Δrel in percent of the two groups' mean; 0 when both are 0."""
    denominator = 0.5 * (rate_female + rate_male)
    return 0.0 if denominator == 0 else 100.0 * (rate_female - rate_male) / denominator


def difference(value_a: float, value_b: float) -> float:
    return value_a - value_b


SYMMETRIES = {
    "antisymmetric": "compare(B, A) = −compare(A, B)",
    "reciprocal": "(1 + compare(A, B) / 100) (1 + compare(B, A) / 100) = 1",
}


@dataclass(frozen=True)
class Comparison:
    """A named comparison of group A's value with group B's: ``between(φ(A), φ(B))``, NaN or infinite
    where it is undefined; ``symmetry`` (a key of :data:`SYMMETRIES`) says how swapping A and B
    changes it. Every comparison is 0 when both values are equal."""

    name: str
    between: Callable[[float, float], float]
    symmetry: str
    summary: str  # one line: what it is and whose definition

    def __call__(self, value_a: float, value_b: float) -> float:
        return self.between(value_a, value_b)


COMPARISONS: dict[str, Comparison] = {
    comparison.name: comparison
    for comparison in (
        Comparison("relative_gap", relative_gap, "reciprocal", "E(A, B) = 100 (φ(A) − φ(B)) / φ(B), Attanasio et al. 2024"),
        Comparison("delta_rel", delta_rel, "antisymmetric", "Δrel = 100 (φ(A) − φ(B)) / (0.5 (φ(A) + φ(B))), Boito et al. 2022"),
        Comparison("difference", difference, "antisymmetric", "φ(A) − φ(B), in the metric's unit"),
    )
}


def comparison(name: str) -> Comparison:
    """The comparison called ``name``; an unknown name is a ValueError listing them."""
    if name not in COMPARISONS:
        raise ValueError(f"unknown comparison {name!r}; choose from {', '.join(COMPARISONS)}")
    return COMPARISONS[name]


def _take(values: np.ndarray | list, indices: np.ndarray) -> np.ndarray | list:
    if isinstance(values, np.ndarray):
        return values[indices]
    return [values[i] for i in indices]


class Members:
    """One group's records: per-record columns, each record's speaker, and the metric that scores them.

    Speakers are coded in sorted order of their names (``speaker_names``, ``codes``). Records
    given without speakers have no speaker statistics: :func:`speaker_bootstrap_interval` refuses them.
    """

    def __init__(self, columns: Columns, speakers: Sequence[Hashable] | None, metric: Metric):
        lengths = {len(values) for values in columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"columns must have one entry per record, got lengths {sorted(lengths)}")
        self.columns = dict(columns)
        self.size = lengths.pop() if lengths else 0
        self.metric = metric
        self.speakers = speakers
        if speakers is None:
            self.speaker_names, self.codes = None, None
        else:
            if len(speakers) != self.size:
                raise ValueError(f"{len(speakers)} speakers for {self.size} records")
            self.speaker_names, self.codes = np.unique(np.asarray(speakers, dtype=str), return_inverse=True)

    def __len__(self) -> int:
        return self.size

    @property
    def value(self):
        return self.metric(self.columns)

    @property
    def speaker_count(self) -> int:
        if self.speaker_names is None:
            raise ValueError("the records have no speakers")
        return len(self.speaker_names)

    def take(self, indices: np.ndarray) -> dict[str, np.ndarray | list]:
        """The columns of the records at ``indices`` (repeats allowed)."""
        return {name: _take(values, indices) for name, values in self.columns.items()}


def _speaker_resample_values(members: Members, iterations: int, rng: np.random.Generator) -> np.ndarray:
    """The metric on ``iterations`` resamples drawing the group's S speakers S times with
    replacement; a speaker drawn k times contributes all its records k times."""
    if members.codes is None:
        raise ValueError("a speaker bootstrap needs the records' speakers")
    speakers = len(members.speaker_names)
    draws = rng.integers(0, speakers, size=(iterations, speakers))
    records = np.arange(len(members))
    values = []
    for draw in draws:
        multiplicity = np.bincount(draw, minlength=speakers)[members.codes]
        values.append(members.metric(members.take(np.repeat(records, multiplicity))))
    return np.asarray(values, dtype=float)


def speaker_bootstrap_interval(a: Members, b: Members, iterations: int = 1000, seed: int = 0, compare: str = "relative_gap") -> tuple[float, float]:
    """95 % interval of a comparison of A with B (``compare``, a name in :data:`COMPARISONS`; default
    E) when speakers are resampled with replacement within each group.

    Resamples where the comparison is undefined (E when B's value is 0) are left out; when every one
    is, the interval is (nan, nan)."""
    between = comparison(compare)
    rng = np.random.default_rng(seed)
    values_a = _speaker_resample_values(a, iterations, rng)
    values_b = _speaker_resample_values(b, iterations, rng)
    gaps = np.array([between(float(x), float(y)) for x, y in zip(values_a, values_b)], dtype=float)
    gaps[~np.isfinite(gaps)] = np.nan
    if np.isnan(gaps).all():
        return float("nan"), float("nan")
    low, high = np.nanpercentile(gaps, [2.5, 97.5])
    return float(low), float(high)


class GroupMetricFrame:
    """``metric`` applied to the records of each group, and to all of them.

    ``columns``: per-record values; ``labels``: each record's group; ``speakers``: each record's
    speaker (needed for speaker counts and the bootstrap); ``groups``: the groups to report, in
    order (default: every label, in order of first appearance). Records whose label is not in
    ``groups`` count only in :attr:`overall`.
    """

    def __init__(
        self, metric: Metric, columns: Columns, labels: Sequence[Hashable], speakers: Sequence[Hashable] | None = None, groups: Sequence[Hashable] | None = None
    ):
        self.metric = metric
        self.all = Members(columns, speakers, metric)
        if len(labels) != len(self.all):
            raise ValueError(f"{len(labels)} group labels for {len(self.all)} records")
        self.labels = list(labels)
        self.groups = list(dict.fromkeys(self.labels) if groups is None else groups)
        self._indices = {group: np.flatnonzero([label == group for label in self.labels]) for group in self.groups}

    @property
    def present(self) -> list[Hashable]:
        """The requested groups that have records, in order."""
        return [group for group in self.groups if len(self._indices[group])]

    @property
    def missing(self) -> list[Hashable]:
        """The requested groups without a record."""
        return [group for group in self.groups if not len(self._indices[group])]

    def members(self, group: Hashable) -> Members:
        indices = self._indices[group]
        speakers = None if self.all.speakers is None else [self.all.speakers[i] for i in indices]
        return Members(self.all.take(indices), speakers, self.metric)

    def evaluate(self, group: Hashable):
        """The metric on one group's records, also when it has none."""
        return self.members(group).value

    @property
    def by_group(self) -> dict:
        """The metric per group that has records, in the order of ``groups``."""
        return {group: self.evaluate(group) for group in self.present}

    @property
    def overall(self):
        return self.all.value

    def compare(self, name: str, a: Hashable, b: Hashable) -> float:
        """The comparison ``name`` (:data:`COMPARISONS`) of group ``a``'s value with ``b``'s."""
        return comparison(name)(self.evaluate(a), self.evaluate(b))

    def difference(self, a: Hashable, b: Hashable) -> float:
        return self.compare("difference", a, b)

    def relative_gap(self, a: Hashable, b: Hashable) -> float:
        return self.compare("relative_gap", a, b)

    def delta_rel(self, a: Hashable, b: Hashable) -> float:
        return self.compare("delta_rel", a, b)

    def speaker_count(self, group: Hashable) -> int:
        return self.members(group).speaker_count

    def speaker_bootstrap(self, a: Hashable, b: Hashable, iterations: int = 1000, seed: int = 0, compare: str = "relative_gap") -> tuple[float, float]:
        """95 % interval of a comparison of ``a`` with ``b`` (default E), speakers resampled within each group."""
        return speaker_bootstrap_interval(self.members(a), self.members(b), iterations, seed, compare)
