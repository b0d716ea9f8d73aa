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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from experiments.cli import CommandParser, command_main, input_argument, output_argument
from experiments.options import add_options, from_args
from experiments.reports import plots
from experiments.results.records import GapReport, LongRow, MustSheScores, read_table
from extract.errors import UserError
from extract.options import option
from extract.records import read_document, read_side_rows
from extract.store import ShardReader
from probing.data import DEFAULT_SPLIT, SPLITS
from probing.kinds import KINDS
from probing.results import load_arrays, load_attention, load_predictions, load_rows


class FigureInputError(UserError, ValueError):
    """Inputs that do not make the figure asked for (a malformed LABEL=VALUE, no sentence the run predicted)."""


def _pairs(values: list[str], what: str) -> dict[str, str]:
    pairs = {}
    for value in values:
        label, separator, target = value.partition("=")
        if not separator:
            raise FigureInputError(f"{what} takes LABEL=VALUE, got {value!r}")
        pairs[label] = target
    return pairs


# Each figure's options, declared once (``experiments.options`` derives its subcommand's flags from
# them; :data:`FIGURES` lists the subcommands). A field that is not an ``option`` has its flag
# written by hand, where an option cannot say it.


@dataclass(frozen=True)
class PerPositionFigure:
    probes: Path = option(help="results JSONL of experiments.probe", role="input")
    run: str = option(help="run id of a positional probe")
    control: str | None = option(None, "run id of its shuffled-label control")


@dataclass(frozen=True)
class GapsFigure:
    gap: tuple[str, ...]  # DATASET=PATH pairs, a labelled input: its flag is written in _gap_flag


@dataclass(frozen=True)
class ErrorDistributionFigure:
    gap: Path = option(role="input")
    language: str = option()


@dataclass(frozen=True)
class AttentionFigure:
    probes: Path = option(role="input")
    run: tuple[str, ...] = ()  # LABEL=RUN pairs, space-separated: its flag is written in _attention_runs_flag


@dataclass(frozen=True)
class ConfusionFigure:
    probes: Path = option(role="input")
    run: str = option(help="run id of an attention probe tested (or applied, --apply-to) on the MuST-SHE store")
    sentences: Path = option(help="OUT.sentences.jsonl of experiments.mustshe", role="input")


@dataclass(frozen=True)
class HeatmapFigure:
    probes: Path | None = option(None, role="input")
    store: str | None = option(None, "the pretrained model's store", role="input")
    random_store: str | None = option(None, "the random-init twin's store", role="input")
    long: Path | None = option(None, "long.csv of experiments.collect (instead of --probes and --store)", role="input")
    label: str | None = option(None, "with --long: the pretrained model's label (--model: deprecated spelling)", aliases=("--model",))
    random_label: str | None = option(None, "with --long: the random-init twin's label (--random-model: deprecated spelling)", aliases=("--random-model",))
    dataset: str | None = option(None, "with --long: the dataset, where the model's rows hold several")
    probe: str = option("positional", choices=tuple(KINDS))
    split: str = option(DEFAULT_SPLIT, "the probes' split: fixed (default) or loso (leave one speaker out)", choices=SPLITS)
    language: str | None = option(
        None, "only runs restricted to this language (default: runs over all languages; with --long, the language of the rows, e.g. en+es)"
    )


@dataclass(frozen=True)
class Titled:
    """What every figure takes after its ``--out``."""

    title: str = option("")


def _gap_flag(parser) -> None:
    input_argument(parser, "--gap", required=True, nargs="+", action="extend", labelled=True, help="DATASET=experiments.asr_gap JSON")


def _attention_runs_flag(parser) -> None:
    parser.add_argument("--run", required=True, nargs="+", action="extend", help="LABEL=run id of an attention probe")


def build_parser() -> argparse.ArgumentParser:
    """One subcommand per figure (:data:`FIGURES`): its declared options, the flags written by hand
    where an option cannot say them (a labelled input, space-separated pairs), ``--out`` and ``--title``."""
    parser = CommandParser(description="Draw one figure (PNG + PDF) from saved results; the correlation scatter is `experiments.correlate --plot`.")
    kinds = parser.add_subparsers(dest="kind", required=True)
    for name, figure in FIGURES.items():
        sub = kinds.add_parser(name, help=figure.help)
        sub.set_defaults(figure=figure)
        add_options(sub, figure.options)
        if figure.flags_by_hand is not None:
            figure.flags_by_hand(sub)
        output_argument(sub, "--out", required=True, type=Path, help="output path without suffix (PNG and PDF are written)", sidecars=plots.figure_paths)
        add_options(sub, Titled)
    return parser


def _draw(args: argparse.Namespace) -> int:
    """The figure of the subcommand (:data:`FIGURES`), from its options, and where it went."""
    figure = args.figure
    by_hand = {name: tuple(getattr(args, name)) for name in figure.fields_by_hand}
    paths = figure.draw(from_args(figure.options, args, **by_hand), args.out, from_args(Titled, args).title)
    print(f"[figures] wrote {', '.join(map(str, paths))}")
    return 0


