"""Correlation of two columns of a results table (``python -m experiments.correlate``).

:func:`correlate` gives ``{"n", "pearson_r", "p_value", "r2", "spearman_rho", "slope", "intercept",
"ci95_r", "bootstrap"}``: Pearson's r with its two-sided p-value, r², Spearman's ρ, the OLS fit of
y on x, and a 95 % interval for r from a bootstrap over rows (seeded; resamples where x or y is
constant are left out). Attanasio et al. 2024 report Pearson −0.65 between probe F1_S and the ASR
gap over 19 languages; Fucci et al. 2025 report R² 0.99 between probe F1 and MuST-SHE gender
accuracy. :func:`read_columns` drops and counts rows whose x or y is empty or not finite.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

MIN_ROWS = 3


class CorrelationError(ValueError):
    pass


def correlate(x, y, bootstrap: int = 10_000, seed: int = 0) -> dict:
    """Correlation statistics of paired samples (needs at least 3 pairs and variation in both)."""
    from scipy import stats  # here: scipy takes a second to import, which --help never needs

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


TITLE_COLUMNS = ("model", "dataset", "site", "split")  # what a scatter's title names, where its rows share it


def shared_values(path: Path, where: dict[str, str] | None = None, columns: tuple[str, ...] = TITLE_COLUMNS) -> dict[str, str]:
    """The ``columns`` of ``path`` (a CSV table) that hold one value over the rows ``where`` selects:
    what every point of a scatter of those rows has in common (its title)."""
    where = where or {}
    with path.open(newline="", encoding="utf-8") as handle:
        rows = [row for row in csv.DictReader(handle) if all(row.get(column) == value for column, value in where.items())]
    found = {column: {row.get(column) for row in rows} for column in columns if rows and column in rows[0]}
    return {column: values.pop() for column, values in found.items() if len(values) == 1 and next(iter(values))}


def read_columns(path: Path, x: str, y: str, label: str | None, where: dict[str, str] | None = None) -> tuple[list[float], list[float], list[str], int]:
    """(x values, y values, labels, rows dropped for a missing or non-finite value) of the rows whose
    columns equal every ``where`` value. ``label``: a column, or several separated by commas (joined
    with spaces)."""
    where = where or {}
    labels_from = [name for name in (label or "").split(",") if name]
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in (x, y, *labels_from, *where) if c not in (reader.fieldnames or [])]
        if missing:
            raise CorrelationError(f"{path}: no column(s) {missing}; columns are {reader.fieldnames}")
        xs, ys, labels, dropped = [], [], [], 0
        for number, row in enumerate(reader, start=2):
            if any(row[column] != value for column, value in where.items()):
                continue
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
            labels.append(" ".join(row[name] for name in labels_from))
    return xs, ys, labels, dropped


def correlate_columns(table: str | Path, x: str, y: str, where: dict[str, str] | None = None, bootstrap: int = 10_000, seed: int = 0) -> dict:
    """:func:`correlate` of columns ``x`` and ``y`` of a CSV table (e.g. ``f1_vs_gap.csv``), over the
    rows whose columns equal every ``where`` value (:func:`read_columns`), with ``x``, ``y``,
    ``dropped_rows`` and ``where`` (when given) added: what ``python -m experiments.correlate`` writes."""
    xs, ys, _, dropped = read_columns(Path(table), x, y, None, where)
    result = correlate(xs, ys, bootstrap, seed) | {"x": x, "y": y, "dropped_rows": dropped}
    return result | ({"where": dict(where)} if where else {})
