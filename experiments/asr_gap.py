"""``python -m experiments.asr_gap``: error rates per gender group and their gaps, per language.

    python -m experiments.asr_gap --hypotheses HYPS.jsonl --json OUT.json [--groups female,male] [--iterations 1000] [--seed 0]

Reads the rows written by ``experiments.transcribe`` (id, reference, hypothesis, gender, speaker,
language, ...), scores every utterance once with the shared normalizer (records whose reference is
empty after normalization are dropped and counted), and writes rates and gaps in percent with the
first group as A. ``bootstrap`` holds the published resampling (mean rate per group, E on the
means, two-sided t-test p-value) and the 95 % interval of E from a speaker-cluster bootstrap.
Per-utterance counts go beside the JSON (``OUT.counts.jsonl``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from experiments.asr_metrics import error_counts, metric_for, normalize
from experiments.gaps import Group, delta_rel, published_resampling, relative_gap, speaker_bootstrap_interval
from extract.manifest import ManifestError, iter_json_objects, normalize_gender

REQUIRED = ("id", "reference", "hypothesis", "gender", "speaker", "language")


def read_hypotheses(path: Path) -> list[dict]:
    rows = []
    for number, row in iter_json_objects(path):
        missing = [key for key in REQUIRED if key not in row]
        if missing:
            raise ManifestError(path, number, f"missing key(s) {', '.join(missing)}")
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


def score_language(rows: list[dict], language: str, groups: tuple[str, str], iterations: int, seed: int):
    counts, dropped = [], 0
    for row in rows:
        if not normalize(row["reference"], language):
            dropped += 1
            continue
        c = error_counts(row["reference"], row["hypothesis"] or "", language)
        counts.append({"id": row["id"], "gender": row["gender"], "speaker": row["speaker"], "errors": c.errors, "length": c.reference_length})
    by_group = defaultdict(list)
    for c in counts:
        by_group[c["gender"]].append(c)
    result = {"metric": metric_for(language), "groups": {}, "dropped_empty_reference": dropped}
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
        result |= {
            "gap_relative": relative_gap(rate_a, rate_b),
            "gap_absolute": rate_a - rate_b,
            "delta_rel": delta_rel(rate_a, rate_b),
            "bootstrap": {
                "iterations": iterations,
                "sample_size": resampled.sample_size,
                "mean": {a: resampled.mean_a, b: resampled.mean_b},
                "gap_relative": resampled.gap_relative,
                "ci95": list(speaker_bootstrap_interval(cached[a], cached[b], iterations, seed=seed)),
                "p_value": resampled.p_value,
            },
        }
    else:
        result["missing_groups"] = [g for g in groups if g not in cached]
    return result, counts


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
    args = parser.parse_args(argv)
    groups = tuple(normalize_gender(g) for g in args.groups.split(","))
    if len(groups) != 2 or groups[0] == groups[1]:
        raise SystemExit("error: --groups takes two different groups, e.g. female,male or other,male")
    try:
        rows = read_hypotheses(args.hypotheses)
    except (ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    by_language = defaultdict(list)
    for row in rows:
        by_language[row["language"]].append(row)
    report, all_counts = {"languages": {}}, []
    for language in sorted(by_language):
        report["languages"][language], counts = score_language(by_language[language], language, groups, args.iterations, args.seed)
        all_counts.extend({"language": language, **c} for c in counts)
        entry = report["languages"][language]
        summary = ", ".join(f"{g} {v['error_rate']:.2f}" for g, v in entry["groups"].items())
        gap = f"E {entry['gap_relative']:+.2f} (p {entry['bootstrap']['p_value']:.3g})" if "gap_relative" in entry else "no gap: a group is missing"

        print(f"[asr_gap] {language} {entry['metric'].upper()}: {summary}; {gap}; dropped {entry['dropped_empty_reference']} empty references")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(_finite_or_null(report), indent=2, allow_nan=False))
    counts_path = args.json.with_suffix(".counts.jsonl")
    counts_path.write_text("".join(json.dumps(c) + "\n" for c in all_counts))
    print(f"[asr_gap] wrote {args.json} and {counts_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
