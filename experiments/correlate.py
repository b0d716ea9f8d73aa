"""``python -m experiments.correlate``: correlation of two columns of a results table.

    python -m experiments.correlate --table T.csv --x f1_s --y gap_relative [--label language] --out OUT.json [--plot FIG.png]
    python -m experiments.correlate --table results/f1_vs_gap.csv --where site=encoder.layer.31 --x f1_s --y gap_relative \\
        --label model,dataset,language --out results/correlation.json --plot figures/f1_vs_gap.png

``--where COLUMN=VALUE`` (repeatable) keeps the rows whose column holds that value: cut
``experiments.collect``'s ``f1_vs_gap.csv`` to one site (and model) before correlating F1_S with E
over datasets and languages, or each (dataset, language) counts once per site. ``--label`` names
each point by a column, or by several separated by commas.

``--cluster-by COLUMN`` says the rows are not independent: rows sharing that column's value (a
model, when each model contributes one row per direction) form a cluster. The permutation test then
moves each cluster's y values as a block (n_clusters! arrangements, so 3 models give p >= 1/6), and
the result adds ``n_clusters``, ``r_between`` (cluster means), ``r_within`` (pooled within-cluster)
and cluster-bootstrap intervals. ``--permutations N``: the test is exact when the rows (clusters)
have at most N orders, Monte-Carlo over N random ones otherwise.

    python -m experiments.correlate --table results/f1_vs_mustshe.csv --where site_role=final --x applied_f1_macro \\
        --y category_1_accuracy --cluster-by model --out results/fucci.json

Writes ``{"n", "pearson_r", "p_value", "r2", "spearman_rho", "slope", "intercept", "ci95_r",
"p_permutation", "p_permutation_floor", "permutation"}`` (with ``--cluster-by`` also ``n_clusters``,
``clusters``, ``r_between``, ``r_within``, ``ci95_r_cluster``, ``ci95_r_between``, ``ci95_r_within``,
``cluster_bootstrap``), with ``x``, ``y`` and ``dropped_rows`` (rows whose x or y is empty or not
finite); ``ci95_note`` / ``ci95_cluster_note`` where fewer than 10 rows (clusters) make an interval
meaningless, which the console prints instead of it. The statistics are
``experiments.results.correlation``. ``--json`` is a deprecated spelling of ``--out``.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from experiments.cli import CommandParser, add_out_argument, command_main, input_argument, output_argument
from experiments.format import number
from experiments.options import add_options, from_args
from experiments.reports.plots import axis_label, figure_paths, scatter_with_fit
from experiments.results.correlation import PERMUTATIONS, correlate, interval_text, read_columns, shared_values
from extract.options import option, seed_option


def _condition(value: str) -> tuple[str, str]:
    column, separator, wanted = value.partition("=")
    if not separator or not column:
        raise argparse.ArgumentTypeError(f"{value!r}: expected COLUMN=VALUE, e.g. site=encoder.final")
    return column, wanted


@dataclass(frozen=True, kw_only=True)
class CorrelateOptions:
    """The columns correlated, the rows kept and the interval's resampling."""

    x: str = option(help="the column of the x values")
    y: str = option(help="the column of the y values")
    label: str | None = option(None, "column naming each point in the plot (several: comma-separated)")
    where: tuple[tuple[str, str], ...] = option((), "only rows whose COLUMN holds VALUE (several: all of them)", parse=_condition, metavar="COLUMN=VALUE")
    bootstrap: int = option(10_000, "bootstrap resamples of the 95% interval of r")
    seed: int = seed_option("bootstrap and permutation seed")
    cluster_by: str | None = option(
        None, "column whose value groups rows that are not independent (e.g. model): permutation over whole clusters, r between and within clusters"
    )
    permutations: int = option(
        PERMUTATIONS, "the permutation test's budget: exact when the rows (clusters) have at most this many orders, else this many random ones"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    input_argument(parser, "--table", required=True, type=Path, help="CSV with a header row")
    add_options(parser, CorrelateOptions)
    add_out_argument(parser, "statistics JSON")
    output_argument(parser, "--plot", type=Path, help="scatter with the fitted line (PNG; a PDF is written beside it)", sidecars=figure_paths)
    return parser


def _run(args: argparse.Namespace) -> int:
    options = from_args(CorrelateOptions, args)
    where = dict(options.where)
    xs, ys, labels, dropped = read_columns(args.table, options.x, options.y, options.label, where)
    clusters = read_columns(args.table, options.x, options.y, options.cluster_by, where)[2] if options.cluster_by else None
    result = correlate(xs, ys, options.bootstrap, options.seed, clusters, options.permutations) | {"x": options.x, "y": options.y, "dropped_rows": dropped}
    if where:
        result["where"] = where
    if options.cluster_by:
        result["cluster_by"] = options.cluster_by
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    for line in summary_lines(result):
        print(f"[correlate] {line}")
    if args.plot:
        title = ", ".join(f"{column} {value}" for column, value in (shared_values(args.table, where) | where).items())
        written = scatter_with_fit(xs, ys, labels, result, axis_label(options.x), axis_label(options.y), args.plot, title=title)
        print(f"[correlate] plot: {', '.join(map(str, written))}")
    print(f"[correlate] wrote {args.out}")
    return 0


def summary_lines(result: dict) -> list[str]:
    """What the console says of a correlation: r with its p-values and interval, and with clusters the
    cluster-aware numbers (their intervals only where there are enough clusters)."""
    permutation = result["permutation"]
    lines = [
        f"n={result['n']} ({result['dropped_rows']} rows dropped): Pearson r {result['pearson_r']:+.3f} (p {result['p_value']:.3g}, "
        f"{interval_text(result['ci95_r'], result.get('ci95_note'))}), R² {result['r2']:.3f}, Spearman {result['spearman_rho']:+.3f}",
        f"permutation p {result['p_permutation']:.3g} ({permutation['method']}, {permutation['arrangements']} orders of the "
        f"{permutation['units']}; smallest possible {result['p_permutation_floor']:.3g})",
    ]
    if "n_clusters" in result:
        note = result.get("ci95_cluster_note")
        intervals = {key: "" if note else f" ({interval_text(result[key], None)})" for key in ("ci95_r_cluster", "ci95_r_between", "ci95_r_within")}
        head = f"{result['n_clusters']} clusters by {result.get('cluster_by', 'label')}: " + ("" if note else f"r{intervals['ci95_r_cluster']}, ")
        lines.append(
            head
            + f"r between cluster means {number(result['r_between'], 3, sign=True)}{intervals['ci95_r_between']}, "
            + f"r within clusters {number(result['r_within'], 3, sign=True)}{intervals['ci95_r_within']}"
            + (f"; cluster-bootstrap intervals not meaningful: {note}" if note else "")
        )
    return lines


main = command_main(build_parser, _run, module=__name__)
