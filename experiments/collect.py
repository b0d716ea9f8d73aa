"""``python -m experiments.collect``: probe rows joined with behaviour results, as tables.

    python -m experiments.collect --probes results/probes.jsonl [P2.jsonl ...] [--gaps results/gap-*.json ...] \\
        [--mustshe results/mustshe-*.json ...] [--winomt results/winomt-*.json ...] [--patch patch/*.summary.json ...] --out results/collected

Each behaviour input is optional: an ST study gives ``--mustshe`` without ``--gaps``, an ASR study
``--gaps`` without ``--mustshe``.

Writes ``OUT/f1_vs_gap.csv`` (per model, dataset, language, site and task: the positional probe's
F1_S without control, averaged over seeds, beside that model's gap E for the dataset and language,
its estimate and speaker-bootstrap interval), ``OUT/f1_vs_mustshe.csv`` (per model, site and target
language: the attention probe's F1 on the MuST-SHE store it was applied to, beside category-1
gender accuracy), with ``--patch`` ``OUT/f1_vs_patch.csv`` (per model, dataset, language and site:
the gender probe's F1_S beside that site's patching effect, cross minus within, and its interval),
``OUT/long.csv`` (every score, one per row) and ``OUT/collect.json`` (the inputs' path and sha256,
every key that found no partner, probe rows left out). Outputs are joined by the model label,
dataset and language each records (``--label`` of extract and transcribe), never by path. Every row
names its site's role in the model (``site_role``: ``final``, ``pre_adapter``, ``layer``, ...). Two
records claiming one key are one ``error:`` line naming both, exit status 2. The library is
``experiments.results.collect``; then::

    python -m experiments.correlate --table results/collected/f1_vs_gap.csv --where site=encoder.final \\
        --x f1_s --y gap_relative --label model,dataset,language --out results/correlation.json --plot figures/f1_vs_gap.png
    python -m experiments.correlate --table results/collected/f1_vs_mustshe.csv --where site_role=final \\
        --x applied_f1_macro --y category_1_accuracy --label model,site,tgt_lang --out results/mustshe-correlation.json
"""

from __future__ import annotations

import argparse
from pathlib import Path

from experiments.cli import CommandParser, command_main, input_argument, output_argument
from experiments.results.collect import CollectError, collect, collected_files, write_collected


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    input_argument(parser, "--probes", required=True, nargs="+", action="extend", type=Path, help="results JSONL of experiments.probe")
    input_argument(parser, "--gaps", nargs="+", action="extend", type=Path, default=[], help="experiments.asr_gap JSON, one per model and hypotheses file")
    input_argument(parser, "--mustshe", nargs="+", action="extend", type=Path, default=[], help="experiments.mustshe JSON")
    input_argument(parser, "--winomt", nargs="+", action="extend", type=Path, default=[], help="experiments.winomt JSON (scores go to long.csv)")
    input_argument(
        parser,
        "--patch",
        nargs="+",
        action="extend",
        type=Path,
        default=[],
        help="experiments.patch summaries (OUT.summary.json): effects per site to long.csv, joined to probes in f1_vs_patch.csv",
    )
    output_argument(parser, "--out", required=True, type=Path, help="folder for the tables and collect.json", sidecars=collected_files)
    return parser


def _run(args: argparse.Namespace) -> int:
    if args.out.exists() and not args.out.is_dir():
        raise CollectError(f"--out {args.out} is a file; give a folder for the tables")
    result = collect(args.probes, args.gaps, args.mustshe, args.winomt, args.patch)
    written = write_collected(result, args.out)
    patched = "" if result.f1_vs_patch is None else f"{len(result.f1_vs_patch)} f1_vs_patch rows, "
    print(
        f"[collect] {len(result.f1_vs_gap)} f1_vs_gap rows, {len(result.f1_vs_mustshe)} f1_vs_mustshe rows, {patched}{len(result.long)} scores; "
        f"unmatched: {result.unmatched_summary()} (listed in {written['collect']})"
    )
    if result.skipped:
        print(f"[collect] {len(result.skipped)} probe rows left out: written before rows recorded their subject (listed in {written['collect']})")
    print(f"[collect] wrote {', '.join(str(path) for path in written.values())}")
    return 0


main = command_main(build_parser, _run, module=__name__)
