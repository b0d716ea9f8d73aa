"""Benjamini-Hochberg q-values: the false discovery rate across the many tests of one study.

A study correlates F1_S with the gap once per model, dataset, site, task and split (Attanasio et
al.'s 34 Whisper layers x 2 datasets x 2 splits alone are 136 tests) and tests every gap per
language; at p < 0.05, 5 % of the true nulls among them read as findings. The q-value of a test is
the smallest false discovery rate at which Benjamini & Hochberg's step-up procedure (1995) rejects
it: with the m finite p-values sorted, p_(1) <= ... <= p_(m), q_(i) = min over j >= i of
m p_(j) / j, capped at 1. So q >= p, q grows with p, equal p-values get one q, and "q < 0.05"
keeps the expected share of false findings among those marked under 5 % (for independent or
positively dependent tests). A missing or non-finite p (a test that could not be run) is no test:
its q is None and it does not count in m.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def benjamini_hochberg(p_values: Sequence[float | None]) -> list[float | None]:
    """The q-value of each p-value, in the input's order (None where p is None or not finite)."""
    tested = [i for i, p in enumerate(p_values) if p is not None and math.isfinite(p)]
    for i in tested:
        if not 0 <= p_values[i] <= 1:
            raise ValueError(f"p-value {p_values[i]!r} (position {i}) is not in [0, 1]")
    q: list[float | None] = [None] * len(p_values)
    if not tested:
        return q
    p = np.array([p_values[i] for i in tested], dtype=float)
    order = np.argsort(p, kind="stable")
    m = len(p)
    stepped = p[order] * m / np.arange(1, m + 1)
    adjusted = np.minimum(np.minimum.accumulate(stepped[::-1])[::-1], 1.0)
    for rank, index in enumerate(order):
        q[tested[index]] = float(adjusted[rank])
    return q


def q_values_by_family(rows: Sequence[dict], family, p_key: str = "p_value", q_key: str = "q_value") -> None:
    """Set ``row[q_key]`` on each row that ``family(row)`` puts in a family (not None): the q-values of
    the rows' ``p_key`` within each family; the rows outside every family are left alone."""
    families: dict[object, list[dict]] = {}
    for row in rows:
        key = family(row)
        if key is not None:
            families.setdefault(key, []).append(row)
    for members in families.values():
        for row, q in zip(members, benjamini_hochberg([row.get(p_key) for row in members])):
            row[q_key] = q
