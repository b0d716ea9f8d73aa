"""``python -m experiments.correlate``: correlation of two columns of a results table.

    python -m experiments.correlate --table T.csv --x f1_s --y gap_relative [--label language] --json OUT.json [--plot FIG.png]

Writes ``{"n", "pearson_r", "p_value", "r2", "spearman_rho", "slope", "intercept", "ci95_r"}``:
Pearson's r with its two-sided p-value, r², Spearman's ρ, the OLS fit of y on x, and a 95 %
interval for r from a bootstrap over rows (seeded; resamples where x or y is constant are left
out). Attanasio et al. 2024 report Pearson −0.65 between probe F1_S and the ASR gap over 19
languages; Fucci et al. 2025 report R² 0.99 between probe F1 and MuST-SHE gender accuracy.
Rows whose x or y is empty or not finite are dropped and counted.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path

import numpy as np

MIN_ROWS = 3


class CorrelationError(ValueError):
    pass


def correlate(x, y, bootstrap: int = 10_000, seed: int = 0) -> dict:
    """Correlation statistics of paired samples (needs at least 3 pairs and variation in both)."""
    from scipy import stats

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise CorrelationError(f"x and y must be 1-d and of equal length, got {x.shape} and {y.shape}")
    if len(x) < MIN_ROWS:
        raise CorrelationError(f"a correlation needs at least {MIN_ROWS} rows, got {len(x)}")
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        raise CorrelationError("x or y is constant: the correlation is undefined")
    pearson = stats.pearsonr(x, y)
    slope, intercept = np.polyfit(x, y, 1)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(x), size=(bootstrap, len(x)))
    xs, ys = x[draws], y[draws]
    xc, yc = xs - xs.mean(axis=1, keepdims=True), ys - ys.mean(axis=1, keepdims=True)
    denominator = np.sqrt((xc**2).sum(axis=1) * (yc**2).sum(axis=1))
    valid = denominator > 0
    rs = (xc * yc).sum(axis=1)[valid] / denominator[valid]
    return {
        "n": int(len(x)),
        "pearson_r": float(pearson.statistic),
        "p_value": float(pearson.pvalue),
        "r2": float(pearson.statistic**2),
        "spearman_rho": float(stats.spearmanr(x, y).statistic),
        "slope": float(slope),
        "intercept": float(intercept),
        "ci95_r": [float(np.percentile(rs, 2.5)), float(np.percentile(rs, 97.5))],
        "bootstrap": {"resamples": int(bootstrap), "used": int(valid.sum()), "seed": seed},
    }


def read_columns(path: Path, x: str, y: str, label: str | None) -> tuple[list[float], list[float], list[str], int]:
    """(x values, y values, labels, rows dropped for a missing or non-finite value)."""
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in (x, y, label) if c and c not in (reader.fieldnames or [])]
        if missing:
            raise CorrelationError(f"{path}: no column(s) {missing}; columns are {reader.fieldnames}")
        xs, ys, labels, dropped = [], [], [], 0
        for number, row in enumerate(reader, start=2):
            try:
                a, b = float(row[x]), float(row[y])
            except ValueError:
                if row[x].strip() and row[y].strip() and row[x].lower() not in ("nan", "null") and row[y].lower() not in ("nan", "null"):
                    raise CorrelationError(f"{path}:{number}: {x}={row[x]!r}, {y}={row[y]!r} are not numbers") from None
                dropped += 1
                continue
            if not (math.isfinite(a) and math.isfinite(b)):
                dropped += 1
                continue
            xs.append(a)
            ys.append(b)
            labels.append(row[label] if label else "")
    return xs, ys, labels, dropped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--table", required=True, type=Path, help="CSV with a header row")
    parser.add_argument("--x", required=True)
    parser.add_argument("--y", required=True)
    parser.add_argument("--label", help="column naming each point in the plot")
    parser.add_argument("--json", required=True, type=Path)
    parser.add_argument("--plot", type=Path, help="scatter with the fitted line (PNG; a PDF is written beside it)")
    parser.add_argument("--bootstrap", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        xs, ys, labels, dropped = read_columns(args.table, args.x, args.y, args.label)
        result = correlate(xs, ys, args.bootstrap, args.seed) | {"x": args.x, "y": args.y, "dropped_rows": dropped}
    except (CorrelationError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(f"[correlate] n={result['n']} ({dropped} rows dropped): Pearson r {result['pearson_r']:+.3f} (p {result['p_value']:.3g}, "
          f"95% CI {result['ci95_r'][0]:+.2f}..{result['ci95_r'][1]:+.2f}), R² {result['r2']:.3f}, Spearman {result['spearman_rho']:+.3f}")
    if args.plot:
        from experiments.figures import scatter_with_fit

        written = scatter_with_fit(xs, ys, labels, result, args.x, args.y, args.plot)
        print(f"[correlate] plot: {', '.join(map(str, written))}")
    print(f"[correlate] wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
