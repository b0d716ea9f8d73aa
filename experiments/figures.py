"""``python -m experiments.figures KIND ... --out PATH``: one figure (PNG + PDF) from saved results.

    python -m experiments.figures per-position --probes results/probes.jsonl --run RUN_ID [--control CONTROL_RUN_ID] --out figures/per_position
    python -m experiments.figures gaps --gap "Common Voice=results/gap-cv.json" ... --out figures/gaps
    python -m experiments.figures error-distribution --gap results/gap-fleurs.json --language ar --out figures/error_distribution_ar
    python -m experiments.figures attention --probes results/probes.jsonl --run "LABEL=RUN_ID" ... --out figures/attention
    python -m experiments.figures confusion --probes results/probes.jsonl --run RUN_ID --sentences OUT.sentences.jsonl --out figures/confusion
    python -m experiments.figures heatmap --probes results/probes.jsonl --store STORE [--random-store STORE] [--split loso] --out figures/heatmap
    python -m experiments.figures heatmap --long results/collected/long.csv --label whisper-base [--random-label whisper-base-random] --out figures/heatmap

The figures are ``experiments.reports.plots``; probe results are read with ``probing.results``, the
other result files through their records (``extract.records``).
The correlation scatter is ``experiments.correlate --plot``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from experiments.cli import CommandParser, add_renamed_argument, input_argument, output_argument, run_cli
from experiments.reports import plots
from extract.records import GapReport, LongRow, MustSheScores, read_document, read_side_rows, read_table
from extract.store import ShardReader, StoreError
from probing.data import DEFAULT_SPLIT, SPLITS
from probing.kinds import KINDS
from probing.results import ResultsError, load_arrays, load_attention, load_predictions, load_rows


class FigureInputError(ValueError):
    """Inputs that do not make the figure asked for (a malformed LABEL=VALUE, no sentence the run predicted)."""


def _pairs(values: list[str], what: str) -> dict[str, str]:
    pairs = {}
    for value in values:
        label, separator, target = value.partition("=")
        if not separator:
            raise FigureInputError(f"{what} takes LABEL=VALUE, got {value!r}")
        pairs[label] = target
    return pairs


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(description="Draw one figure (PNG + PDF) from saved results; the correlation scatter is `experiments.correlate --plot`.")
    kinds = parser.add_subparsers(dest="kind", required=True)
    position = kinds.add_parser("per-position", help="F1 per position, EMA, control, avg. test length, MDL")
    position.set_defaults(draw=_per_position)
    input_argument(position, "--probes", required=True, type=Path, help="results JSONL of experiments.probe")
    position.add_argument("--run", required=True, help="run id of a positional probe")
    position.add_argument("--control", help="run id of its shuffled-label control")
    gaps = kinds.add_parser("gaps", help="E per language, a panel per dataset")
    gaps.set_defaults(draw=_gaps)
    input_argument(gaps, "--gap", required=True, nargs="+", action="extend", labelled=True, help="DATASET=experiments.asr_gap JSON")
    distribution = kinds.add_parser("error-distribution", help="share of records at or above each error rate, per gender")
    distribution.set_defaults(draw=_error_distribution)
    input_argument(distribution, "--gap", required=True, type=Path)
    distribution.add_argument("--language", required=True)
    attention = kinds.add_parser("attention", help="mean ± std attention over 100 interpolated positions")
    attention.set_defaults(draw=_attention)
    input_argument(attention, "--probes", required=True, type=Path)
    attention.add_argument("--run", required=True, nargs="+", action="extend", help="LABEL=run id of an attention probe")
    matrix = kinds.add_parser("confusion", help="probe prediction against the gender of the translation")
    matrix.set_defaults(draw=_confusion)
    input_argument(matrix, "--probes", required=True, type=Path)
    matrix.add_argument("--run", required=True, help="run id of an attention probe tested (or applied, --apply-to) on the MuST-SHE store")
    input_argument(matrix, "--sentences", required=True, type=Path, help="OUT.sentences.jsonl of experiments.mustshe")
    heatmap = kinds.add_parser("heatmap", help="score per site and condition, from probe rows (--probes, --store) or collect's long.csv (--long, --label)")
    heatmap.set_defaults(draw=_heatmap)
    input_argument(heatmap, "--probes", type=Path)
    input_argument(heatmap, "--store", help="the pretrained model's store")
    input_argument(heatmap, "--random-store", help="the random-init twin's store")
    input_argument(heatmap, "--long", type=Path, help="long.csv of experiments.collect (instead of --probes and --store)")
    add_renamed_argument(heatmap, "--label", ("--model",), help="with --long: the pretrained model's label (--model: deprecated spelling)")
    add_renamed_argument(heatmap, "--random-label", ("--random-model",), help="with --long: the random-init twin's label (--random-model: deprecated spelling)")
    heatmap.add_argument("--dataset", help="with --long: the dataset, where the model's rows hold several")
    heatmap.add_argument("--probe", choices=tuple(KINDS), default="positional")
    heatmap.add_argument("--split", choices=SPLITS, default=DEFAULT_SPLIT, help="the probes' split: fixed (default) or loso (leave one speaker out)")
    heatmap.add_argument(
        "--language", help="only runs restricted to this language (default: runs over all languages; with --long, the language of the rows, e.g. en+es)"
    )
    for sub in (position, gaps, distribution, attention, matrix, heatmap):
        output_argument(sub, "--out", required=True, type=Path, help="output path without suffix (PNG and PDF are written)", sidecars=plots.figure_paths)
        sub.add_argument("--title", default="")
    return parser


def _draw(args: argparse.Namespace) -> int:
    """The figure of the subcommand (its ``draw``, set by :func:`build_parser`), and where it went."""
    paths = args.draw(args)
    print(f"[figures] wrote {', '.join(map(str, paths))}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_cli(lambda: _draw(args), FigureInputError, ResultsError, StoreError)


def _row(probes: Path, run: str) -> dict:
    rows = load_rows(probes)
    if run not in rows:
        raise FigureInputError(f"no run {run} in {probes} (it holds {len(rows)} runs; the run id is each row's run_id)")
    return rows[run]


def _per_position(args: argparse.Namespace) -> list[Path]:
    row = _row(args.probes, args.run)
    if not getattr(KINDS.get(row["config"]["probe"]), "per_position", False):
        per_position = " or ".join(name for name, kind in KINDS.items() if kind.per_position)
        raise FigureInputError(f"run {args.run} is a {row['config']['probe']} probe; the per-position figure needs a {per_position} run")
    if args.control:
        _row(args.probes, args.control)
    arrays = load_arrays(args.probes, args.run)
    control = load_arrays(args.probes, args.control)["test_f1_macro"] if args.control else None
    return plots.per_position(
        arrays["test_f1_macro"],
        row["mean_test_length"],
        args.out,
        ema=arrays.get("test_f1_ema"),
        control=control,
        mdl_bits=arrays.get("mdl_online_bits"),
        uniform_bits=arrays.get("mdl_uniform_bits"),
        title=args.title,
    )


def _gaps(args: argparse.Namespace) -> list[Path]:
    results = {label: read_document(path, GapReport).to_dict() for label, path in _pairs(args.gap, "--gap").items()}
    return plots.gap_bars(results, args.out, args.title)


def _error_distribution(args: argparse.Namespace) -> list[Path]:
    languages = read_document(args.gap, GapReport).languages
    if args.language not in languages:
        raise FigureInputError(f"{args.gap} has no language {args.language!r}; it has {', '.join(sorted(languages)) or 'none'}")
    entry = languages[args.language]
    return plots.error_distribution(entry["error_distribution"], args.out, entry["metric"].upper(), args.title)


def _attention(args: argparse.Namespace) -> list[Path]:
    profiles = {label: load_attention(args.probes, run)[1] for label, run in _pairs(args.run, "--run").items()}
    return plots.attention_profiles(profiles, args.out, title=args.title)


def _confusion(args: argparse.Namespace) -> list[Path]:
    row = _row(args.probes, args.run)
    predicted = load_predictions(args.probes, args.run)
    sentences = read_side_rows(args.sentences, MustSheScores)
    kept = [s for s in sentences if s["id"] in predicted]
    if not kept:
        raise FigureInputError(f"no sentence of {args.sentences} was predicted by run {row['run_id']}")
    return plots.confusion([predicted[s["id"]] for s in kept], [s["translation_gender"] for s in kept], args.out, title=args.title)


def _heatmap(args: argparse.Namespace) -> list[Path]:
    if args.long:
        if not args.label or args.probes or args.store:
            raise FigureInputError("heatmap --long takes --label LABEL (and --random-label), not --probes or --store")
        rows = [row.to_dict() for row in read_table(args.long, LongRow)]
        try:
            chosen = (args.label, args.random_label, args.probe, args.language, args.dataset, args.split)
            scores, sites, conditions, key = plots.long_condition_scores(rows, *chosen)
        except ValueError as error:
            raise FigureInputError(f"{args.long}: {error}") from None
        if not scores:
            raise FigureInputError(f"{args.long}: no {args.probe} probe scores of model {args.label}")
    else:
        if not (args.probes and args.store):
            raise FigureInputError("heatmap takes --probes and --store (or --long and --label)")
        scores, sites, conditions, key = plots.site_condition_scores(
            load_rows(args.probes).values(), args.store, args.random_store, args.probe, args.language, ShardReader(args.store).sites, args.split
        )
    return plots.site_heatmap(scores, sites, conditions, args.out, label=f"{key} (%)", title=args.title)


if __name__ == "__main__":
    sys.exit(main())
