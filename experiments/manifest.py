"""``python -m experiments.manifest FORMAT ... --out M.jsonl``: native corpus files to a manifest.

Rows whose audio file is missing are listed on stderr and counted, never dropped silently; with
``--strict`` any missing audio is an error. Gender values outside the alias table
(``extract.manifest.GENDER_ALIASES``) become ``unknown``; the summary counts them per value. A
source that gives no utterance is an error, not an empty manifest. The recipes are
``extract.corpora.<format>``; ``--target-language`` is a deprecated spelling of ``--tgt-lang``.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from experiments.cli import CommandParser, add_out_argument, add_renamed_argument, command_main, fail, input_argument
from experiments.options import add_options, from_args
from extract import corpora
from extract.corpora.base import Argument
from extract.manifest import write_manifest
from extract.options import option


@dataclass(frozen=True)
class ManifestOptions:
    """The options of every recipe's subcommand besides ``--out`` and the arguments the recipe declares."""

    strict: bool = option(False, "fail if any audio file is missing")


def build_parser() -> argparse.ArgumentParser:
    """One subcommand per recipe of ``extract.corpora.RECIPES``, with ``--out``, ``--strict`` and the arguments the recipe declares."""
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    formats = parser.add_subparsers(dest="format", required=True)
    for recipe in corpora.RECIPES.values():
        sub = formats.add_parser(recipe.name, help=recipe.help)
        add_out_argument(sub, "manifest to write (JSONL)")
        add_options(sub, ManifestOptions)
        for declared in recipe.arguments:
            _add_recipe_flag(sub, declared)
    return parser


def _add_recipe_flag(parser: argparse.ArgumentParser, declared: Argument) -> None:
    """A recipe's argument: an input where it reads a file or folder, with its old spellings as deprecated aliases."""
    options = dict(declared.options)
    if declared.old_spellings:
        add_renamed_argument(parser, declared.flags[0], declared.old_spellings, options.pop("required", False), **options)
    elif declared.reads:
        input_argument(parser, *declared.flags, **options)
    else:
        parser.add_argument(*declared.flags, **options)


def _run(args) -> int:
    recipe, options = corpora.RECIPES[args.format], from_args(ManifestOptions, args)
    result = recipe.read_arguments(vars(args))
    for missing in result.missing_audio:
        print(f"missing audio: {missing.source}:{missing.line} id={missing.id} {missing.audio}", file=sys.stderr)
    if not result.utterances:
        reason = f"all {len(result.missing_audio)} rows lack their audio file" if result.missing_audio else "it holds no rows"
        return fail(f"{getattr(args, recipe.source.dest)} gives no utterances ({reason}); no manifest written")
    if options.strict and result.missing_audio:
        return fail(f"{len(result.missing_audio)} rows have no audio file (--strict); no manifest written")
    write_manifest(args.out, result.utterances)
    print(f"{result.summary()}; wrote {args.out}")
    return 0


main = command_main(build_parser, _run, module=__name__)
