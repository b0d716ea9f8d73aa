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
import sys
from pathlib import Path

from experiments.analysis.feature_gap_report import feature_gaps_result, tables, write_feature_gaps
from experiments.analysis_options import FeatureGapOptions
from experiments.cli import CommandParser, add_out_argument, input_argument, run_cli, two_groups
from experiments.options import add_options, from_args
from extract.manifest import iter_manifest


def _gap_argument(value: str) -> tuple[str, Path]:
    model, separator, path = value.partition("=")
    if not separator or not model or not path:
        raise argparse.ArgumentTypeError(f"{value!r}: expected MODEL=PATH, e.g. whisper-base=gap-whisper-base.json")
    return model, Path(path)


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
    add_options(parser, FeatureGapOptions)
    return parser


def _run(args: argparse.Namespace, groups: tuple[str, str]) -> int:
    options = from_args(FeatureGapOptions, args)
    utterances = list(iter_manifest(args.manifest))
    result = feature_gaps_result(
        utterances,
        args.manifest,
        args.features,
        args.gaps,
        groups,
        options.unit,
        options.student,
        options.correction,
        options.only,
        options.regression_features,
        options.bootstrap,
    )
    print(
        f"[feature_gaps] {result.records} records with features ({len(result.features)} features); "
        f"{result.unmatched_feature_rows} feature rows not in the manifest"
    )
    test = "Student" if options.student else "Welch"
    print(f"[feature_gaps] {len(result.contrasts)} contrasts; {result.significant} with {test} p < 0.05 after {options.correction}")
    if result.setups is not None:
        print(f"[feature_gaps] {len(result.setups)} (dataset, language, model) setups; regression on {', '.join(result.regression_features) or 'gender only'}")
        if len(result.setups) < 3:
            print("[feature_gaps] note: a correlation needs at least 3 setups; the correlations are left out")
    inputs = [*args.manifest, *args.features, *(path for _, path in args.gaps)]
    written = write_feature_gaps(result, args.out, utterances, inputs, [model for model, _ in args.gaps])
    print(f"[feature_gaps] wrote {args.out} and {', '.join(map(str, written))}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    groups = two_groups(parser, args.groups)
    return run_cli(lambda: _run(args, groups))


if __name__ == "__main__":
    sys.exit(main())
