"""The per-site summary of patch rows: each metric per pairing, cross minus within among pairs matched
the same way, and an interval that resamples target and source speakers.

**Metrics.** Every metric is a ratio of sums over rows, Σ num / Σ den (:func:`metric_cells`):

- ASR: ``logprob`` (the primary: the change in the reference's per-token log-probability, nats per
  token, mean over rows: num the row's change, den 1) and ``wer`` (the corpus-level WER change in
  points: num 100 (patched − plain errors), den the reference's words).
- ST: ``gender_margin`` (the primary: the change in the gender margin, nats, mean over rows),
  ``flip_rate`` (the share of rows whose translation flipped to the other gender's form, in % of
  the rows whose plain translation had the run's own speaker's form: num 100 if flipped, den 1 for
  those rows only) and ``accuracy`` (category-1 accuracy, patched minus plain, in points: num 100
  ((patched form expected) − (plain form expected)), den 1). A patch that only deletes the gendered
  words flips nothing in either pairing: its flip rate difference is 0 (the audit's P2).

**Matching.** Cross and within pairs are compared only among pairs matched the same way (``match``:
``text``, the same sentence in another voice, preferred; else ``duration``): ``match_used`` names it,
``by_match`` gives every match type's pairings and difference, and where the two pairings share no
match type (each sentence read by one woman and one man: cross pairs all text-matched, within all
duration-matched, the audit's P3) there is no headline difference and ``match_note`` says why. Each
pairing's ``effect`` is over all its scored rows.

**Interval.** A two-way cluster bootstrap (:func:`two_way_interval`): per pairing, target speakers
and source speakers are drawn with replacement, independently, and a row counts as often as the
product of its target's and its source's draws (the "pigeonhole" bootstrap of a crossed design; a
source speaker serves several targets, so its variance belongs in the interval).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

PAIRINGS = ("cross", "within")
RELIABLE_SPEAKERS = 5  # target or source speakers per pairing: fewer, and the interval is flagged
METRICS = {  # per task, the primary first: name -> (what, unit)
    "asr": {
        "logprob": ("change in the reference's log-probability", "nats per token"),
        "wer": ("WER change", "points"),
    },
    "st": {
        "gender_margin": ("change in the gender margin (reference's gendered words minus their other-gender forms)", "nats"),
        "flip_rate": ("gender flip rate", "% of rows with the own form before"),
        "accuracy": ("category-1 accuracy change", "points"),
    },
}


def primary(task: str) -> str:
    return next(iter(METRICS[task]))


def metric_cells(row: dict, metric: str) -> tuple[float, float] | None:
    """The row's ``(num, den)`` for ``metric`` (the module docstring), or None where it has no score for it."""
    if metric in ("logprob", "gender_margin"):
        scores = row.get(metric) or {}
        return (float(scores["effect"]), 1.0) if scores.get("scored") else None
    if metric == "wer":
        scores = row.get("asr")
        return None if scores is None else (100.0 * (scores["patched_errors"] - scores["plain_errors"]), float(scores["reference_length"]))
    scores = row.get("mustshe") or {}
    if not scores.get("scored") or "expected_form" not in scores:  # rows of schema 1 carry no expected form
        return None
    if metric == "flip_rate":
        return None if scores["outcome"] is None else (100.0 * (scores["outcome"] == "flip"), 1.0)
    if metric == "accuracy":
        expected = scores["expected_form"]
        return 100.0 * ((scores["patched_gender"] == expected) - (scores["plain_gender"] == expected)), 1.0
    raise ValueError(f"unknown patch metric {metric!r}")


