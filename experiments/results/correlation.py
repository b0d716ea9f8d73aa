"""Correlation of two columns of a results table (``python -m experiments.correlate``).

:func:`correlate` gives ``{"n", "pearson_r", "p_value", "r2", "spearman_rho", "slope", "intercept",
"ci95_r", "bootstrap", "p_permutation", "permutation"}``: Pearson's r with its two-sided parametric
p-value, r², Spearman's ρ, the OLS fit of y on x, a 95 % interval for r from a bootstrap over rows
(seeded; resamples where x or y is constant are left out), and a permutation p-value of r.
Attanasio et al. 2024 report Pearson −0.65 between probe F1_S and the ASR gap over 19 languages;
Fucci et al. 2025 report R² 0.99 between probe F1 and MuST-SHE gender accuracy.

**Permutation p** (``p_permutation``, two-sided: the share of arrangements whose |r| reaches the
observed |r|). Without clusters the y values are permuted over the rows. With ``clusters`` (e.g.
each row's model), the rows are not independent units and the clusters are: the y values move as
whole blocks, cluster against cluster, while x stays put. The rows of a cluster keep their order in
the input (its first y row goes with the other cluster's first x row, and so on), so every cluster
needs the same number of rows; any fixed order within a block gives a valid test, the order of a
table sorted by a shared key (the direction, the language) gives the most power. The statistic is
the pooled r over all rows, so the null is "which cluster's behaviour goes with which cluster's
probe scores does not matter" and there are ``n_clusters!`` arrangements (3 models: 6, so
``p_permutation >= 1/6``; its smallest possible value is ``p_permutation_floor``). The test is
exact (every arrangement, the observed one included) when the arrangements number at most
``permutations``; otherwise ``permutations`` random arrangements give the Monte-Carlo estimate
``(1 + hits) / (1 + permutations)`` (Phipson & Smyth 2010), never 0. ``permutation`` records which.

**Clusters** (``clusters``) add ``n_clusters``; ``r_between``, Pearson's r of the cluster means (each
cluster one point, whatever its size; needs 3 clusters); ``r_within``, the pooled within-cluster r
(each value minus its cluster's mean, then r over all rows: does x go with y inside a cluster?);
and for r, ``r_between`` and ``r_within`` a 95 % interval from a bootstrap over clusters
(``ci95_r_cluster``, ``ci95_r_between``, ``ci95_r_within``): each resample draws ``n_clusters``
clusters with replacement and takes all their rows (a cluster drawn twice counts twice). A resample
where a statistic is undefined (x or y constant; for ``r_between``, fewer than 3 distinct clusters
drawn, which with 3 clusters is 78 % of them) is left out of that interval and counted in
``cluster_bootstrap.used``.

**Too few units.** A bootstrap interval over fewer than :data:`MIN_INTERVAL_UNITS` units (rows, or
clusters for the cluster intervals) means nothing: with 3 units a resample holds at most 3 distinct
points and most resamples repeat one or two (10 distinct resamples in all). The interval is still
written, with ``ci95_note`` (rows) or ``ci95_cluster_note`` (clusters) saying so, and the console
and RESULTS.md print the note in its place.

:func:`read_columns` drops and counts rows whose x or y is empty or not finite.
"""

from __future__ import annotations

import csv
import itertools
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from extract.errors import UserError

MIN_ROWS = 3
MIN_INTERVAL_UNITS = 10  # fewer resampled units than this: the bootstrap interval is flagged (see the module docstring)
PERMUTATIONS = 10_000
TIE = 1e-12  # |r| of an arrangement within this of the observed |r| counts as reaching it (the observed one always does)


class CorrelationError(UserError, ValueError):
    pass


def correlate(x, y, bootstrap: int = 10_000, seed: int = 0, clusters=None, permutations: int = PERMUTATIONS) -> dict:
    """Correlation statistics of paired samples (needs at least 3 pairs and variation in both); with
    ``clusters`` (one label per pair), the cluster-aware statistics of the module docstring."""
    from scipy import stats  # here: scipy takes a second to import, which --help never needs

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise CorrelationError(f"x and y must be 1-d and of equal length, got {x.shape} and {y.shape}")
    if len(x) < MIN_ROWS:
        raise CorrelationError(f"a correlation needs at least {MIN_ROWS} rows, got {len(x)}")
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        raise CorrelationError("x or y is constant: the correlation is undefined")
    if permutations < 1:
        raise CorrelationError(f"permutations must be 1 or more, got {permutations}")
    pearson = stats.pearsonr(x, y)
    slope, intercept = np.polyfit(x, y, 1)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(x), size=(bootstrap, len(x)))
    rs = _pearson_rows(x[draws], y[draws])
    valid = np.isfinite(rs)
    result = {
        "n": int(len(x)),
        "pearson_r": float(pearson.statistic),
        "p_value": float(pearson.pvalue),
        "r2": float(pearson.statistic**2),
        "spearman_rho": float(stats.spearmanr(x, y).statistic),
        "slope": float(slope),
        "intercept": float(intercept),
        "ci95_r": _percentiles(rs[valid]),
        "bootstrap": {"resamples": int(bootstrap), "used": int(valid.sum()), "seed": seed},
    }
    if len(x) < MIN_INTERVAL_UNITS:
        result["ci95_note"] = too_few_note(len(x), "rows")
    if clusters is None:
        return result | permutation_test(x[:, None], y[:, None], permutations, seed, "rows")
    names, blocks = cluster_blocks(clusters, len(x))
    return result | clustered(x, y, names, blocks, bootstrap, seed, permutations)


