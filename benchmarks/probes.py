"""Per-position logistic probes and per-position MDL on the CPU: ``probing`` against loops of
scikit-learn fits, one per position, in one run on the same synthetic data.

Three contenders, each timed on the same features:

- ``probing``: standardization with training statistics, then :func:`probing.train.fit_logistic`
  and :func:`probing.mdl.online_code_logistic` (on the CPU: :mod:`probing.solver`, cache-sized
  position chunks, warm starts, MDL fitted on each prefix, one worker process per core);
- the scikit-learn loop on the same standardized features, ``LogisticRegression(max_iter=1000)``
  per position, spread over both cores with joblib (loky workers, one BLAS thread each), on
  ``--loop-positions`` evenly spaced positions (default: all) and scaled linearly to all positions;
- the published approach: the same loop on one core on the raw features (``--raw-scales``: per
  dimension scales log-uniform in [1e-2, 1e1] and offsets, like raw hidden states), timed on
  ``--published-positions`` positions (``--published-mdl-positions`` for MDL) and scaled linearly.

MDL is timed at one fixed C = 1 on both sides (the loop codes each position with scikit-learn fits
on the same speaker-ordered prefixes); ``--mdl-grid`` also times the default guarded code (the
mixture over five C values). Peak memory: the features ``[N, P, D]`` once in float32 (4.1 GB at the
default size), standardized in place chunk by chunk. Usage::

    .venv/bin/python benchmarks/probes.py --positions 1000 --utterances 2000 --dim 512 --raw-scales

``--threads 1 2 4 8 16`` times only :func:`probing.solver.fit_positions` at each worker count on
the same data (3/4 of ``--utterances`` for training, as in the GPU check; standard normal features
with the gender signal, already on the scale standardizing gives), checks that every count gives
the same solution bit for bit, prints a table and writes JSON (``--out``, or ``$OUT/probe_threads.json``
when ``$OUT`` is set). A count above the usable cores runs as many workers as there are cores (the
table says how many ran). ``--before 2 16`` adds the thread pool the solver used before (threads of
one process, reproduced here) at those counts; ``--quick`` shrinks the data to 512 positions x 800
utterances x 256 dimensions; ``--repeat`` runs the sweep several times and reports medians;
``--chunks 0 1`` repeats the sweep with one position per chunk (0: the solver's cache-sized
default; a smaller chunk leaves more of the cache to each of many workers, and changes the warm
starts, so its solutions are compared with the first run at that chunk)::

    .venv/bin/python benchmarks/probes.py --threads 1 2 4 8 16 --before 2 16
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from unittest import mock

import numpy as np

STANDARDIZE_CHUNK = 50  # positions standardized at a time, in place


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


def standardize_in_place(x: np.ndarray, train: slice, mask: np.ndarray) -> None:
    """Per position and dimension, with training statistics, a chunk of positions at a time (no second copy of ``x``)."""
    from probing.features import Standardizer

    for begin in range(0, x.shape[1], STANDARDIZE_CHUNK):
        end = min(begin + STANDARDIZE_CHUNK, x.shape[1])
        x[:, begin:end] = Standardizer.fit(x[train, begin:end], mask[:, begin:end])(x[:, begin:end])


def _sklearn_fits(x_train, y_train, x_test, y_test):
    """One ``LogisticRegression(max_iter=1000)`` per position of ``x [n, p, D]``; test F1 per position."""
    from sklearn.linear_model import LogisticRegression

    from probing.metrics import position_scores

    scores = []
    for p in range(x_train.shape[1]):
        model = LogisticRegression(max_iter=1000).fit(x_train[:, p], y_train)
        scores.append(position_scores(y_test, model.predict(x_test[:, p])[:, None])["f1_macro"][0])
    return scores


def _sklearn_mdl(x_train, y_train, speakers):
    """Online codelength (bits) per position with a scikit-learn fit per block, C = 1."""
    from sklearn.linear_model import LogisticRegression

    from probing.mdl import online_code

    bits = []
    for p in range(x_train.shape[1]):
        xp = np.ascontiguousarray(x_train[:, p])
        code = online_code(
            y_train,
            np.ones((len(y_train), 1), bool),
            speakers,
            lambda idx, xp=xp: LogisticRegression(max_iter=1000).fit(xp[idx], y_train[idx]),
            lambda model, idx, xp=xp: model.predict_proba(xp[idx])[:, 1],
        )
        bits.append(float(code.online_bits[0]))
    return bits


def _chunks(positions: np.ndarray, jobs: int) -> list[np.ndarray]:
    return [c for c in np.array_split(positions, max(1, min(len(positions), 8 * jobs))) if len(c)]


def _timed(function):
    started = time.perf_counter()
    value = function()
    return value, time.perf_counter() - started


def _threaded_map_spans(function, total, threads=None):
    """The solver's worker pool before it used processes: ``threads`` threads of this process, each on
    one intra-op thread, taking spans in turn (for ``--before``)."""
    from probing.solver import _intra_op_threads, spans

    def single_threaded(span):
        with _intra_op_threads(1):
            return function(span)

    with _intra_op_threads(1), ThreadPoolExecutor(threads) as pool:
        return list(pool.map(single_threaded, spans(total)))


def _usage() -> tuple[float, int]:
    """CPU seconds and context switches so far of this process and its finished children."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return (
        own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime,
        own.ru_nvcsw + own.ru_nivcsw + children.ru_nvcsw + children.ru_nivcsw,
    )