@dataclass(frozen=True)
class Clustered:
    """One pairing's rows for a ratio metric: numerators, denominators, and each row's target and source speaker."""

    num: np.ndarray
    den: np.ndarray
    targets: tuple[str, ...]
    sources: tuple[str, ...]

    @classmethod
    def of(cls, cells: Sequence[tuple[dict, float, float]]) -> Clustered:
        return cls(
            np.asarray([num for _, num, _ in cells], dtype=float),
            np.asarray([den for _, _, den in cells], dtype=float),
            tuple(row["target_speaker"] for row, _, _ in cells),
            tuple(row["source_speaker"] for row, _, _ in cells),
        )

    @property
    def target_speakers(self) -> list[str]:
        return sorted(set(self.targets))

    @property
    def source_speakers(self) -> list[str]:
        return sorted(set(self.sources))

    def value(self) -> float:
        den = float(self.den.sum())
        return float(self.num.sum()) / den if den else math.nan

    def weighted(self, target_counts: np.ndarray, source_counts: np.ndarray) -> np.ndarray:
        """Σ w num / Σ w den per draw, a row's weight w the product of its target speaker's count in
        ``target_counts`` ``[draws, target speakers]`` and its source speaker's in ``source_counts``
        (speakers in sorted order); NaN for a draw whose weighted denominator is 0."""
        t_index = [self.target_speakers.index(name) for name in self.targets]
        s_index = [self.source_speakers.index(name) for name in self.sources]
        weights = target_counts[:, t_index] * source_counts[:, s_index]
        den = weights @ self.den
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(den > 0, (weights @ self.num) / np.where(den > 0, den, 1.0), np.nan)


def _counts(rng: np.random.Generator, clusters: int, iterations: int) -> np.ndarray:
    """``[iterations, clusters]``: how often each cluster is drawn in ``clusters`` draws with replacement."""
    draws = rng.integers(0, clusters, size=(iterations, clusters))
    return (draws[:, :, None] == np.arange(clusters)).sum(axis=1).astype(float)


def two_way_interval(cross: Clustered, within: Clustered, iterations: int, seed: int) -> dict:
    """The 95 % percentile interval of cross minus within under the two-way cluster bootstrap. One
    ``default_rng(seed)`` draws, in this order, ``[iterations, n]`` speaker indices for cross's target
    speakers, cross's source speakers, within's target speakers, within's source speakers (each
    sorted); draws whose difference is undefined (a weighted denominator of 0) are left out and counted."""
    fewest_targets = min(len(cross.target_speakers), len(within.target_speakers))
    fewest_sources = min(len(cross.source_speakers), len(within.source_speakers))
    if all(len(part.target_speakers) < 2 and len(part.source_speakers) < 2 for part in (cross, within)):
        return {"ci95": [None, None], "ci95_note": "one target and one source speaker per pairing: a speaker bootstrap has nothing to resample"}
    rng = np.random.default_rng(seed)
    values = []
    for part in (cross, within):
        target_counts = _counts(rng, len(part.target_speakers), iterations)
        source_counts = _counts(rng, len(part.source_speakers), iterations)
        values.append(part.weighted(target_counts, source_counts))
    differences = values[0] - values[1]
    kept = differences[np.isfinite(differences)]
    result: dict = {"ci95": [None, None] if not kept.size else [float(v) for v in np.quantile(kept, [0.025, 0.975])]}
    result["ci95_resamples"] = "target and source speakers (two-way cluster bootstrap)"
    notes = []
    if kept.size < iterations:
        notes.append(f"{iterations - kept.size} of {iterations} draws left out (no row with a denominator drawn)")
    if min(fewest_targets, fewest_sources) < RELIABLE_SPEAKERS:
        notes.append(f"only {fewest_targets} target and {fewest_sources} source speakers in a pairing: too few for a reliable interval")
    if notes:
        result["ci95_note"] = "; ".join(notes)
    return result


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def match_used(cells: dict[str, list[tuple[dict, float, float]]]) -> tuple[str | None, str | None]:
    """The match type cross minus within compares (``text`` where both pairings have text-matched rows,
    else ``duration`` where both have duration-matched ones), and a note where rows are left out or no type is shared."""
    kinds = {pairing: {row.get("match") for row, _, _ in cells.get(pairing, [])} for pairing in PAIRINGS}
    shared = kinds["cross"] & kinds["within"]
    chosen = "text" if "text" in shared else "duration" if "duration" in shared else None
    if chosen is None:
        mixes = "; ".join(f"{pairing} pairs {'/'.join(sorted(str(kind) for kind in kinds[pairing])) or 'none'}-matched" for pairing in PAIRINGS)
        return None, f"no match type is shared by both pairings ({mixes}): no cross - within compares pairs matched the same way; see by_match"
    left = sum(1 for pairing in PAIRINGS for row, _, _ in cells.get(pairing, []) if row.get("match") != chosen)
    return chosen, (f"cross - within compares the {chosen}-matched pairs; {left} rows matched otherwise are in by_match" if left else None)


