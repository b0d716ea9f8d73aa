"""Benjamini-Hochberg q-values (experiments.results.multiple_testing), by hand."""

import math

import pytest

from experiments.results.multiple_testing import benjamini_hochberg, q_values_by_family


def test_q_values_by_hand_with_a_tie_and_a_missing_p():
    # m = 5 finite p-values, sorted: 0.01 (rank 1), 0.03 (2), 0.04 (3), 0.04 (4), 0.5 (5).
    # m p / rank: 0.05, 0.075, 0.0667, 0.05, 0.5; the minimum from the right: 0.05, 0.05, 0.05, 0.05, 0.5.
    p = [0.04, 0.01, None, 0.5, 0.03, 0.04, math.nan]
    assert benjamini_hochberg(p) == pytest.approx([0.05, 0.05, None, 0.5, 0.05, 0.05, None])


def test_q_values_by_hand_without_ties():
    # m = 4: 0.001 * 4 / 1 = 0.004; 0.02 * 4 / 2 = 0.04; 0.03 * 4 / 3 = 0.04; 0.8 * 4 / 4 = 0.8
    assert benjamini_hochberg([0.8, 0.001, 0.03, 0.02]) == pytest.approx([0.8, 0.004, 0.04, 0.04])
    # capped at 1: 0.9 * 2 / 1 = 1.8 -> min(1.8, 0.95 * 2 / 2 = 0.95) = 0.95; the single test keeps its p
    assert benjamini_hochberg([0.9, 0.95]) == pytest.approx([0.95, 0.95])
    assert benjamini_hochberg([0.3]) == [0.3]
    assert benjamini_hochberg([]) == [] and benjamini_hochberg([None]) == [None]


def test_q_is_at_least_p_and_monotone_in_p():
    import numpy as np

    p = list(np.random.default_rng(0).uniform(0, 1, 200) ** 3)
    q = benjamini_hochberg(p)
    assert all(b >= a for a, b in zip(p, q)) and max(q) <= 1
    ranked = sorted(zip(p, q))
    assert all(later[1] >= earlier[1] for earlier, later in zip(ranked, ranked[1:]))


def test_p_outside_zero_one_is_refused():
    with pytest.raises(ValueError, match=r"p-value 1.2 \(position 1\) is not in \[0, 1\]"):
        benjamini_hochberg([0.1, 1.2])


def test_families_are_corrected_apart():
    rows = [{"f": "a", "p_value": 0.01}, {"f": "b", "p_value": 0.01}, {"f": "a", "p_value": 0.04}, {"f": None, "p_value": 0.02}]
    q_values_by_family(rows, lambda row: row["f"])
    # family a: m = 2, 0.01 * 2 = 0.02, 0.04 * 2 / 2 = 0.04; family b: m = 1, q = p; the row without a family untouched
    assert [row.get("q_value") for row in rows] == pytest.approx([0.02, 0.01, 0.04, None])
