"""``python -m experiments.acoustics``: mean F0, mean intensity and speaking rate per record
(Attanasio et al. 2024, §5.1), with Praat through praat-parselmouth.

    python -m experiments.acoustics --manifest M.jsonl --out features.jsonl [--workers 2] [--speech vad|duration]
        [--range-by speaker|record] [--tokenizer bundled-base]

One JSONL row per record: ``features`` (``f0_mean_hz``, ``intensity_mean_db``,
``rate_tokens_per_second``, ``rate_nuclei_per_second``; null where a record is unvoiced, too short,
unreadable or without speech, with the reason under ``null_reasons``) and ``details``. Rows are
appended as records finish: rerun the same command to resume, records already in OUT are skipped.
The per-speaker pitch ranges and the settings go to ``OUT.ranges.json``, the counts of nulls by
reason to ``OUT.summary.json``. Rules and references: ``experiments.analysis.acoustic``.
"""

from __future__ import annotations

import argparse

from experiments.analysis.acoustic import compute_acoustics, side_files
from experiments.analysis_options import AcousticsOptions
from experiments.cli import CommandParser, add_out_argument, add_quiet_argument, add_reclaim_stale_argument, command_main, input_argument
from experiments.options import add_options, from_args
from extract.manifest import read_manifest


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    input_argument(parser, "--manifest", required=True, help="utterance manifest (JSONL)")
    add_out_argument(parser, "feature rows (JSONL, resumable by id); OUT.ranges.json and OUT.summary.json beside it", sidecars=side_files)
    add_options(parser, AcousticsOptions)
    add_quiet_argument(parser, "no progress bars")
    add_reclaim_stale_argument(parser)
    return parser


def _run(args: argparse.Namespace) -> int:
    from experiments.scoring.dataset_stats import whisper_token_counter  # loads transformers: after the manifest is read

    options = from_args(AcousticsOptions, args)
    utterances = read_manifest(args.manifest)
    print(
        f"[acoustics] {len(utterances)} records of {args.manifest}: F0 with per-{options.range_by} range, intensity, "
        f"rates over {options.speech} seconds ({options.workers} worker(s))"
    )
    summary = compute_acoustics(
        utterances,
        args.out,
        whisper_token_counter(options.tokenizer),
        options.tokenizer,
        options.speech,
        options.range_by,
        options.workers,
        not args.quiet,
        args.reclaim_stale,
    )
    print(f"[acoustics] {summary['computed_now']} computed, {summary['resumed']} already in {args.out}")
    for feature, reasons in summary["nulls"].items():
        for reason, count in reasons.items():
            print(f"  {feature} null for {count} record(s): {reason}")
    ranges, summary_path = side_files(args.out)
    print(f"[acoustics] wrote {args.out}, {ranges} and {summary_path}")
    return 0


main = command_main(build_parser, _run, module=__name__)