def metric_summary(cells: dict[str, list[tuple[dict, float, float]]], iterations: int, seed: int) -> dict:
    """One metric at one site: per pairing its scored rows, speakers and effect; by match type; cross
    minus within among the pairs of :func:`match_used`, with :func:`two_way_interval`."""
    entry: dict = {"pairings": {}}
    for pairing in PAIRINGS:
        if pairing in cells:
            part = Clustered.of(cells[pairing])
            entry["pairings"][pairing] = {
                "scored": len(cells[pairing]),
                "speakers": len(part.target_speakers),
                "source_speakers": len(part.source_speakers),
                "effect": _finite(part.value()) if cells[pairing] else None,
            }
    entry["by_match"] = {}
    for match in ("text", "duration"):
        chosen = {pairing: [cell for cell in rows if cell[0].get("match") == match] for pairing, rows in cells.items()}
        chosen = {pairing: rows for pairing, rows in chosen.items() if rows}
        if chosen:
            effects = {pairing: _finite(Clustered.of(rows).value()) for pairing, rows in chosen.items()}
            by = {"pairings": {pairing: {"scored": len(rows), "effect": effects[pairing]} for pairing, rows in chosen.items()}}
            if set(chosen) == set(PAIRINGS):
                by["cross_minus_within"] = _difference(effects)
            entry["by_match"][match] = by
    if not all(cells.get(pairing) for pairing in PAIRINGS):
        return entry
    used, note = match_used(cells)
    entry["match_used"] = used
    if note:
        entry["match_note"] = note
    if used is None:
        entry["cross_minus_within"], entry["ci95"] = None, [None, None]
        return entry
    parts = {pairing: Clustered.of([cell for cell in cells[pairing] if cell[0].get("match") == used]) for pairing in PAIRINGS}
    entry["cross_minus_within"] = _difference({pairing: part.value() for pairing, part in parts.items()})
    entry.update(two_way_interval(parts["cross"], parts["within"], iterations, seed))
    return entry


def _difference(effects: dict) -> float | None:
    if effects.get("cross") is None or effects.get("within") is None:
        return None
    return _finite(effects["cross"] - effects["within"])


def site_summary(rows: Sequence[dict], iterations: int = 1000, seed: int = 0) -> dict:
    """Per site (in the order first seen): ``primary`` (the task's graded metric), its ``unit``, per
    pairing the pairs written, those scored for the primary, the rows whose patch replaced no frame
    (``not_patched``), the target speakers and the effect, then the primary's ``cross_minus_within``,
    ``ci95`` and matching (``match_used``, ``by_match``), and every metric of the task under
    ``metrics``. Unscored rows are counted, never silently left out."""
    from experiments.patching.scoring import not_patched

    sites: dict[str, list[dict]] = {}
    for row in rows:
        sites.setdefault(row["site"], []).append(row)
    summary = {}
    for site, site_rows in sites.items():
        task = site_rows[0]["task"]
        metrics = {}
        for metric, (what, unit) in METRICS[task].items():
            cells: dict[str, list[tuple[dict, float, float]]] = {}
            for row in site_rows:
                if row["pairing"] in PAIRINGS:
                    value = None if not_patched(row) else metric_cells(row, metric)
                    cells.setdefault(row["pairing"], [])
                    if value is not None:
                        cells[row["pairing"]].append((row, *value))
            metrics[metric] = {"what": what, "unit": unit, **metric_summary(cells, iterations, seed)}
        main = metrics[primary(task)]
        entry = {"site_index": site_rows[0]["site_index"], "primary": primary(task), "unit": main["unit"], "pairings": {}}
        for pairing, value in main["pairings"].items():
            written = [row for row in site_rows if row["pairing"] == pairing]
            entry["pairings"][pairing] = {
                "pairs": len(written),
                "scored": value["scored"],
                "not_patched": sum(1 for row in written if not_patched(row)),
                "speakers": value["speakers"],
                "effect": value["effect"],
            }
        entry.update({key: main[key] for key in ("cross_minus_within", "ci95", "ci95_note", "ci95_resamples", "match_used", "match_note") if key in main})
        entry["metrics"] = metrics
        summary[site] = entry
    return summary
