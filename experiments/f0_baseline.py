"""``python -m experiments.f0_baseline``: the F0-only baseline's store, probed like any model's.

    python -m experiments.f0_baseline --manifest M.jsonl --out stores/f0/NAME [--range-by speaker|record]
    python -m experiments.probe --store stores/f0/NAME --site f0 --probe mean --split loso --out results/probes.jsonl

Writes a store whose site ``f0`` holds one frame per utterance: ln median F0, mean and sd of ln F0
over its voiced frames (Praat, the per-speaker pitch range of ``experiments.acoustics``). The probe
rows it gives sit beside the hidden-state rows (subject model ``praat-f0``, site ``f0``), with the
same splits, leave-one-speaker-out and controls. Records without F0 are listed in the store's
``skipped`` attribute and counted here. A folder already holding this store is left as it is.
Definitions: ``experiments.analysis.f0``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from experiments.analysis.f0 import F0_FEATURES, F0_SITE, F0Error, write_f0_store
from experiments.analysis_options import F0Options
from experiments.cli import CommandParser, add_quiet_argument, command_main, input_argument, output_argument
from experiments.options import add_options, from_args
from extract.manifest import read_manifest


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    input_argument(parser, "--manifest", required=True, type=Path, help="utterance manifest (JSONL)")
    output_argument(parser, "--out", required=True, type=Path, help="store folder (new, or holding this F0 store)")
    add_options(parser, F0Options)
    add_quiet_argument(parser, "no progress bars")
    return parser


def _run(args: argparse.Namespace) -> int:
    if args.out.resolve() == args.manifest.resolve():
        raise F0Error(f"--out {args.out} is the manifest; give a store folder")
    range_by = from_args(F0Options, args).range_by
    utterances = read_manifest(args.manifest)
    print(f"[f0] {len(utterances)} records of {args.manifest}: {', '.join(F0_FEATURES)} with the pitch range per {range_by}")
    written = write_f0_store(utterances, args.manifest, args.out, range_by, not args.quiet)
    if written["up_to_date"]:
        print(f"[f0] {args.out} already holds this F0 store (same manifest and settings): nothing to do")
    else:
        print(f"[f0] {written['stored']} records stored, {len(written['skipped'])} without F0")
        for skipped in written["skipped"][:10]:
            print(f"  {skipped['id']}: {skipped['reason']}")
        if len(written["skipped"]) > 10:
            print(f"  ... (all {len(written['skipped'])} in the store's 'skipped' attribute)")
    print(f"[f0] store: {args.out} (site {F0_SITE}); probe it with python -m experiments.probe --store {args.out} --site {F0_SITE} --probe mean")
    return 0


main = command_main(build_parser, _run, module=__name__)
