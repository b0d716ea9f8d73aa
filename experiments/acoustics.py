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
import os
import sys

from experiments.analysis.acoustic import RANGE_BY, SPEECH_SOURCES, AcousticError, compute_acoustics, side_files
from experiments.cli import CommandParser, add_out_argument, add_quiet_argument, add_reclaim_stale_argument, input_argument, run_cli
from extract.manifest import read_manifest


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    input_argument(parser, "--manifest", required=True, help="utterance manifest (JSONL)")
    add_out_argument(parser, "feature rows (JSONL, resumable by id); OUT.ranges.json and OUT.summary.json beside it", sidecars=side_files)
    parser.add_argument(
        "--workers", type=int, default=min(4, os.cpu_count() or 1), help="processes over records (default: min(4, CPUs)); 1 runs in this process"
    )
    parser.add_argument(
        "--speech",
        choices=SPEECH_SOURCES,
        default="vad",
        help="seconds of speech for the rates: silero-vad (default) or the whole clip (duration, no model)",
    )
    parser.add_argument(
        "--range-by",
        choices=RANGE_BY,
        default="speaker",
        help="pitch floor and ceiling per speaker (default, the two-pass rule over the speaker's records) or per record (no speaker ids)",
    )
    input_argument(
        parser,
        "--tokenizer",
        default="bundled-base",
        help="Whisper tokenizer for the token rate: hub id, folder, or bundled-base (default, offline, multilingual)",
    )
    add_quiet_argument(parser, "no progress bars")
    add_reclaim_stale_argument(parser)
    return parser


def _run(args: argparse.Namespace) -> int:
    from experiments.scoring.dataset_stats import whisper_token_counter  # loads transformers: after the manifest is read

    utterances = read_manifest(args.manifest)
    print(
        f"[acoustics] {len(utterances)} records of {args.manifest}: F0 with per-{args.range_by} range, intensity, "
        f"rates over {args.speech} seconds ({args.workers} worker(s))"
    )
    summary = compute_acoustics(
        utterances,
        args.out,
        whisper_token_counter(args.tokenizer),
        args.tokenizer,
        args.speech,
        args.range_by,
        args.workers,
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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error(f"--workers must be at least 1, got {args.workers}")
    return run_cli(lambda: _run(args), AcousticError)


if __name__ == "__main__":
    sys.exit(main())
