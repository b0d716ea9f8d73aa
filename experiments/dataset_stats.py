"""``python -m experiments.dataset_stats``: the statistics table of Attanasio et al. 2024 (appendix
tables 5-7) per dataset and language.

    python -m experiments.dataset_stats --manifest cv.jsonl fleurs.jsonl --out stats.csv [--tokenizer openai/whisper-large-v3]

Columns: records, seconds (mean ± sd), Whisper tokens of the transcript (mean ± sd), and per gender
the speakers and the Gini index of records per speaker (``experiments.scoring.dataset_stats``).
Writes the CSV and a Markdown version beside it (``.md``).
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from experiments.cli import CommandParser, add_out_argument, command_main, input_argument
from experiments.scoring.dataset_stats import markdown, statistics, whisper_token_counter
from extract.manifest import iter_manifest


def markdown_path(out: Path) -> Path:
    """The Markdown version of the CSV ``out``, beside it (``.md`` for its suffix)."""
    return out.with_suffix(".md")


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    input_argument(parser, "--manifest", required=True, nargs="+", action="extend")
    add_out_argument(parser, "CSV path (a .md table is written beside it)", sidecars=lambda out: [markdown_path(out)])
    input_argument(
        parser, "--tokenizer", default="bundled-base", help="Whisper tokenizer: hub id, folder, or bundled-base (the multilingual Whisper tokenizer)"
    )
    return parser


def _run(args: argparse.Namespace) -> int:
    utterances = list(iter_manifest(args.manifest))
    print(f"[dataset_stats] {len(utterances)} records from {len(args.manifest)} manifest(s); tokens by {args.tokenizer}")
    rows = statistics(utterances, whisper_token_counter(args.tokenizer))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    markdown_path(args.out).write_text(markdown(rows))
    print(f"[dataset_stats] {len(rows)} dataset/language rows: {args.out} and {markdown_path(args.out)}")
    return 0


main = command_main(build_parser, _run, module=__name__)