def too_few_note(units: int, what: str) -> str:
    return f"{units} {what} < {MIN_INTERVAL_UNITS}: too few for a bootstrap interval to mean anything"


def interval_text(interval, note: str | None) -> str:
    """``95% CI a..b``, or why no interval is given (the note's first clause: ``3 clusters < 10``):
    how the console and the reports print an interval of r."""
    if note:
        return f"95% CI not meaningful: {note.split(':')[0]}"
    if interval[0] is None:
        return "95% CI n/a: no usable resample"
    return f"95% CI {interval[0]:+.2f}..{interval[1]:+.2f}"


def _pearson_rows(xs: np.ndarray, ys: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Pearson's r of each row of ``xs`` against the same row of ``ys`` ([B, n]; ``weights`` [B, n]: a
    weight of k counts the point k times); nan where a row's x or y does not vary."""
    weights = np.ones_like(xs) if weights is None else np.broadcast_to(weights, xs.shape)
    total = weights.sum(axis=1, keepdims=True)
    xc = xs - (weights * xs).sum(axis=1, keepdims=True) / total
    yc = ys - (weights * ys).sum(axis=1, keepdims=True) / total
    sxx, syy = (weights * xc**2).sum(axis=1), (weights * yc**2).sum(axis=1)
    denominator = np.sqrt(sxx * syy)
    scale = np.maximum(np.abs(xs).max(axis=1) * np.abs(ys).max(axis=1), 1.0) * total[:, 0]
    constant = denominator <= 1e-12 * scale  # a resample of one repeated value: rounding, not variation
    return np.where(constant, np.nan, (weights * xc * yc).sum(axis=1) / np.where(constant, 1.0, denominator))


def _percentiles(values: np.ndarray) -> list[float | None]:
    return [float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))] if len(values) else [None, None]


def cluster_blocks(clusters, n: int) -> tuple[list[str], list[np.ndarray]]:
    """The cluster names in order of first appearance and each one's row indices in input order."""
    labels = [str(label) for label in clusters]
    if len(labels) != n:
        raise CorrelationError(f"clusters must name each of the {n} rows, got {len(labels)} labels")
    names = list(dict.fromkeys(labels))
    if len(names) < 2:
        raise CorrelationError(f"a cluster-aware correlation needs at least 2 clusters, got {len(names)} ({names[0] if names else 'none'})")
    return names, [np.array([i for i, label in enumerate(labels) if label == name]) for name in names]


CHUNK = 4096  # arrangements scored at a time (memory: CHUNK x rows)


def arrangements(units: int, permutations: int, rng: np.random.Generator) -> tuple[Iterator[np.ndarray], int, str]:
    """Orders of ``units`` items to test, in chunks of at most :data:`CHUNK` rows: all of them (the
    identity first) when there are at most ``permutations``, else ``permutations`` random ones; with
    their count and which (``exact`` or ``monte-carlo``)."""
    if math.factorial(units) <= permutations:
        return _every_order(units), math.factorial(units), "exact"
    sizes = [min(CHUNK, permutations - start) for start in range(0, permutations, CHUNK)]
    return (np.argsort(rng.random((size, units)), axis=1) for size in sizes), permutations, "monte-carlo"


def _every_order(units: int) -> Iterator[np.ndarray]:
    every = itertools.permutations(range(units))
    while chunk := list(itertools.islice(every, CHUNK)):
        yield np.array(chunk, dtype=int)


def permutation_test(x_blocks: np.ndarray, y_blocks: np.ndarray, permutations: int, seed: int, units: str) -> dict:
    """Two-sided permutation p of the pooled r: ``x_blocks``, ``y_blocks`` are [units, rows per unit]
    (rows as units: [n, 1]); each arrangement reassigns whole y blocks to the x blocks. ``units``
    names them in the result (``rows``, ``clusters``)."""
    chunks, count, method = arrangements(len(x_blocks), permutations, np.random.default_rng([seed, 1]))
    observed = abs(_pearson_rows(x_blocks.ravel()[None, :], y_blocks.ravel()[None, :])[0])
    hits = 0
    for orders in chunks:
        xs = np.broadcast_to(x_blocks.ravel(), (len(orders), x_blocks.size))
        rs = _pearson_rows(xs, y_blocks[orders].reshape(len(orders), x_blocks.size))
        hits += int(np.sum(np.abs(rs) >= observed - TIE))
    p = hits / count if method == "exact" else (1 + hits) / (1 + count)
    floor = 1 / count if method == "exact" else 1 / (1 + count)
    return {
        "p_permutation": float(p),
        "p_permutation_floor": float(floor),
        "permutation": {"method": method, "arrangements": int(count), "units": units, "seed": seed},
    }


