"""What the commands that write a store of states from a model (``extract``, ``decoder_states``) share:
their parser's common flags, the check of their paths, and the model spec with the random-weights baseline."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from experiments.cli import CommandParser, add_model_stage_arguments, add_quiet_argument, add_reclaim_stale_argument, model_spec
from experiments.options import add_options, from_args
from extract.stage_options import RandomInitOptions

if TYPE_CHECKING:  # loads torch, which --help never needs
    from extract.spec import ModelSpec


def build_store_parser(description: str, out_help: str, options: type) -> CommandParser:
    """The model flags, the manifest and the store (``out_help``), then the stage's ``options``, the
    random-weights baseline (:class:`RandomInitOptions`), ``--quiet`` and ``--reclaim-stale``."""
    parser = CommandParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_stage_arguments(parser, out_help)
    add_options(parser, options)
    add_options(parser, RandomInitOptions)
    add_quiet_argument(parser)
    add_reclaim_stale_argument(parser, "a part of --out")
    return parser


def store_paths_problem(args: argparse.Namespace) -> str | None:
    """Why ``--manifest`` or ``--out`` cannot be used (the manifest must be a file, the store a folder), or None."""
    manifest, out = Path(args.manifest), Path(args.out)
    if manifest.is_dir():
        return f"--manifest {manifest} is a folder; give the manifest file (JSONL)"
    if out.exists() and not out.is_dir():
        return f"--out {out} is a file; give a folder for the store (it is created if missing)"
    return None


def store_model_spec(args: argparse.Namespace) -> ModelSpec:
    """The spec the model flags name, with the random-weights baseline of :class:`RandomInitOptions`."""
    baseline = from_args(RandomInitOptions, args)
    return model_spec(args, random_init=baseline.random_init, seed=baseline.seed)
