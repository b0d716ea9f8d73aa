"""The CPU solver behind per-position probes and MDL (probing.solver): scikit-learn's objective,
warm starts, prefixes, results that do not depend on the number of threads, and worker processes
that never outnumber the cores."""

import os

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression

from probing.mdl import block_ends, online_code, online_code_logistic, speaker_order
from probing.solver import SPAN, fit_positions, fit_prefixes, map_spans, solve, spans, worker_count
from tests.paths import CHECKOUT


def _problem(n=300, dim=12, seed=0, strength=0.8):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    x = rng.standard_normal((n, dim)).astype(np.float32)
    x[:, 0] += strength * (2 * y - 1)
    return x, y


@pytest.mark.parametrize("c", [1e-4, 1e-2, 1.0])
def test_solve_finds_scikit_learns_solution(c):
    x, y = _problem()
    theta, iterations = solve(torch.from_numpy(x)[None], torch.as_tensor(y)[None], torch.ones(1, len(y)), c=c)
    reference = LogisticRegression(C=c, tol=1e-8, max_iter=10_000).fit(x.astype(np.float64), y)
    np.testing.assert_allclose(theta[0, :-1].numpy(), reference.coef_[0], atol=2e-3 * max(1.0, np.abs(reference.coef_).max()))
    assert theta[0, -1].item() == pytest.approx(reference.intercept_[0], abs=2e-3)
    assert 0 < iterations.item() < 200


def test_masked_rows_are_left_out_and_an_empty_problem_stays_at_zero():
    x, y = _problem()
    keep = np.arange(len(y)) < 150
    both = torch.from_numpy(np.stack([x, x]))
    mask = torch.from_numpy(np.stack([keep, np.zeros_like(keep)])).float()
    theta, _ = solve(both, torch.as_tensor(np.stack([y, y])), mask)
    alone, _ = solve(torch.from_numpy(x[keep])[None], torch.as_tensor(y[keep])[None], torch.ones(1, int(keep.sum())))
    np.testing.assert_allclose(theta[0].numpy(), alone[0].numpy(), atol=1e-4)
    assert not theta[1].any()


def test_a_warm_start_at_the_solution_stops_at_once():
    x, y = _problem()
    args = (torch.from_numpy(x)[None], torch.as_tensor(y)[None], torch.ones(1, len(y)))
    theta, cold = solve(*args)
    again, warm = solve(*args, start=theta)
    assert warm.item() <= 1 < cold.item() and torch.allclose(again, theta, atol=1e-4)


