"""python -m experiments.recipes.realvoices --out DIR [--languages en,fr,...] [--per-speaker N] [--seed S] [--dataset NAME]"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from experiments.cli import CommaList, CommandParser, add_quiet_argument, output_argument, program_name, run_command
from experiments.recipes.realvoices.build import RealVoicesError, build_realvoices
from experiments.recipes.realvoices.decode import DecoderMissingError
from experiments.recipes.realvoices.fetch import FetchError
from experiments.recipes.realvoices.sources import LANGUAGES


def output_folder(value: str) -> Path:
    path = Path(value)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{value} is a file; give a folder for the manifest and the card")
    return path


def positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return number


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog=program_name("experiments.recipes.realvoices"),
        description="Build a corpus of real, credited voices from Debian packages (apt-get download, no install): "
        "16 kHz WAVs in the cache, DIR/manifest.jsonl and DIR/CARD.md.",
    )
    output_argument(parser, "--out", required=True, type=output_folder, help="folder for manifest.jsonl, card.json and CARD.md")
    parser.add_argument("--languages", action=CommaList, choices=LANGUAGES, metavar="LANG[,LANG]", help=f"default: all ({','.join(LANGUAGES)})")
    parser.add_argument("--per-speaker", type=positive, help="clips per voice (a speaker in one language), drawn with --seed; default: all")
    parser.add_argument("--seed", type=int, default=0, help="selects the clips and the speaker-disjoint splits (default 0)")
    parser.add_argument(
        "--dataset",
        help="the dataset every manifest row records (a study's corpus name, e.g. realvoices); default: each voice's source "
        "(asterisk, tuxpaint, ...), kept in the row's extra.source either way",
    )
    add_quiet_argument(parser, "no progress output")
    return parser


def _run(args: argparse.Namespace) -> int:
    languages = tuple(dict.fromkeys(args.languages)) if args.languages else None
    rows = build_realvoices(args.out, languages, args.per_speaker, args.seed, show_progress=not args.quiet, dataset=args.dataset)
    speakers = len({row["speaker"] for row in rows})
    clips = sum(row["clips"] for row in rows)
    print(f"{clips} clips of {len(rows)} voices ({speakers} speakers): {args.out / 'manifest.jsonl'}, {args.out / 'CARD.md'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command(build_parser(), _run, argv, FetchError, RealVoicesError, DecoderMissingError)


if __name__ == "__main__":
    sys.exit(main())
