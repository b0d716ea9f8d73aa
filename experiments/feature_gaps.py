"""``python -m experiments.feature_gaps``: do acoustic and lexical features differ between genders,
does that difference track the ASR gap, and does gender still predict errors with them held fixed
(Attanasio et al. 2024, §5; the regression goes beyond the paper)?

    python -m experiments.feature_gaps --manifest M.jsonl --features acoustic.jsonl lexical.jsonl --out feature-gaps.json
        [--gaps whisper=gap-whisper.json seamless=gap-seamless.json] [--groups female,male] [--unit record|speaker]
        [--student] [--correction holm] [--only F1,F2] [--regression-features F1,F2]

Writes ``OUT.json`` with everything and, beside it, ``OUT.contrasts.csv`` (per dataset, language and
feature: group means, Welch's t-test, Mann-Whitney U, Cohen's d, rank-biserial, Holm-corrected
p-values) and, with ``--gaps`` (``MODEL=`` an ``experiments.asr_gap`` JSON, its ``.counts.jsonl``
beside it), ``OUT.setups.csv``: one row per (dataset, language, model) with E (``gap_relative``) and
each feature's ``diff_<feature>`` (A − B), the table that
``python -m experiments.correlate --table OUT.setups.csv --x diff_f0_mean_hz --y gap_relative --label setup``
reads; the JSON also holds those correlations (all setups and per dataset and model) and, per setup,
a Poisson regression of per-utterance errors on gender and the z-scored features (offset log
reference length, speaker-clustered errors). Definitions: ``experiments.analysis.contrasts``. The
JSON is headed by its ``schema`` version, ``subject`` (the ``--gaps`` model labels, the manifests'
datasets and languages), ``inputs`` (path and sha256 of every manifest, feature file and gap report)
and ``provenance``.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

from experiments.analysis.contrasts import (
    RESULT_SCHEMA,
    UNITS,
    ContrastError,
    error_regression,
    feature_gaps_subject,
    feature_table,
    group_contrasts,
    read_feature_rows,
    read_gap_setups,
    setup_correlations,
    setup_table,
)
from experiments.cli import CommandParser, add_out_argument, fail, input_argument, run_cli, two_groups
from experiments.scoring.gaps import finite_or_null
from extract.manifest import iter_manifest
from extract.provenance import identified

DEFAULT_REGRESSION = ("f0_mean_hz", "intensity_mean_db", "rate_tokens_per_second", "lexical_density", "entities")
CORRECTIONS = ("holm", "fdr_bh", "bonferroni", "none")


def _gap_argument(value: str) -> tuple[str, Path]:
    model, separator, path = value.partition("=")
    if not separator or not model or not path:
        raise argparse.ArgumentTypeError(f"{value!r}: expected MODEL=PATH, e.g. whisper-base=gap-whisper-base.json")
    return model, Path(path)


def _names(value: str) -> list[str]:
    return [name.strip() for name in value.split(",") if name.strip()]


def tables(out: Path) -> list[Path]:
    """``OUT.contrasts.csv`` and ``OUT.setups.csv`` (``OUT``'s suffix replaced), written beside the JSON ``out``."""
    return [out.with_suffix(".contrasts.csv"), out.with_suffix(".setups.csv")]


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    input_argument(
        parser, "--manifest", required=True, nargs="+", action="extend", help="manifest(s) of the records: gender, speaker, dataset and language come from here"
    )
    input_argument(
        parser, "--features", required=True, nargs="+", action="extend", help="feature JSONL files (experiments.acoustics, experiments.lexical), merged by id"
    )
    add_out_argument(parser, "results JSON; OUT.contrasts.csv and (with --gaps) OUT.setups.csv beside it", sidecars=tables)
    input_argument(
        parser,
        "--gaps",
        nargs="+",
        action="extend",
        type=_gap_argument,
        default=[],
        labelled=True,
        metavar="MODEL=GAP.json",
        help="experiments.asr_gap reports, one per model",
    )
    parser.add_argument("--groups", default="female,male", help="A,B (default female,male): differences are A − B, as in E(A, B)")
    parser.add_argument("--unit", choices=UNITS, default="record", help="test records (default, the paper's) or per-speaker means")
    parser.add_argument("--student", action="store_true", help="Student's t-test (equal variances) instead of Welch's")
    parser.add_argument("--correction", choices=CORRECTIONS, default="holm", help="multiple-comparison correction over the features of a dataset and language")
    parser.add_argument("--only", type=_names, help="comma-separated features to analyse (default: every feature in the files)")
    parser.add_argument(
        "--regression-features",
        type=_names,
        help=f"comma-separated features for the error regression (default: those of {', '.join(DEFAULT_REGRESSION)} that are present)",
    )
    parser.add_argument("--bootstrap", type=int, default=10_000, help="bootstrap resamples of the correlation interval (default 10000)")
    return parser


def _write_csv(rows: list[dict], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(dict.fromkeys(key for row in rows for key in row)))
        writer.writeheader()
        writer.writerows([{k: ("" if v is None else v) for k, v in row.items()} for row in rows])


def _run(args: argparse.Namespace, groups: tuple[str, str]) -> int:
    utterances = list(iter_manifest(args.manifest))
    features_by_id, names = read_feature_rows(args.features)
    unknown = [name for name in (args.only or []) + (args.regression_features or []) if name not in names]
    if unknown:
        return fail(f"no feature(s) {', '.join(unknown)} in {', '.join(args.features)}; they hold {', '.join(names)}")
    features = args.only or names
    table = feature_table(utterances, features_by_id, features)
    if not table:
        return fail(f"no id of {', '.join(args.features)} is in {', '.join(args.manifest)}")
    print(f"[feature_gaps] {len(table)} records with features ({len(features)} features); {len(features_by_id) - len(table)} feature rows not in the manifest")
    contrasts = group_contrasts(table, features, groups, args.unit, not args.student, args.correction)
    test = "Student" if args.student else "Welch"
    result = {
        "settings": {
            "groups": list(groups),
            "unit": args.unit,
            "t_test": test,
            "nonparametric": "Mann-Whitney U, two-sided",
            "correction": f"{args.correction} over the features of each dataset and language, per test",
            "features": features,
            "feature_files": [str(p) for p in args.features],
        },
        "contrasts": contrasts,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    contrasts_csv, setups_csv = tables(args.out)
    _write_csv(contrasts, contrasts_csv)
    written = [contrasts_csv]
    significant = sum(1 for row in contrasts if row["p_t_adjusted"] is not None and row["p_t_adjusted"] < 0.05)
    print(f"[feature_gaps] {len(contrasts)} contrasts; {significant} with {test} p < 0.05 after {args.correction}")
    if args.gaps:
        setups = read_gap_setups(args.gaps)
        every_record = feature_table(utterances, features_by_id, features, every_record=True)
        rows = setup_table(setups, every_record, features)
        regression_features = args.regression_features or [f for f in DEFAULT_REGRESSION if f in names]
        result["setups"] = rows
        result["correlations"] = setup_correlations(rows, features, args.bootstrap)
        result["regression"] = {
            "model": "Poisson GLM, errors ~ is_A + z(features), offset log(reference length), speaker-clustered standard errors",
            "features": regression_features,
            "setups": [error_regression(setup, every_record, regression_features) for setup in setups],
        }
        _write_csv(rows, setups_csv)
        written.append(setups_csv)
        print(f"[feature_gaps] {len(rows)} (dataset, language, model) setups; regression on {', '.join(regression_features) or 'gender only'}")
        if len(rows) < 3:
            print("[feature_gaps] note: a correlation needs at least 3 setups; the correlations are left out")
    inputs = [*args.manifest, *args.features, *(path for _, path in args.gaps)]
    result = identified(result, RESULT_SCHEMA, inputs, feature_gaps_subject(utterances, [model for model, _ in args.gaps]), kind="feature_gaps")
    args.out.write_text(json.dumps(finite_or_null(result), indent=1, ensure_ascii=False, allow_nan=False))
    print(f"[feature_gaps] wrote {args.out} and {', '.join(map(str, written))}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    groups = two_groups(parser, args.groups)
    return run_cli(lambda: _run(args, groups), ContrastError)


if __name__ == "__main__":
    sys.exit(main())
