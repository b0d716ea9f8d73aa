"""Gender gaps in error rate, from cached per-utterance error counts.

E(A, B) = 100 (φ(A) − φ(B)) / φ(B) (Attanasio et al. 2024), the absolute difference, and
Δrel = 100 (φ(F) − φ(M)) / (0.5 (φ(F) + φ(M))) (Boito et al. 2022), with φ the corpus-level error
rate (summed errors over summed reference length, percent). Two resampling procedures:

- the published one: per iteration, 40 % of the smaller group's records and as many from the
  larger, each drawn without replacement and stratified on speakers; a two-sided t-test between
  the groups' per-iteration rates; E on the mean rates;
- a speaker-cluster bootstrap: speakers resampled with replacement within each group, giving a
  95 % interval for E (utterances of one speaker are not independent).

Every resample is a weighted sum of the cached counts, never a new alignment.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def error_rate(errors: np.ndarray, lengths: np.ndarray) -> float:
    total = float(np.sum(lengths))
    if total <= 0:
        raise ValueError("no reference words in the group")
    return 100.0 * float(np.sum(errors)) / total


def relative_gap(rate_a: float, rate_b: float) -> float:
    """E(A, B) in percent of B's rate."""
    if rate_b == 0:
        return float("inf") if rate_a > 0 else 0.0
    return 100.0 * (rate_a - rate_b) / rate_b


def delta_rel(rate_female: float, rate_male: float) -> float:
    denominator = 0.5 * (rate_female + rate_male)
    return 0.0 if denominator == 0 else 100.0 * (rate_female - rate_male) / denominator


@dataclass
class Group:
    """One group's cached counts: per utterance errors, reference lengths and speaker codes."""

    errors: np.ndarray
    lengths: np.ndarray
    speakers: np.ndarray  # any hashable labels

    def __post_init__(self):
        self.errors = np.asarray(self.errors, dtype=np.int64)
        self.lengths = np.asarray(self.lengths, dtype=np.int64)
        names, self.codes = np.unique(np.asarray(self.speakers, dtype=str), return_inverse=True)
        self.speaker_names = names
        if not (len(self.errors) == len(self.lengths) == len(self.codes)):
            raise ValueError("errors, lengths and speakers must have one entry per utterance")

    def __len__(self) -> int:
        return len(self.errors)

    @property
    def rate(self) -> float:
        return error_rate(self.errors, self.lengths)


def stratified_allocation(codes: np.ndarray, n: int) -> np.ndarray:
    """Records to draw per speaker so the sample keeps the group's speaker distribution
    (largest-remainder rounding; ties go to the speaker with more records, then the lower code)."""
    counts = np.bincount(codes)
    exact = n * counts / counts.sum()
    allocation = np.floor(exact).astype(int)
    short = n - allocation.sum()
    order = np.lexsort((np.arange(len(counts)), -counts, -(exact - allocation)))
    allocation[order[:short]] += 1
    return np.minimum(allocation, counts)


def _stratified_draws(group: Group, n: int, iterations: int, rng: np.random.Generator):
    """Yield ``(members [S, c], chosen [iterations, S, c])`` per class of speakers sharing a record
    count ``c`` and an allocation ``k``: each row of ``chosen`` marks ``k`` records drawn without
    replacement (the smallest of fresh random keys; continuous keys do not tie). Grouping speakers
    this way keeps the work to a few array operations, not one per speaker."""
    allocation = stratified_allocation(group.codes, n)
    counts = np.bincount(group.codes)
    by_speaker = np.argsort(group.codes, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    for count, take in sorted({(int(c), int(k)) for c, k in zip(counts, allocation) if k > 0}):
        speakers = np.flatnonzero((counts == count) & (allocation == take))
        members = by_speaker[starts[speakers][:, None] + np.arange(count)[None, :]]
        if take == count:
            yield members, np.ones((iterations, *members.shape), dtype=bool)
            continue
        keys = rng.random((iterations, len(speakers), count))
        yield members, keys <= np.partition(keys, take - 1, axis=2)[:, :, take - 1 : take]


def stratified_sample_sums(group: Group, n: int, iterations: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Summed errors and reference lengths of ``iterations`` speaker-stratified samples of ``n`` records."""
    errors, lengths = np.zeros(iterations), np.zeros(iterations)
    for members, chosen in _stratified_draws(group, n, iterations, rng):
        weights = chosen.astype(np.float64)
        errors += np.einsum("isc,sc->i", weights, group.errors[members].astype(np.float64))
        lengths += np.einsum("isc,sc->i", weights, group.lengths[members].astype(np.float64))
    return errors, lengths


def stratified_sample_masks(group: Group, n: int, iterations: int, rng: np.random.Generator) -> np.ndarray:
    """The same draws as :func:`stratified_sample_sums` (same generator state) as ``[iterations, N]`` masks."""
    masks = np.zeros((iterations, len(group)), dtype=bool)
    for members, chosen in _stratified_draws(group, n, iterations, rng):
        masks[:, members.ravel()] = chosen.reshape(iterations, -1)
    return masks


@dataclass
class Resampled:
    iterations: int
    sample_size: int
    rates_a: np.ndarray
    rates_b: np.ndarray
    p_value: float

    @property
    def mean_a(self) -> float:
        return float(np.mean(self.rates_a))

    @property
    def mean_b(self) -> float:
        return float(np.mean(self.rates_b))

    @property
    def gap_relative(self) -> float:
        return relative_gap(self.mean_a, self.mean_b)


def published_resampling(a: Group, b: Group, iterations: int = 1000, fraction: float = 0.4, seed: int = 0) -> Resampled:
    from scipy.stats import ttest_ind

    rng = np.random.default_rng(seed)
    n = max(1, int(round(fraction * min(len(a), len(b)))))
    rates = []
    for group in (a, b):
        errors, lengths = stratified_sample_sums(group, n, iterations, rng)
        rates.append(100.0 * errors / np.maximum(lengths, 1))
    if np.ptp(rates[0]) == 0 and np.ptp(rates[1]) == 0:  # no variation to test (e.g. one speaker, all records drawn)
        p_value = float("nan")
    else:
        p_value = float(ttest_ind(rates[0], rates[1]).pvalue)  # two-sided Student's t-test
    return Resampled(iterations, n, rates[0], rates[1], p_value)


def speaker_bootstrap_interval(a: Group, b: Group, iterations: int = 1000, seed: int = 0) -> tuple[float, float]:
    """95 % interval of E(A, B) when speakers are resampled with replacement within each group."""
    rng = np.random.default_rng(seed)
    rates = []
    for group in (a, b):
        speaker_errors = np.bincount(group.codes, weights=group.errors)
        speaker_lengths = np.bincount(group.codes, weights=group.lengths)
        draws = rng.integers(0, len(speaker_errors), size=(iterations, len(speaker_errors)))
        rates.append(100.0 * speaker_errors[draws].sum(axis=1) / np.maximum(speaker_lengths[draws].sum(axis=1), 1))
    gaps = 100.0 * (rates[0] - rates[1]) / np.where(rates[1] > 0, rates[1], np.nan)
    if np.isnan(gaps).all():  # B never makes an error: E is undefined in every resample
        return float("nan"), float("nan")
    low, high = np.nanpercentile(gaps, [2.5, 97.5])
    return float(low), float(high)
