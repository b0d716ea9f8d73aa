"""Per-position logistic probes and per-position MDL: batched (probing.train) against a loop of
scikit-learn fits, one per position, as in the published code.

Synthetic data with known structure (a gender signal whose strength varies over positions), on
the CPU. The published loop fits each position's features as given; ours standardizes them with
training statistics first (timed with the fit), as ``experiments.probe`` does by default. The
scikit-learn loop is timed on ``--sklearn-positions`` positions and extrapolated linearly to all
positions (its fits are independent, so the cost is linear); F1 parity is checked on those positions. Usage::

    .venv/bin/python benchmarks/probes.py --positions 1000 --utterances 2000 --dim 512
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def make_data(n: int, positions: int, dim: int, raw_scales: bool, seed: int = 0):
    """A gender signal on 4 dimensions whose strength varies over positions. With ``raw_scales``,
    dimensions get log-uniform scales in [1e-2, 1e1] and offsets, like raw hidden states."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    x = rng.standard_normal((n, positions, dim), dtype=np.float32)
    strength = 0.15 + 0.35 * (np.cos(np.linspace(0, 3 * np.pi, positions)) + 1) / 2
    x[:, :, :4] += ((2 * y - 1)[:, None, None] * strength[None, :, None]).astype(np.float32)
    if raw_scales:
        x *= (10 ** rng.uniform(-2, 1, dim)).astype(np.float32)
        x += rng.normal(0, 5, dim).astype(np.float32)
    speakers = np.array([f"s{i % (n // 10)}" for i in range(n)])
    return x, y, speakers


def main() -> None:
    from sklearn.linear_model import LogisticRegression

    from probing.features import Standardizer
    from probing.mdl import online_code, online_code_logistic
    from probing.metrics import position_scores
    from probing.train import fit_logistic

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--positions", type=int, default=1000)
    parser.add_argument("--utterances", type=int, default=2000)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--sklearn-positions", type=int, default=20)
    parser.add_argument("--skip-mdl", action="store_true")
    parser.add_argument(
        "--raw-scales",
        action="store_true",
        help="unstandardized, anisotropic features as in raw hidden states; the published loop fits them as they are, ours standardizes first (timed)",
    )
    args = parser.parse_args()

    raw, y, speakers = make_data(args.utterances, args.positions, args.dim, args.raw_scales)
    split = int(0.8 * args.utterances)
    train, test = slice(0, split), slice(split, None)
    mask = np.ones((split, args.positions), dtype=bool)
    result = {"positions": args.positions, "utterances": args.utterances, "dim": args.dim, "raw_scales": args.raw_scales}

    started = time.perf_counter()
    scaler = Standardizer.fit(raw[train], mask)
    x = scaler(raw)
    model = fit_logistic(x[train], y[train], mask)
    result["batched_fit_s"] = time.perf_counter() - started
    ours = position_scores(y[test], (model.probabilities(x[test]) > 0.5).astype(int))["f1_macro"]

    sample = np.linspace(0, args.positions - 1, args.sklearn_positions).astype(int)
    started = time.perf_counter()
    theirs = []
    for p in sample:
        classifier = LogisticRegression(max_iter=1000).fit(raw[train, p], y[train])
        theirs.append(position_scores(y[test], classifier.predict(raw[test, p]))["f1_macro"])
    per_position = (time.perf_counter() - started) / len(sample)
    result["sklearn_fit_s_extrapolated"] = per_position * args.positions
    result["fit_speedup"] = result["sklearn_fit_s_extrapolated"] / result["batched_fit_s"]
    result["mean_abs_f1_difference"] = float(np.mean(np.abs(np.array(theirs) - ours[sample])))
    result["mean_f1_batched"], result["mean_f1_sklearn"] = float(np.mean(ours[sample])), float(np.mean(theirs))

    if not args.skip_mdl:
        started = time.perf_counter()
        online_code_logistic(x[train], y[train], mask, speakers[train], c_grid=None, c=1.0)  # one fixed C, as the scikit-learn loop below
        result["batched_mdl_s"] = time.perf_counter() - started
        started = time.perf_counter()
        for p in sample[:5]:
            xp = raw[train, p][:, None, :]
            online_code(
                y[train],
                np.ones((split, 1), bool),
                speakers[train],
                lambda idx, xp=xp: LogisticRegression(max_iter=1000).fit(xp[idx, 0], y[train][idx]),
                lambda m, idx, xp=xp: m.predict_proba(xp[idx, 0])[:, 1],
            )
        result["sklearn_mdl_s_extrapolated"] = (time.perf_counter() - started) / 5 * args.positions
        result["mdl_speedup"] = result["sklearn_mdl_s_extrapolated"] / result["batched_mdl_s"]
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
