"""``python -m experiments.asr_gap``: error rates per gender group and their gaps, per language.

    python -m experiments.asr_gap --hypotheses HYPS.jsonl --json OUT.json [--groups female,male] [--iterations 1000] [--seed 0]
        [--gap-estimate resampled|full] [--normalizer whisper|basic|none] [--cer-spaces drop|keep]

Reads the rows written by ``experiments.transcribe`` (id, reference, hypothesis, gender, speaker,
language, ...), scores every utterance once with one normalizer for every model (records whose
reference is empty after normalization are dropped and counted; ``scoring`` records per language
what was used), and writes rates and gaps in percent with the first group as A.

``gap_relative`` is the estimate ``--gap-estimate`` chose, named in ``gap_estimate``: ``resampled``
(default, the paper's: E on the mean rates of the resampled subsets) or ``full`` (E on all
records); both are written as ``gap_relative_resampled`` and ``gap_relative_full``.
``gap_absolute`` and ``delta_rel`` are on all records. ``bootstrap`` holds the published resampling
(mean rate per group, two-sided t-test ``p_value`` with ``p_value_note``: pseudo-replicated) and
``ci95``, the 95 % interval of E from a speaker-cluster bootstrap, the number to read first.
Per-utterance counts go beside the JSON (``OUT.counts.jsonl``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from experiments.asr_metrics import CER_SPACES, NORMALIZERS, Scoring, error_counts, metric_for, normalize
from experiments.gaps import (
    GAP_ESTIMATES,
    P_VALUE_NOTE,
    Group,
    delta_rel,
    published_resampling,
    relative_gap,
    speaker_bootstrap_interval,
)
from extract.manifest import ManifestError, normalize_gender, read_keyed_rows

REQUIRED = ("id", "reference", "hypothesis", "gender", "speaker", "language")


def read_hypotheses(path: Path) -> list[dict]:
    """``experiments.transcribe`` rows through the shared id-keyed reader: a duplicate id (both
    lines named), a missing key, a reference, hypothesis, speaker or language that is not a string
    (a numeric or null hypothesis), an unrecognised gender or an empty file is an error naming the
    file and line. The references are in the rows themselves, so no id can lack its reference."""
    rows = []
    strings = ("reference", "hypothesis", "speaker", "language")
    for number, row in read_keyed_rows(path, required=REQUIRED, strings=strings, what="hypothesis row"):
        try:
            row["gender"] = normalize_gender(row["gender"])
        except ValueError as error:
            raise ManifestError(path, number, str(error)) from error
        rows.append(row)
    return rows


def error_distribution(errors: np.ndarray, lengths: np.ndarray, thresholds=range(0, 101)) -> list[float]:
    """Share of records (percent) whose own error rate is at least x, for each x."""
    rates = 100.0 * errors / lengths
    return [float(100.0 * np.mean(rates >= x)) for x in thresholds]


def score_language(rows: list[dict], language: str, groups: tuple[str, str], iterations: int, seed: int,
                   scoring: Scoring = Scoring(), estimate: str = "resampled"):
    if estimate not in GAP_ESTIMATES:
        raise ValueError(f"gap estimate {estimate!r}: expected one of {', '.join(GAP_ESTIMATES)}")
    counts, dropped = [], 0
    for row in rows:
        if not normalize(row["reference"], language, scoring.normalizer):
            dropped += 1
            continue
        c = error_counts(row["reference"], row["hypothesis"] or "", language, scoring)
        counts.append({"id": row["id"], "gender": row["gender"], "speaker": row["speaker"], "errors": c.errors, "length": c.reference_length})
    by_group = defaultdict(list)
    for c in counts:
        by_group[c["gender"]].append(c)
    result = {"metric": metric_for(language), "scoring": scoring.record(language), "groups": {}, "dropped_empty_reference": dropped}
    cached = {}
    for name in groups:
        members = by_group.get(name, [])
        if not members:
            continue
        cached[name] = Group([m["errors"] for m in members], [m["length"] for m in members], [m["speaker"] for m in members])
        result["groups"][name] = {"error_rate": cached[name].rate, "utterances": len(members), "speakers": len(cached[name].speaker_names)}
    result["error_distribution"] = {name: error_distribution(g.errors, g.lengths) for name, g in cached.items()}
    a, b = groups
    if a in cached and b in cached:
        rate_a, rate_b = cached[a].rate, cached[b].rate
        resampled = published_resampling(cached[a], cached[b], iterations, seed=seed)
        estimates = {"resampled": resampled.gap_relative, "full": relative_gap(rate_a, rate_b)}
        result |= {
            "gap_estimate": estimate,
            "gap_relative": estimates[estimate],
            "gap_relative_full": estimates["full"],
            "gap_relative_resampled": estimates["resampled"],
            "gap_absolute": rate_a - rate_b,
            "delta_rel": delta_rel(rate_a, rate_b),
            "bootstrap": {
                "iterations": iterations,
                "sample_size": resampled.sample_size,
                "mean": {a: resampled.mean_a, b: resampled.mean_b},
                "gap_relative": resampled.gap_relative,
                "ci95": list(speaker_bootstrap_interval(cached[a], cached[b], iterations, seed=seed)),
                "p_value": resampled.p_value,
                "p_value_note": P_VALUE_NOTE,
            },
        }
    else:
        result["missing_groups"] = [g for g in groups if g not in cached]
    return result, counts


def _number(value, digits: int = 2, sign: bool = False) -> str:
    if value is None or not np.isfinite(value):  # E is undefined when B makes no error
        return "undefined"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def gap_summary(entry: dict, groups: tuple[str, str]) -> str:
    """The printed gap of one language: the speaker-bootstrap interval first, then E named by its
    estimate, then the published t-test labelled as pseudo-replicated. When the interval crosses 0
    and p < 0.05, the line says the interval is the one to trust."""
    if "gap_relative" not in entry:
        return "no gap: a group is missing"
    low, high = entry["bootstrap"]["ci95"]
    bounds_known = low is not None and high is not None and not (np.isnan(low) or np.isnan(high))
    crosses_zero = bounds_known and low <= 0 <= high
    interval = f"E({groups[0]}, {groups[1]}) 95 % CI {_number(low, sign=True)} .. {_number(high, sign=True)} (speaker bootstrap"
    interval += ", crosses 0: no gap shown either way)" if crosses_zero else ")"
    estimate = f"E {_number(entry['gap_relative'], sign=True)} ({GAP_ESTIMATES[entry['gap_estimate']]})"
    p_value = entry["bootstrap"]["p_value"]
    test = f"p {'undefined' if p_value is None or np.isnan(p_value) else format(p_value, '.3g')} (published resampling t-test, pseudo-replicated"
    test += "; the interval crosses 0: trust the interval, not p)" if crosses_zero and p_value is not None and p_value < 0.05 else ")"
    return f"{interval}; {estimate}; {test}"


def _finite_or_null(value):
    """JSON has no NaN or infinity: undefined numbers (e.g. E when B makes no error) become null."""
    if isinstance(value, dict):
        return {k: _finite_or_null(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite_or_null(v) for v in value]
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hypotheses", required=True, type=Path)
    parser.add_argument("--json", required=True, type=Path)
    parser.add_argument("--groups", default="female,male", help="A,B: E(A, B) = 100 (φ(A) − φ(B)) / φ(B)")
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--gap-estimate", choices=tuple(GAP_ESTIMATES), default="resampled",
                        help="what gap_relative holds: E on the mean rates of the resampled subsets (the paper's) or on all records")
    parser.add_argument("--normalizer", choices=NORMALIZERS, default="whisper",
                        help="whisper: English normalizer for en, basic otherwise (every model); basic; none (NFC and spaces only). "
                             "The published code normalized Whisper only: score SeamlessM4T with none to reproduce it")
    parser.add_argument("--cer-spaces", choices=CER_SPACES, default="drop",
                        help="CER languages: drop spaces before scoring (default) or keep them as jiwer's cer does (the published code)")
    args = parser.parse_args(argv)
    scoring = Scoring(args.normalizer, args.cer_spaces)
    groups = tuple(normalize_gender(g) for g in args.groups.split(","))
    if len(groups) != 2 or groups[0] == groups[1]:
        parser.error("--groups takes two different groups, e.g. female,male or other,male")
    if args.iterations < 1:
        parser.error(f"--iterations must be at least 1, got {args.iterations}")
    try:
        rows = read_hypotheses(args.hypotheses)
    except (ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    by_language = defaultdict(list)
    for row in rows:
        by_language[row["language"]].append(row)
    settings = {"groups": list(groups), "iterations": args.iterations, "seed": args.seed, "gap_estimate": args.gap_estimate,
                "normalizer": args.normalizer, "cer_spaces": args.cer_spaces}
    report, all_counts = {"settings": settings, "languages": {}}, []
    for language in sorted(by_language):
        report["languages"][language], counts = score_language(by_language[language], language, groups, args.iterations, args.seed,
                                                               scoring, args.gap_estimate)
        all_counts.extend({"language": language, **c} for c in counts)
        entry = report["languages"][language]
        summary = ", ".join(f"{g} {v['error_rate']:.2f}" for g, v in entry["groups"].items())
        print(f"[asr_gap] {language} {entry['metric'].upper()}: {summary}; {gap_summary(entry, groups)}; "
              f"dropped {entry['dropped_empty_reference']} empty references")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(_finite_or_null(report), indent=2, allow_nan=False))
    counts_path = args.json.with_suffix(".counts.jsonl")
    counts_path.write_text("".join(json.dumps(c) + "\n" for c in all_counts))
    print(f"[asr_gap] wrote {args.json} and {counts_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
