"""``python -m experiments.correlate``: correlation of two columns of a results table.

    python -m experiments.correlate --table T.csv --x f1_s --y gap_relative [--label language] --out OUT.json [--plot FIG.png]
    python -m experiments.correlate --table results/f1_vs_gap.csv --where site=encoder.layer.31 --x f1_s --y gap_relative \\
        --label model,dataset,language --out results/correlation.json --plot figures/f1_vs_gap.png

``--where COLUMN=VALUE`` (repeatable) keeps the rows whose column holds that value: cut
``experiments.collect``'s ``f1_vs_gap.csv`` to one site (and model) before correlating F1_S with E
over datasets and languages, or each (dataset, language) counts once per site. ``--label`` names
each point by a column, or by several separated by commas.

Writes ``{"n", "pearson_r", "p_value", "r2", "spearman_rho", "slope", "intercept", "ci95_r"}`` with
``x``, ``y`` and ``dropped_rows`` (rows whose x or y is empty or not finite); the statistics are
``experiments.scoring.correlation``. ``--json`` is a deprecated spelling of ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from experiments.cli import CommandParser, add_out_argument, command_main, input_argument, output_argument
from experiments.options import add_options, from_args
from experiments.scoring.correlation import CorrelationError, correlate, read_columns
from extract.options import option, seed_option


def _condition(value: str) -> tuple[str, str]:
    column, separator, wanted = value.partition("=")
    if not separator or not column:
        raise argparse.ArgumentTypeError(f"{value!r}: expected COLUMN=VALUE, e.g. site=encoder.final")
    return column, wanted


def _plot_files(plot: Path) -> list[Path]:
    from experiments.reports.plots import figure_paths  # here, not at the top: it loads torch, only for --plot

    return figure_paths(plot)


@dataclass(frozen=True, kw_only=True)
class CorrelateOptions:
    """The columns correlated, the rows kept and the interval's resampling."""

    x: str = option(help="the column of the x values")
    y: str = option(help="the column of the y values")
    label: str | None = option(None, "column naming each point in the plot (several: comma-separated)")
    where: tuple[tuple[str, str], ...] = option((), "only rows whose COLUMN holds VALUE (several: all of them)", parse=_condition, metavar="COLUMN=VALUE")
    bootstrap: int = option(10_000, "bootstrap resamples of the 95% interval of r")
    seed: int = seed_option("bootstrap seed")


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    input_argument(parser, "--table", required=True, type=Path, help="CSV with a header row")
    add_options(parser, CorrelateOptions)
    add_out_argument(parser, "statistics JSON")
    output_argument(parser, "--plot", type=Path, help="scatter with the fitted line (PNG; a PDF is written beside it)", sidecars=_plot_files)
    return parser


def _run(args: argparse.Namespace) -> int:
    options = from_args(CorrelateOptions, args)
    where = dict(options.where)
    xs, ys, labels, dropped = read_columns(args.table, options.x, options.y, options.label, where)
    result = correlate(xs, ys, options.bootstrap, options.seed) | {"x": options.x, "y": options.y, "dropped_rows": dropped}
    if where:
        result["where"] = where
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"[correlate] n={result['n']} ({dropped} rows dropped): Pearson r {result['pearson_r']:+.3f} (p {result['p_value']:.3g}, "
        f"95% CI {result['ci95_r'][0]:+.2f}..{result['ci95_r'][1]:+.2f}), R² {result['r2']:.3f}, Spearman {result['spearman_rho']:+.3f}"
    )
    if args.plot:
        from experiments.reports.plots import scatter_with_fit  # here, not at the top: matplotlib, only for --plot

        written = scatter_with_fit(xs, ys, labels, result, options.x, options.y, args.plot)
        print(f"[correlate] plot: {', '.join(map(str, written))}")
    print(f"[correlate] wrote {args.out}")
    return 0


main = command_main(build_parser, _run, CorrelationError)


if __name__ == "__main__":
    sys.exit(main())