def _cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def thread_sweep(args) -> dict:
    """``fit_positions`` at each of ``args.threads`` worker counts (and the former thread pool at
    ``args.before``) on the same data, ``args.repeat`` times, interleaved; medians per count."""
    import torch

    from probing import solver

    n, positions, dim = (800, 512, 256) if args.quick else (args.utterances, args.positions, args.dim)
    x, y, _ = make_data(n, positions, dim, raw_scales=False)
    train = n * 3 // 4
    x, y, mask = x[:train], y[:train], np.ones((train, positions), bool)
    solver.fit_positions(x[:, :2], y, mask[:, :2], threads=1)  # imports and first calls, untimed
    contenders = [("processes", t, chunk) for chunk in args.chunks for t in args.threads] + [("threads (before)", t, 0) for t in args.before]
    runs: dict = {contender: [] for contender in contenders}
    references: dict = {}  # per chunk setting: the first solution, which every other must equal bit for bit
    load_at_start = os.getloadavg()
    for _ in range(args.repeat):
        for form, threads, chunk in contenders:
            patch = contextlib.nullcontext() if form == "processes" else mock.patch.object(solver, "map_spans", _threaded_map_spans)
            cpu_before, switches_before = _usage()
            with patch:
                started = time.perf_counter()
                solution = solver.fit_positions(x, y, mask, threads=threads, chunk=chunk or None)
                seconds = time.perf_counter() - started
            cpu_after, switches_after = _usage()
            reference = references.setdefault(chunk, solution)
            runs[(form, threads, chunk)].append(
                {
                    "seconds": seconds,
                    "cpu_seconds": cpu_after - cpu_before,
                    "context_switches": switches_after - switches_before,
                    "max_abs_weight_difference": float(np.abs(solution.weight - reference.weight).max()),
                    "mean_iterations": float(solution.iterations.mean()),
                }
            )
    rows = []
    for (form, threads, chunk), measured in runs.items():
        median = {key: statistics.median(run[key] for run in measured) for key in measured[0]}
        workers = solver.worker_count(positions, threads) if form == "processes" else threads
        rows.append({"form": form, "threads": threads, "workers": workers, "chunk": chunk or solver.chunk_size(train, dim), "runs": measured, **median})
    for row in rows:  # against 2 processes with the same chunk (the solver's default for the former thread pool)
        two = [other["seconds"] for other in rows if other["form"] == "processes" and other["threads"] == 2 and other["chunk"] == row["chunk"]]
        row["speedup_vs_2_processes"] = two[0] / row["seconds"] if two else None
    return {
        "what": "probing.solver.fit_positions, seconds per fit (median over --repeat runs)",
        "utterances_trained": train,
        "positions": positions,
        "dim": dim,
        "cores": len(os.sched_getaffinity(0)),
        "cpu": _cpu_name(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "repeat": args.repeat,
        "load_average_at_start": load_at_start,
        "load_average_at_end": os.getloadavg(),
        "rows": rows,
    }


def print_sweep(result: dict) -> None:
    load = f"load {result['load_average_at_start'][0]:.1f} -> {result['load_average_at_end'][0]:.1f}"
    print(
        f"fit_positions: {result['positions']} positions x {result['utterances_trained']} utterances x {result['dim']} dims, "
        f"{result['cores']} cores ({result['cpu']}), median of {result['repeat']}, {load}"
    )
    print(f"{'form':<17} {'threads':>7} {'workers':>7} {'chunk':>5} {'seconds':>8} {'vs 2':>6} {'busy cores':>10} {'ctx switches':>12} {'max |dw|':>9}")
    for row in result["rows"]:
        speedup = f"{row['speedup_vs_2_processes']:.2f}x" if row["speedup_vs_2_processes"] else "-"
        print(
            f"{row['form']:<17} {row['threads']:>7} {row['workers']:>7} {row['chunk']:>5} {row['seconds']:>8.2f} {speedup:>6} "
            f"{row['cpu_seconds'] / row['seconds']:>10.2f} {row['context_switches']:>12.0f} {row['max_abs_weight_difference']:>9.1e}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--positions", type=int, default=1000)
    parser.add_argument("--utterances", type=int, default=2000)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)), help="joblib workers for the scikit-learn loop (default: the usable cores)")
    parser.add_argument("--loop-positions", type=int, help="positions the joblib loop fits, evenly spaced (default: all)")
    parser.add_argument("--published-positions", type=int, default=20, help="positions the one-core loop on raw features fits (--raw-scales)")
    parser.add_argument("--published-mdl-positions", type=int, default=5)
    parser.add_argument("--skip-mdl", action="store_true")
    parser.add_argument("--mdl-grid", action="store_true", help="also time the default guarded MDL (mixture over five C values)")
    parser.add_argument("--raw-scales", action="store_true", help="raw-scale features; adds the published one-core loop on them")
    sweep = parser.add_argument_group("thread sweep (only fit_positions; the comparisons above are skipped)")
    sweep.add_argument("--threads", type=int, nargs="+", help="worker counts to time fit_positions at, e.g. 1 2 4 8 16")
    sweep.add_argument(
        "--chunks", type=int, nargs="+", default=[0], help="positions solved together per worker: 0: the solver's cache-sized default; one sweep per value"
    )
    sweep.add_argument("--before", type=int, nargs="*", default=[], help="also time the former thread pool at these counts")
    sweep.add_argument("--quick", action="store_true", help="512 positions x 800 utterances x 256 dims instead of the sizes above")
    sweep.add_argument("--repeat", type=int, default=1, help="runs of the whole sweep, interleaved; medians are reported")
    sweep.add_argument("--out", type=Path, help="JSON file (default: $OUT/probe_threads.json when $OUT is set)")
    args = parser.parse_args()
    if args.threads:
        result = thread_sweep(args)
        print_sweep(result)
        out = args.out or (Path(os.environ["OUT"]) / "probe_threads.json" if os.environ.get("OUT") else None)
        if out:
            out.write_text(json.dumps(result, indent=2))
            print(f"wrote {out}")
        return
    from joblib import Parallel, delayed, parallel_config
    from threadpoolctl import threadpool_limits

    from probing.mdl import online_code_logistic
    from probing.metrics import position_scores
    from probing.train import fit_logistic

    raw, y, speakers = make_data(args.utterances, args.positions, args.dim, args.raw_scales)
    split = int(0.8 * args.utterances)
    train, test = slice(0, split), slice(split, None)
    mask = np.ones((split, args.positions), dtype=bool)
    loop_positions = np.linspace(0, args.positions - 1, args.loop_positions or args.positions).astype(int)
    result = {
        "positions": args.positions,
        "utterances": args.utterances,
        "dim": args.dim,
        "raw_scales": args.raw_scales,
        "jobs": args.jobs,
        "loop_positions": len(loop_positions),
        "load_average_at_start": os.getloadavg(),
    }
    scale = args.positions / len(loop_positions)

    if args.raw_scales:  # the published approach: a loop on one core over the raw features
        sample = np.linspace(0, args.positions - 1, args.published_positions).astype(int)
        with threadpool_limits(1):
            published, seconds = _timed(lambda: _sklearn_fits(raw[train][:, sample], y[train], raw[test][:, sample], y[test]))
            result["published_fit_s"] = seconds / len(sample) * args.positions
            if not args.skip_mdl:
                few = sample[np.linspace(0, len(sample) - 1, args.published_mdl_positions).astype(int)]
                _, seconds = _timed(lambda: _sklearn_mdl(raw[train][:, few], y[train], speakers[train]))
                result["published_mdl_s"] = seconds / len(few) * args.positions
        result["published_mean_f1"] = float(np.mean(published))

    fit_logistic(raw[:40, :2], y[:40], mask[:40, :2])  # imports and thread pools, untimed
    _, standardize_s = _timed(lambda: standardize_in_place(raw, train, mask))
    x = raw
    model, fit_s = _timed(lambda: fit_logistic(x[train], y[train], mask))
    ours = position_scores(y[test], (model.probabilities(x[test]) > 0.5).astype(int))["f1_macro"]
    result |= {"standardize_s": standardize_s, "ours_fit_s": fit_s, "ours_mean_f1": float(np.mean(ours))}

    with parallel_config(backend="loky", inner_max_num_threads=1), Parallel(n_jobs=args.jobs) as parallel:
        parallel(delayed(_sklearn_fits)(x[:40, :1], y[:40], x[40:60, :1], y[40:60]) for _ in range(args.jobs))  # start the workers, untimed
        chunks = _chunks(loop_positions, args.jobs)
        scores, seconds = _timed(lambda: parallel(delayed(_sklearn_fits)(x[train][:, c], y[train], x[test][:, c], y[test]) for c in chunks))
        theirs = np.concatenate(scores)
        result["loop_fit_s"] = seconds * scale
        result["loop_mean_f1"] = float(np.mean(theirs))
        result["ours_mean_f1_on_loop_positions"] = float(np.mean(ours[loop_positions]))
        result["mean_abs_f1_difference"] = float(np.mean(np.abs(theirs - ours[loop_positions])))
        result["fit_speedup_vs_loop"] = result["loop_fit_s"] / fit_s
        if args.raw_scales:
            result["fit_speedup_vs_published"] = result["published_fit_s"] / (standardize_s + fit_s)
        if not args.skip_mdl:
            code, mdl_s = _timed(lambda: online_code_logistic(x[train], y[train], mask, speakers[train], c_grid=None, c=1.0))
            result["ours_mdl_s"] = mdl_s
            bits, seconds = _timed(lambda: parallel(delayed(_sklearn_mdl)(x[train][:, c], y[train], speakers[train]) for c in chunks))
            loop_bits = np.concatenate(bits)
            result["loop_mdl_s"] = seconds * scale
            result["mdl_speedup_vs_loop"] = result["loop_mdl_s"] / mdl_s
            ours_bits = code.online_bits[loop_positions]
            result["codelength_relative_difference"] = float((ours_bits.sum() - loop_bits.sum()) / loop_bits.sum())
            result["codelength_max_relative_difference_per_position"] = float(np.max(np.abs(ours_bits - loop_bits) / loop_bits))
            if args.raw_scales:
                result["mdl_speedup_vs_published"] = result["published_mdl_s"] / (standardize_s + mdl_s)
    if args.mdl_grid and not args.skip_mdl:
        _, result["ours_mdl_grid_s"] = _timed(lambda: online_code_logistic(x[train], y[train], mask, speakers[train]))
    result["load_average_at_end"] = os.getloadavg()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