def _row(probes: Path, run: str) -> dict:
    rows = load_rows(probes)
    if run not in rows:
        raise FigureInputError(f"no run {run} in {probes} (it holds {len(rows)} runs; the run id is each row's run_id)")
    return rows[run]


def _per_position(figure: PerPositionFigure, out: Path, title: str) -> list[Path]:
    row = _row(figure.probes, figure.run)
    if not getattr(KINDS.get(row["config"]["probe"]), "per_position", False):
        per_position = " or ".join(name for name, kind in KINDS.items() if kind.per_position)
        raise FigureInputError(f"run {figure.run} is a {row['config']['probe']} probe; the per-position figure needs a {per_position} run")
    if figure.control:
        _row(figure.probes, figure.control)
    arrays = load_arrays(figure.probes, figure.run)
    control = load_arrays(figure.probes, figure.control)["test_f1_macro"] if figure.control else None
    return plots.per_position(
        arrays["test_f1_macro"],
        row["mean_test_length"],
        out,
        ema=arrays.get("test_f1_ema"),
        control=control,
        mdl_bits=arrays.get("mdl_online_bits"),
        uniform_bits=arrays.get("mdl_uniform_bits"),
        title=title,
    )


def _gaps(figure: GapsFigure, out: Path, title: str) -> list[Path]:
    results = {label: read_document(path, GapReport).to_dict() for label, path in _pairs(figure.gap, "--gap").items()}
    return plots.gap_bars(results, out, title)


def _error_distribution(figure: ErrorDistributionFigure, out: Path, title: str) -> list[Path]:
    languages = read_document(figure.gap, GapReport).languages
    if figure.language not in languages:
        raise FigureInputError(f"{figure.gap} has no language {figure.language!r}; it has {', '.join(sorted(languages)) or 'none'}")
    entry = languages[figure.language]
    return plots.error_distribution(entry["error_distribution"], out, entry["metric"].upper(), title)


def _attention(figure: AttentionFigure, out: Path, title: str) -> list[Path]:
    profiles = {label: load_attention(figure.probes, run)[1] for label, run in _pairs(figure.run, "--run").items()}
    return plots.attention_profiles(profiles, out, title=title)


def _confusion(figure: ConfusionFigure, out: Path, title: str) -> list[Path]:
    row = _row(figure.probes, figure.run)
    predicted = load_predictions(figure.probes, figure.run)
    sentences = read_side_rows(figure.sentences, MustSheScores)
    kept = [s for s in sentences if s["id"] in predicted]
    if not kept:
        raise FigureInputError(f"no sentence of {figure.sentences} was predicted by run {row['run_id']}")
    return plots.confusion([predicted[s["id"]] for s in kept], [s["translation_gender"] for s in kept], out, title=title)


def _heatmap(figure: HeatmapFigure, out: Path, title: str) -> list[Path]:
    if figure.long:
        if not figure.label or figure.probes or figure.store:
            raise FigureInputError("heatmap --long takes --label LABEL (and --random-label), not --probes or --store")
        rows = [row.to_dict() for row in read_table(figure.long, LongRow)]
        try:
            chosen = (figure.label, figure.random_label, figure.probe, figure.language, figure.dataset, figure.split)
            scores, sites, conditions, key = plots.long_condition_scores(rows, *chosen)
        except ValueError as error:
            raise FigureInputError(f"{figure.long}: {error}") from None
        if not scores:
            raise FigureInputError(f"{figure.long}: no {figure.probe} probe scores of model {figure.label}")
    else:
        if not (figure.probes and figure.store):
            raise FigureInputError("heatmap takes --probes and --store (or --long and --label)")
        scores, sites, conditions, key = plots.site_condition_scores(
            load_rows(figure.probes).values(), figure.store, figure.random_store, figure.probe, figure.language, ShardReader(figure.store).sites, figure.split
        )
    return plots.site_heatmap(scores, sites, conditions, out, label=f"{key} (%)", title=title)


@dataclass(frozen=True)
class Figure:
    """A subcommand: its options, its line in ``--help``, what draws it, and the flags of fields an
    option cannot declare (``flags_by_hand`` adds them; ``fields_by_hand`` names them)."""

    options: type
    help: str
    draw: Callable[..., list[Path]]
    flags_by_hand: Callable[[argparse.ArgumentParser], None] | None = None
    fields_by_hand: tuple[str, ...] = ()


FIGURES = {
    "per-position": Figure(PerPositionFigure, "F1 per position, EMA, control, avg. test length, MDL", _per_position),
    "gaps": Figure(GapsFigure, "E per language, a panel per dataset", _gaps, _gap_flag, ("gap",)),
    "error-distribution": Figure(ErrorDistributionFigure, "share of records at or above each error rate, per gender", _error_distribution),
    "attention": Figure(AttentionFigure, "mean ± std attention over 100 interpolated positions", _attention, _attention_runs_flag, ("run",)),
    "confusion": Figure(ConfusionFigure, "probe prediction against the gender of the translation", _confusion),
    "heatmap": Figure(HeatmapFigure, "score per site and condition, from probe rows (--probes, --store) or collect's long.csv (--long, --label)", _heatmap),
}


main = command_main(build_parser, _draw, module=__name__)
