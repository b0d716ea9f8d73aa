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
from pathlib import Path

from experiments.cli import CommandParser, add_out_argument, input_argument, output_argument, run_cli
from experiments.scoring.correlation import CorrelationError, correlate, read_columns


def _condition(value: str) -> tuple[str, str]:
    column, separator, wanted = value.partition("=")
    if not separator or not column:
        raise argparse.ArgumentTypeError(f"{value!r}: expected COLUMN=VALUE, e.g. site=encoder.final")
    return column, wanted


def _plot_files(plot: Path) -> list[Path]:
    from experiments.reports.plots import figure_paths  # here, not at the top: it loads torch, only for --plot

    return figure_paths(plot)


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    input_argument(parser, "--table", required=True, type=Path, help="CSV with a header row")
    parser.add_argument("--x", required=True)
    parser.add_argument("--y", required=True)
    parser.add_argument("--label", help="column naming each point in the plot (several: comma-separated)")
    parser.add_argument(
        "--where",
        action="extend",
        nargs="+",
        default=[],
        type=_condition,
        metavar="COLUMN=VALUE",
        help="only rows whose COLUMN holds VALUE (several: all of them)",
    )
    add_out_argument(parser, "statistics JSON")
    output_argument(parser, "--plot", type=Path, help="scatter with the fitted line (PNG; a PDF is written beside it)", sidecars=_plot_files)
    parser.add_argument("--bootstrap", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    return parser


def _run(args: argparse.Namespace) -> int:
    where = dict(args.where)
    xs, ys, labels, dropped = read_columns(args.table, args.x, args.y, args.label, where)
    result = correlate(xs, ys, args.bootstrap, args.seed) | {"x": args.x, "y": args.y, "dropped_rows": dropped}
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

        written = scatter_with_fit(xs, ys, labels, result, args.x, args.y, args.plot)
        print(f"[correlate] plot: {', '.join(map(str, written))}")
    print(f"[correlate] wrote {args.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_cli(lambda: _run(args), CorrelationError)


if __name__ == "__main__":
    sys.exit(main())
