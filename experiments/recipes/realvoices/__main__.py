"""python -m experiments.recipes.realvoices --out DIR [--languages en,fr,...] [--per-speaker N] [--seed S] [--dataset NAME]"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from experiments.cli import CommandParser, add_quiet_argument, command_main, output_argument, program_name
from experiments.options import add_options, from_args
from experiments.recipes.realvoices.build import build_realvoices
from experiments.recipes.realvoices.sources import LANGUAGES
from extract.options import Checked, option, seed_option


def output_folder(value: str) -> Path:
    path = Path(value)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{value} is a file; give a folder for the manifest and the card")
    return path


@dataclass(frozen=True, kw_only=True)
class RealVoicesOptions(Checked):
    """Which voices, how many clips of each, and the dataset name the rows record."""

    languages: tuple[str, ...] | None = option(None, f"default: all ({','.join(LANGUAGES)})", choices=LANGUAGES, metavar="LANG[,LANG]")
    per_speaker: int | None = option(None, "clips per voice (a speaker in one language), drawn with --seed; default: all", least=1)
    seed: int = seed_option("selects the clips and the speaker-disjoint splits (default 0)")
    dataset: str | None = option(
        None,
        "the dataset every manifest row records (a study's corpus name, e.g. realvoices); default: each voice's source "
        "(asterisk, tuxpaint, ...), kept in the row's extra.source either way",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog=program_name("experiments.recipes.realvoices"),
        description="Build a corpus of real, credited voices from Debian packages (apt-get download, no install): "
        "16 kHz WAVs in the cache, DIR/manifest.jsonl and DIR/CARD.md.",
    )
    output_argument(parser, "--out", required=True, type=output_folder, help="folder for manifest.jsonl, card.json and CARD.md")
    add_options(parser, RealVoicesOptions)
    add_quiet_argument(parser, "no progress output")
    return parser


def _run(args: argparse.Namespace) -> int:
    options = from_args(RealVoicesOptions, args)
    languages = tuple(dict.fromkeys(options.languages)) if options.languages else None
    rows = build_realvoices(args.out, languages, options.per_speaker, options.seed, show_progress=not args.quiet, dataset=options.dataset)
    speakers = len({row["speaker"] for row in rows})
    clips = sum(row["clips"] for row in rows)
    print(f"{clips} clips of {len(rows)} voices ({speakers} speakers): {args.out / 'manifest.jsonl'}, {args.out / 'CARD.md'}")
    return 0


main = command_main(build_parser, _run, module=__name__)
