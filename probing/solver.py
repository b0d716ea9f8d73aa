"""L2 logistic regressions solved many at once on the CPU: a batched L-BFGS with one history and
one line search per problem, warm starts, and position chunks sized for the cache.

Why not one joint L-BFGS over every position (:class:`probing.train.LogisticSystem`, the GPU form):
on a 2-core CPU each evaluation of the joint objective streams the whole ``[N, P, D]`` array through
memory, and the joint line search moves every position by the same step. Here a chunk of positions
(a few MB, so it stays in the L2/L3 cache over the hundred-odd passes a fit takes) is solved at a
time, each position with its own curvature history and its own Armijo backtracking step, starting
from a given solution (the neighbouring position's, or the previous MDL prefix's). Worker processes,
one per core and each on one thread, take runs of positions in turn (:func:`map_spans` says why
processes and not threads).

Each problem ``b`` minimises ``(sum_i m_bi logloss(y_bi, x_bi . w_b + c_b) + ||w_b||^2 / (2C)) / n_b``,
scikit-learn's ``LogisticRegression(C)`` objective (unpenalised intercept) divided by its ``n_b``
valid examples, and stops when the largest gradient entry is at most :data:`TOL` (scikit-learn's
lbfgs uses the same test at 1e-4 on the same mean objective).
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import torch
import torch.nn.functional as F

HISTORY = 10
ARMIJO = 1e-4
MAX_BACKTRACKS = 30
TOL = 1e-4
CACHE_BYTES = 8 << 20  # per chunk of positions: within the L3 cache share of one core
SPAN = 32  # positions per run of warm starts, the unit the worker processes share out
T = TypeVar("T")


@dataclass
class Solution:
    weight: np.ndarray  # [B, D]
    bias: np.ndarray  # [B]
    iterations: np.ndarray  # [B]: L-BFGS iterations each problem took


def _evaluate(x, y, mask, inverse_count, theta, penalty):
    """Objective and gradient of every problem at ``theta [B, D + 1]`` (weights, then the bias)."""
    weight, bias = theta[:, :-1], theta[:, -1]
    # a row vector times x transposed: torch's bmm with a [D, 1] right side is ten times slower
    logits = torch.bmm(weight.unsqueeze(1), x.transpose(1, 2)).squeeze(1) + bias[:, None]
    loss = ((F.softplus(logits) - y * logits) * mask).sum(1) * inverse_count + penalty * weight.pow(2).sum(1)
    residual = (torch.sigmoid(logits) - y) * mask * inverse_count[:, None]
    gradient = torch.empty_like(theta)
    gradient[:, :-1] = torch.bmm(residual.unsqueeze(1), x).squeeze(1) + 2 * penalty[:, None] * weight
    gradient[:, -1] = residual.sum(1)
    return loss, gradient


def solve(
    x: torch.Tensor,
    y: torch.Tensor,
    mask: torch.Tensor,
    c: float | torch.Tensor = 1.0,
    start: torch.Tensor | None = None,
    max_iter: int = 1000,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``B`` independent problems: ``x [B, n, D]``, ``y [B, n]`` (0/1), ``mask [B, n]`` (1: the example
    counts), ``c`` scalar or ``[B]``, ``start [B, D + 1]`` (weights then bias; zeros when omitted).
    Returns ``(theta [B, D + 1], iterations [B])``. A problem without valid examples stays at zero."""
    batch, _, dim = x.shape
    y, mask = y.to(x.dtype), mask.to(x.dtype)
    count = mask.sum(1)
    inverse_count = torch.where(count > 0, 1.0 / count.clamp(min=1), torch.zeros_like(count))
    penalty = 0.5 / torch.as_tensor(c, dtype=x.dtype).expand(batch) * inverse_count
    theta = torch.zeros(batch, dim + 1, dtype=x.dtype) if start is None else start.to(x.dtype).clone()
    theta[count == 0] = 0.0
    loss, gradient = _evaluate(x, y, mask, inverse_count, theta, penalty)
    steps, changes, rhos = [], [], []
    iterations = torch.zeros(batch, dtype=torch.long)
    stalled = torch.zeros(batch, dtype=torch.bool)
    for _ in range(max_iter):
        active = (gradient.abs().amax(1) > TOL) & ~stalled
        if not bool(active.any()):
            break
        iterations += active
        direction = _two_loop(gradient, steps, changes, rhos)
        direction[~active] = 0.0
        slope = (gradient * direction).sum(1)
        uphill = slope >= 0  # a stale curvature pair can point uphill: restart that problem along -gradient
        if bool(uphill.any()):
            direction[uphill] = -gradient[uphill] * active[uphill, None]
            slope = (gradient * direction).sum(1)
        step = torch.ones(batch, dtype=x.dtype) if steps else torch.clamp(1.0 / gradient.abs().sum(1).clamp(min=1e-12), max=1.0)
        for _ in range(MAX_BACKTRACKS):
            candidate = theta + step[:, None] * direction
            new_loss, new_gradient = _evaluate(x, y, mask, inverse_count, candidate, penalty)
            accepted = (new_loss <= loss + ARMIJO * step * slope) | ~active
            if bool(accepted.all()):
                break
            step = torch.where(accepted, step, 0.5 * step)
        else:  # no decrease the float32 loss can resolve (strongly regularised problems near their optimum): as converged as they can be
            keep = ~accepted
            candidate[keep], new_loss[keep], new_gradient[keep] = theta[keep], loss[keep], gradient[keep]
            stalled |= keep
        stalled |= active & (new_loss >= loss)  # an accepted step the float32 loss cannot tell apart: the same limit
        change, difference = candidate - theta, new_gradient - gradient
        curvature = (change * difference).sum(1)
        steps.append(change)
        changes.append(difference)
        rhos.append(torch.where(curvature > 1e-10, 1.0 / curvature.clamp(min=1e-10), torch.zeros_like(curvature)))
        if len(steps) > HISTORY:
            steps.pop(0), changes.pop(0), rhos.pop(0)
        theta, loss, gradient = candidate, new_loss, new_gradient
    return theta, iterations