def test_per_position_fits_do_not_depend_on_threads_and_match_single_fits():
    rng = np.random.default_rng(1)
    n, positions, dim = 120, SPAN + 7, 6
    y = rng.integers(0, 2, n)
    x = rng.standard_normal((n, positions, dim)).astype(np.float32)
    x[:, :, 0] += (2 * y - 1)[:, None]
    mask = np.arange(positions)[None, :] < rng.integers(positions // 2, positions + 1, n)[:, None]
    one, two = fit_positions(x, y, mask, threads=1), fit_positions(x, y, mask, threads=2, chunk=3)
    for threads in (2, 16):  # worker processes against this process alone: the same numbers, bit for bit
        many = fit_positions(x, y, mask, threads=threads)
        for field in ("weight", "bias", "iterations"):
            np.testing.assert_array_equal(getattr(many, field), getattr(one, field))
    for p in (0, SPAN - 1, SPAN, positions - 1):
        rows = mask[:, p]
        reference = LogisticRegression(tol=1e-8, max_iter=10_000).fit(x[rows, p], y[rows])
        np.testing.assert_allclose(one.weight[p], reference.coef_[0], atol=5e-3)
        np.testing.assert_allclose(two.weight[p], reference.coef_[0], atol=5e-3)
    assert [len(r) for r in spans(positions)] == [SPAN, 7]


def test_prefix_fits_equal_cold_fits_on_each_prefix_and_need_nested_prefixes():
    rng = np.random.default_rng(2)
    n, positions, dim = 200, 3, 5
    y = rng.integers(0, 2, n)
    x = rng.standard_normal((n, positions, dim)).astype(np.float32)
    x[:, :, 0] += (2 * y - 1)[:, None]
    mask = np.ones((n, positions), bool)
    order = rng.permutation(n)
    prefixes = [order[:20], order[:60], order[:150]]
    solutions = fit_prefixes(x, y, mask, prefixes, c=0.1)
    for rows, solution in zip(prefixes, solutions):
        cold = fit_positions(x[rows], y[rows], mask[rows], c=0.1)
        np.testing.assert_allclose(solution.weight, cold.weight, atol=2e-3)
    with pytest.raises(ValueError, match="nested"):
        fit_prefixes(x, y, mask, [order[:20], order[5:60]])


def test_the_prefix_code_matches_a_scikit_learn_code_within_a_percent():
    rng = np.random.default_rng(3)
    n, positions, dim = 400, 4, 16
    y = rng.integers(0, 2, n)
    speakers = np.array([f"s{i % 40}" for i in range(n)])
    x = rng.standard_normal((n, positions, dim)).astype(np.float32)
    x[:, :, 0] += 0.6 * (2 * y - 1)[:, None]
    mask = np.ones((n, positions), bool)
    ours = online_code_logistic(x, y, mask, speakers, c_grid=None, c=1.0)
    for p in range(positions):
        xp = x[:, p].astype(np.float64)
        theirs = online_code(
            y,
            np.ones((n, 1), bool),
            speakers,
            lambda idx, xp=xp: LogisticRegression(max_iter=1000).fit(xp[idx], y[idx]),
            lambda model, idx, xp=xp: model.predict_proba(xp[idx])[:, 1],
        )
        assert ours.online_bits[p] == pytest.approx(theirs.online_bits[0], rel=0.01)
    order = speaker_order(speakers, 0)
    assert ours.block_ends == block_ends(speakers[order])


def test_prefix_fits_do_not_depend_on_threads():
    rng = np.random.default_rng(4)
    n, positions, dim = 150, 2 * SPAN + 3, 5
    y = rng.integers(0, 2, n)
    x = rng.standard_normal((n, positions, dim)).astype(np.float32)
    x[:, :, 0] += (2 * y - 1)[:, None]
    prefixes = [np.arange(40), np.arange(90), np.arange(n)]
    one = fit_prefixes(x, y, np.ones((n, positions), bool), prefixes, threads=1)
    three = fit_prefixes(x, y, np.ones((n, positions), bool), prefixes, threads=3)
    for alone, shared in zip(one, three):
        np.testing.assert_array_equal(shared.weight, alone.weight)
        np.testing.assert_array_equal(shared.bias, alone.bias)


def _where(span):
    import torch

    return os.getpid(), torch.get_num_threads()


def test_workers_never_outnumber_the_cores_and_run_one_thread_each():
    """The cause of the slowdown with many threads (threads of one process handing the GIL to each
    other at every small torch call, more threads than cores taking turns) cannot come back: each
    worker is a process on one intra-op thread, and asking for 16 on a 2-core machine gets 2."""
    cores = len(os.sched_getaffinity(0))
    assert worker_count(64 * SPAN, threads=16) == min(16, cores)
    assert worker_count(64 * SPAN) <= cores
    assert worker_count(3 * SPAN, threads=16) == min(3, cores)  # never more than the spans
    places = map_spans(_where, 8 * SPAN, threads=16)
    assert len(places) == 8 and {threads for _, threads in places} == {1}
    pids = {pid for pid, _ in places}
    assert len(pids) <= cores
    if cores > 1:
        assert os.getpid() not in pids


def _fail_on_the_second_span(span):
    if span.start == SPAN:
        raise ValueError(f"span {span.start}:{span.stop} failed")
    return span.start


def test_an_error_in_a_worker_reaches_the_caller():
    with pytest.raises(ValueError, match=f"span {SPAN}:{2 * SPAN} failed"):
        map_spans(_fail_on_the_second_span, 4 * SPAN, threads=2)


def test_the_thread_sweep_of_the_benchmark_finds_the_same_solutions_in_every_form():
    import argparse
    import importlib.util

    spec = importlib.util.spec_from_file_location("probes_benchmark", CHECKOUT / "benchmarks" / "probes.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    args = argparse.Namespace(quick=False, utterances=80, positions=2 * SPAN + 5, dim=6, threads=[1, 2, 16], chunks=[0, 1], before=[2], repeat=1)
    result = bench.thread_sweep(args)
    forms = [(row["form"], row["threads"], row["workers"]) for row in result["rows"]]
    cores = len(os.sched_getaffinity(0))
    assert forms[:3] == [("processes", 1, 1), ("processes", 2, min(2, cores)), ("processes", 16, min(3, cores))]
    assert forms[-1] == ("threads (before)", 2, 2) and len(forms) == 7
    assert all(row["max_abs_weight_difference"] == 0.0 for row in result["rows"])
    assert result["utterances_trained"] == 60