def clustered(x: np.ndarray, y: np.ndarray, names: list[str], blocks: list[np.ndarray], bootstrap: int, seed: int, permutations: int) -> dict:
    """``n_clusters``, ``r_between``, ``r_within``, their cluster-bootstrap intervals and the cluster
    permutation p (the module docstring)."""
    sizes = sorted({len(block) for block in blocks})
    if len(sizes) > 1:
        counts = ", ".join(f"{name} {len(block)}" for name, block in zip(names, blocks))
        raise CorrelationError(
            f"the cluster permutation moves whole clusters, so every cluster needs as many rows; rows per cluster: {counts}. "
            "Keep equal clusters (--where) or cluster by another column"
        )
    order = np.concatenate(blocks)
    member = np.repeat(np.arange(len(blocks)), sizes[0])
    x, y = x[order], y[order]
    means_x = np.array([x[member == k].mean() for k in range(len(blocks))])
    means_y = np.array([y[member == k].mean() for k in range(len(blocks))])
    within_x, within_y = x - means_x[member], y - means_y[member]
    counts = np.random.default_rng([seed, 2]).multinomial(len(blocks), np.full(len(blocks), 1 / len(blocks)), size=bootstrap).astype(float)
    statistics = {
        "r_cluster": (x, y, counts[:, member]),
        "r_between": (means_x, means_y, counts),
        "r_within": (within_x, within_y, counts[:, member]),
    }
    point = {
        "r_between": _pearson_rows(means_x[None, :], means_y[None, :])[0] if len(blocks) >= MIN_ROWS else np.nan,
        "r_within": _pearson_rows(within_x[None, :], within_y[None, :])[0],
    }
    result = {"n_clusters": len(blocks), "clusters": names}
    used = {}
    for name, (a, b, weights) in statistics.items():
        rs = _pearson_rows(np.broadcast_to(a, weights.shape), np.broadcast_to(b, weights.shape), weights)
        if name == "r_between":
            rs = np.where((weights > 0).sum(axis=1) >= MIN_ROWS, rs, np.nan)  # fewer than 3 distinct clusters: no r of means
        valid = np.isfinite(rs)
        used[name] = int(valid.sum())
        key = "ci95_r_cluster" if name == "r_cluster" else f"ci95_{name}"
        result[key] = _percentiles(rs[valid])
    for name, value in point.items():
        result[name] = None if not np.isfinite(value) else float(value)
    if result["r_between"] is None:
        result["r_between_note"] = f"{len(blocks)} clusters: the r of cluster means needs at least {MIN_ROWS} varying ones"
    if result["r_within"] is None:
        result["r_within_note"] = "x or y does not vary within any cluster: no within-cluster r"
    result["cluster_bootstrap"] = {"resamples": int(bootstrap), "used": used, "seed": seed}
    if len(blocks) < MIN_INTERVAL_UNITS:
        result["ci95_cluster_note"] = too_few_note(len(blocks), "clusters")
    x_blocks, y_blocks = x.reshape(len(blocks), -1), y.reshape(len(blocks), -1)
    return result | permutation_test(x_blocks, y_blocks, permutations, seed, "clusters")


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


def correlate_columns(
    table: str | Path,
    x: str,
    y: str,
    where: dict[str, str] | None = None,
    bootstrap: int = 10_000,
    seed: int = 0,
    cluster_by: str | None = None,
    permutations: int = PERMUTATIONS,
) -> dict:
    """:func:`correlate` of columns ``x`` and ``y`` of a CSV table (e.g. ``f1_vs_gap.csv``), over the
    rows whose columns equal every ``where`` value (:func:`read_columns`), clustered by the column
    ``cluster_by`` when given, with ``x``, ``y``, ``dropped_rows``, ``where`` and ``cluster_by`` (when
    given) added: what ``python -m experiments.correlate`` writes."""
    xs, ys, clusters, dropped = read_columns(Path(table), x, y, cluster_by, where)
    result = correlate(xs, ys, bootstrap, seed, clusters if cluster_by else None, permutations) | {"x": x, "y": y, "dropped_rows": dropped}
    return result | ({"where": dict(where)} if where else {}) | ({"cluster_by": cluster_by} if cluster_by else {})