def _two_loop(gradient, steps, changes, rhos):
    """The L-BFGS direction ``-H gradient`` for every problem, from its own curvature pairs (a pair
    with ``rho = 0``, i.e. no positive curvature, drops out). Few, fused kernels: at these sizes the
    cost of a call, not the arithmetic, is what adds up."""
    q = gradient.clone()
    alphas = []
    for s, d, rho in zip(reversed(steps), reversed(changes), reversed(rhos)):
        alpha = (rho * torch.linalg.vecdot(s, q)).unsqueeze(1)
        q.addcmul_(alpha, d, value=-1.0)
        alphas.append(alpha)
    if steps:
        s, d, rho = steps[-1], changes[-1], rhos[-1]
        scale = torch.where(rho > 0, torch.linalg.vecdot(s, d) / torch.linalg.vecdot(d, d).clamp(min=1e-20), torch.ones_like(rho))
        q *= scale.unsqueeze(1)
    for s, d, rho, alpha in zip(steps, changes, rhos, reversed(alphas)):
        beta = (rho * torch.linalg.vecdot(d, q)).unsqueeze(1)
        q.addcmul_(alpha - beta, s)
    return q.neg_()


def chunk_size(n: int, dim: int) -> int:
    """Positions per chunk so that one chunk's float32 features, ``chunk x n x D``, fit :data:`CACHE_BYTES`."""
    return max(1, int(CACHE_BYTES // max(1, n * dim * 4)))


def fit_positions(
    x: np.ndarray,
    y: np.ndarray,
    mask: np.ndarray,
    c: float = 1.0,
    max_iter: int = 1000,
    chunk: int | None = None,
    threads: int | None = None,
) -> Solution:
    """One L2 logistic regression per position of ``x [N, P, D]`` (labels ``y [N]``, ``mask [N, P]``).

    Positions are solved in chunks; each chunk starts from the solution of the position before it
    (neighbouring frames carry similar information) within runs of :data:`SPAN` positions, which
    worker processes (:func:`map_spans`, at most ``threads``) take in turn: results do not depend on
    their number."""
    n, positions, dim = x.shape
    chunk = chunk or chunk_size(n, dim)
    labels = torch.as_tensor(np.asarray(y), dtype=torch.float32)

    def run(span: range) -> Solution:
        part, previous = _zeros(len(span), dim), None
        for begin in range(span.start, span.stop, chunk):
            end = min(begin + chunk, span.stop)
            start = None if previous is None else previous[-1:].expand(end - begin, -1)
            x_chunk, mask_chunk = position_major(x, begin, end), position_major(mask, begin, end)
            previous = _solve_into(part, range(begin - span.start, end - span.start), x_chunk, labels, mask_chunk, c, start, max_iter)
        return part

    return _joined(map_spans(run, positions, threads), dim)


def fit_prefixes(
    x: np.ndarray,
    y: np.ndarray,
    mask: np.ndarray,
    prefixes: list[np.ndarray],
    c: float = 1.0,
    max_iter: int = 1000,
    threads: int | None = None,
) -> list[Solution]:
    """Per-position probes trained on each of the nested ``prefixes`` (index arrays into ``x [N, P, D]``,
    each the start of the next: the training sets of an online code), one :class:`Solution` each.

    Each prefix is fitted on its own rows only, starting from the solution of the prefix before it
    (it holds the same examples and half as many), in position chunks sized for that prefix: many
    positions at once for the small early prefixes, a few for the large ones."""
    prefixes = [np.asarray(p) for p in prefixes]
    for shorter, longer in zip(prefixes, prefixes[1:]):
        if len(longer) < len(shorter) or not np.array_equal(longer[: len(shorter)], shorter):
            raise ValueError("fit_prefixes needs nested prefixes, each the start of the next")
    _, positions, dim = x.shape
    labels = np.asarray(y)

    def run(span: range) -> list[Solution]:
        parts = [_zeros(len(span), dim) for _ in prefixes]
        for number, rows in enumerate(prefixes):
            chunk = chunk_size(len(rows), dim)
            y_rows = torch.as_tensor(labels[rows], dtype=torch.float32)
            for begin in range(span.start, span.stop, chunk):
                end = min(begin + chunk, span.stop)
                local = slice(begin - span.start, end - span.start)
                start = None
                if number:
                    before = parts[number - 1]
                    start = torch.from_numpy(np.concatenate([before.weight[local], before.bias[local, None]], axis=1))
                x_rows, mask_rows = position_major(x, begin, end, rows), position_major(mask, begin, end, rows)
                _solve_into(parts[number], range(local.start, local.stop), x_rows, y_rows, mask_rows, c, start, max_iter)
        return parts

    per_span = map_spans(run, positions, threads)
    return [_joined([parts[number] for parts in per_span], dim) for number in range(len(prefixes))]


def _zeros(positions: int, dim: int) -> Solution:
    return Solution(np.zeros((positions, dim), np.float32), np.zeros(positions, np.float32), np.zeros(positions, np.int64))


def _joined(parts: list[Solution], dim: int) -> Solution:
    """The spans' solutions, in order, as one."""
    parts = [_zeros(0, dim), *parts]
    return Solution(*(np.concatenate([getattr(part, field) for part in parts]) for field in ("weight", "bias", "iterations")))


def position_major(x: np.ndarray, begin: int, end: int, rows: np.ndarray | None = None) -> torch.Tensor:
    """Positions ``begin:end`` of ``x [N, P, D]`` (or of a mask ``[N, P]``; the given rows only) as a contiguous float32 ``[B, n, D]``."""
    part = x[:, begin:end] if rows is None else x[rows, begin:end]
    return torch.from_numpy(np.ascontiguousarray(np.swapaxes(part, 0, 1), dtype=np.float32))


def _solve_into(solution: Solution, span: range, x, y, mask, c, start, max_iter) -> torch.Tensor:
    theta, used = solve(x, y.expand(len(span), -1), mask, c, start, max_iter)
    solution.weight[span.start : span.stop] = theta[:, :-1].numpy()
    solution.bias[span.start : span.stop] = theta[:, -1].numpy()
    solution.iterations[span.start : span.stop] = used.numpy()
    return theta


def spans(total: int) -> list[range]:
    """``range(total)`` in runs of :data:`SPAN`: fixed whatever the number of threads, so that warm starts
    (which restart at each run) and hence results do not depend on it."""
    return [range(begin, min(begin + SPAN, total)) for begin in range(0, total, SPAN)]


@contextmanager
def _intra_op_threads(count: int) -> Iterator[None]:
    """Sets torch's intra-op threads for a block: one while this process solves spans alone, since
    OpenMP threads spinning at barriers on a busy 2-core machine make small kernels ten times slower."""
    saved = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


def worker_count(total: int, threads: int | None = None) -> int:
    """Processes :func:`map_spans` runs for ``range(total)``: ``threads`` (default torch's thread count, so
    ``torch.set_num_threads`` or ``OMP_NUM_THREADS`` limits them too), never more than the cores this process
    may use (more would take turns on them, each evicting the others' chunks from the cache) nor than the spans."""
    return max(1, min(threads or torch.get_num_threads(), len(os.sched_getaffinity(0)), len(spans(total))))


def map_spans(function: Callable[[range], T], total: int, threads: int | None = None) -> list[T]:
    """``function`` over the :func:`spans` of ``range(total)``, its results in their order, in
    :func:`worker_count` processes forked from this one, each on one thread, taking spans in turn.

    Processes, not threads: a fit is thousands of small torch calls per span, each of which releases
    and takes back the GIL, so threads of one process hand the GIL to each other at every call (a
    context switch each time) and get slower the more there are: on an idle 2-core machine 2 threads
    took 1.3 times as long as one and 16 threads 2.8 times, with 100 times the context switches.
    Forked processes share the features ``x`` with this one without a copy (copy-on-write pages they
    only read) and send back only their spans' solutions. Forked, not started by a fork server, even
    from a parent whose torch threads have run: a worker runs torch on one thread, so it never enters
    the OpenMP pool that a fork leaves behind. One worker runs here, on one intra-op thread."""
    runs = spans(total)
    count = worker_count(total, threads)
    if count == 1:
        with _intra_op_threads(1):
            return [function(span) for span in runs]
    pool = ProcessPoolExecutor(count, mp_context=multiprocessing.get_context("fork"), initializer=_install, initargs=(function, os.getpid()))
    try:
        return list(pool.map(_run_installed, runs))
    finally:
        pool.shutdown(cancel_futures=True)  # after an error or an interrupt: the spans not started yet are dropped


_installed: Callable[[range], object] | None = None
PR_SET_PDEATHSIG = 1


def _install(function: Callable[[range], object], parent: int) -> None:
    """In a forked worker: the function to run (inherited with the fork, never pickled), one intra-op
    thread, ignoring Ctrl-C (the parent handles it and drops the spans not started), and ending when
    the parent ends however it ends (a killed parent would otherwise leave the workers waiting)."""
    global _installed
    _installed = function
    torch.set_num_threads(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent ended before the line above took effect
        os._exit(1)


def _run_installed(span: range):
    return _installed(span)
