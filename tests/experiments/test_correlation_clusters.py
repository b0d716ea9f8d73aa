"""Permutation p and the cluster-aware correlation (experiments.results.correlation), by hand."""

import json

import numpy as np
import pytest
from scipy import stats

from experiments.correlate import main as correlate_main
from experiments.results.correlation import MIN_INTERVAL_UNITS, CorrelationError, _pearson_rows, correlate

# Fucci et al. 2025: Table 1 test-speaker "All" F1 at each model's final site, Table 2 "All Acc.", en->es, fr, it
FUCCI_F1 = {"seamless": [51.72, 54.51, 55.63], "zeroswot": [61.80, 61.62, 60.65], "s2t": [93.14, 94.59, 96.19]}
FUCCI_ACC = {"seamless": [53.62, 53.29, 53.15], "zeroswot": [64.46, 62.20, 61.75], "s2t": [86.45, 84.62, 85.65]}


def _fucci():
    x = [value for model in FUCCI_F1 for value in FUCCI_F1[model]]
    y = [value for model in FUCCI_ACC for value in FUCCI_ACC[model]]
    return x, y, [model for model in FUCCI_F1 for _ in range(3)]


def test_row_permutation_is_exact_for_three_rows():
    # x = y = 1, 2, 3: of the 3! = 6 orders of y, the identity gives r = 1 and the reversal r = -1; the other four
    # (1 3 2, 2 1 3, 2 3 1, 3 1 2) give |r| = 0.5. Two of six reach |r| = 1: p = 1/3.
    result = correlate([1, 2, 3], [1, 2, 3], bootstrap=50)
    assert result["p_permutation"] == pytest.approx(1 / 3)
    assert result["p_permutation_floor"] == pytest.approx(1 / 6)
    assert result["permutation"] == {"method": "exact", "arrangements": 6, "units": "rows", "seed": 0}
    assert "n_clusters" not in result and "r_between" not in result


def test_row_permutation_is_monte_carlo_beyond_the_budget_and_never_zero():
    # 4 rows have 24 orders; a budget of 5 draws 5 random ones: p = (1 + hits) / 6, so at least 1/6
    result = correlate([1, 2, 3, 4], [2, 4, 5, 4], bootstrap=50, permutations=5)
    assert result["permutation"]["method"] == "monte-carlo" and result["permutation"]["arrangements"] == 5
    assert result["p_permutation_floor"] == pytest.approx(1 / 6)
    assert round(result["p_permutation"] * 6, 9) in {1, 2, 3, 4, 5, 6}
    assert correlate([1, 2, 3, 4], [2, 4, 5, 4], bootstrap=50, permutations=24)["permutation"]["method"] == "exact"


def test_cluster_statistics_by_hand():
    # clusters a, b, c of two rows each; x = 0 1 | 10 11 | 20 21, y = 0 1 | 11 10 | 20 21.
    # cluster means: x and y both 0.5, 10.5, 20.5 -> r_between = 1.
    # within: x - mean = -.5 .5 | -.5 .5 | -.5 .5, y - mean = -.5 .5 | .5 -.5 | -.5 .5:
    #   sum of products .25 + .25 - .25 - .25 + .25 + .25 = .5, sums of squares 1.5 and 1.5 -> r_within = 1/3.
    # permutation over clusters (3! = 6 block orders): about the grand mean 10.5, Sxx = Syy = 401.5; the identity's
    # Sxy = 400.5, the reversal's (c b a) -399.5, the four others smaller in size: only the identity reaches |r| -> p = 1/6.
    x = [0, 1, 10, 11, 20, 21]
    y = [0, 1, 11, 10, 20, 21]
    result = correlate(x, y, bootstrap=200, clusters=["a", "a", "b", "b", "c", "c"])
    assert result["pearson_r"] == pytest.approx(400.5 / 401.5)
    assert result["n_clusters"] == 3 and result["clusters"] == ["a", "b", "c"]
    assert result["r_between"] == pytest.approx(1.0)
    assert result["r_within"] == pytest.approx(1 / 3)
    assert result["p_permutation"] == pytest.approx(1 / 6) and result["p_permutation_floor"] == pytest.approx(1 / 6)
    assert result["permutation"] == {"method": "exact", "arrangements": 6, "units": "clusters", "seed": 0}
    assert "3 clusters < 10" in result["ci95_cluster_note"] and "6 rows < 10" in result["ci95_note"]


def test_rows_of_a_cluster_are_a_block_whatever_their_place_in_the_input():
    x, y, clusters = [0, 10, 20, 1, 11, 21], [0, 11, 20, 1, 10, 21], ["a", "b", "c", "a", "b", "c"]
    result = correlate(x, y, bootstrap=200, clusters=clusters)
    assert result["r_within"] == pytest.approx(1 / 3) and result["p_permutation"] == pytest.approx(1 / 6)


def test_fucci_nine_points_are_three_models():
    """The audit's S1: 9 rows, 3 models. Model means r 0.993 (scipy p 0.075), centred within model r -0.089,
    permuting model labels cannot go below 1/6, and a model-cluster bootstrap spans -1.00 .. 0.995."""
    x, y, models = _fucci()
    result = correlate(x, y, clusters=models)
    means = stats.pearsonr([np.mean(v) for v in FUCCI_F1.values()], [np.mean(v) for v in FUCCI_ACC.values()])
    assert result["r_between"] == pytest.approx(means.statistic) and round(result["r_between"], 3) == 0.993
    assert round(result["r_within"], 3) == -0.089
    assert result["p_permutation"] == pytest.approx(1 / 6)  # the identity only: the 5 other model orders give r 0.889 at most
    assert result["p_permutation"] >= 1 / 6 > 0.01
    low, high = result["ci95_r_cluster"]
    assert low == pytest.approx(-1.0, abs=1e-3) and round(high, 3) == 0.995
    assert round(result["pearson_r"], 3) == 0.989 and result["p_value"] == pytest.approx(5.25e-7, rel=0.01)  # the paper's r, kept
    rows = correlate(x, y, bootstrap=10, permutations=362_880)  # 9! = 362,880: every order of the rows, as the audit's 3.6e-4
    assert rows["permutation"]["method"] == "exact" and round(rows["p_permutation"], 5) == 0.00036


def test_cluster_bootstrap_weights_count_a_cluster_drawn_twice_twice():
    # a resample drawing cluster a twice and c once is r over rows a, a, c: weights 2, 2, 0, 0, 1, 1
    x, y = np.array([0.0, 1, 10, 11, 20, 21]), np.array([0.0, 1, 11, 10, 20, 22])
    weights = np.array([[2.0, 2, 0, 0, 1, 1]])
    rows = [0, 1, 0, 1, 4, 5]
    assert _pearson_rows(x[None, :], y[None, :], weights)[0] == pytest.approx(np.corrcoef(x[rows], y[rows])[0, 1])
    assert np.isnan(_pearson_rows(np.array([[3.0, 3.0, 3.0]]), np.array([[1.0, 2.0, 3.0]]))[0])


def test_enough_units_have_no_note():
    rng = np.random.default_rng(0)
    x = rng.normal(size=2 * MIN_INTERVAL_UNITS)
    result = correlate(x, x + rng.normal(size=len(x)), bootstrap=200, clusters=[k // 2 for k in range(len(x))])
    assert "ci95_note" not in result and "ci95_cluster_note" not in result
    assert result["n_clusters"] == MIN_INTERVAL_UNITS and result["permutation"]["method"] == "monte-carlo"
    for key in ("ci95_r_cluster", "ci95_r_between", "ci95_r_within"):
        low, high = result[key]
        assert -1 <= low < high <= 1


@pytest.mark.parametrize(
    "clusters, message",
    [
        (["a", "a", "b", "b", "b", "c"], "every cluster needs as many rows; rows per cluster: a 2, b 3, c 1"),
        (["a"] * 6, "at least 2 clusters"),
        (["a", "b"], "name each of the 6 rows"),
    ],
)
def test_clusters_it_cannot_permute_are_refused(clusters, message):
    with pytest.raises(CorrelationError, match=message):
        correlate([0, 1, 10, 11, 20, 21], [0, 1, 11, 10, 20, 21], bootstrap=10, clusters=clusters)


def test_correlate_cli_cluster_by_writes_and_says_what_an_interval_cannot(tmp_path, capsys):
    x, y, models = _fucci()
    table = tmp_path / "t.csv"
    table.write_text("model,f1,acc\n" + "".join(f"{m},{a},{b}\n" for m, a, b in zip(models, x, y)))
    out = tmp_path / "c.json"
    assert correlate_main(["--table", str(table), "--x", "f1", "--y", "acc", "--cluster-by", "model", "--permutations", "100", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["cluster_by"] == "model" and result["n_clusters"] == 3 and result["p_permutation"] == pytest.approx(1 / 6)
    printed = capsys.readouterr().out
    assert "95% CI not meaningful: 9 rows < 10" in printed and "cluster-bootstrap intervals not meaningful: 3 clusters < 10" in printed
    assert "permutation p 0.167 (exact, 6 orders of the clusters" in printed and "+0.96" not in printed
    assert correlate_main(["--table", str(table), "--x", "f1", "--y", "acc", "--permutations", "100", "--out", str(out)]) == 0
    plain = json.loads(out.read_text())
    assert plain["permutation"]["units"] == "rows" and "n_clusters" not in plain and plain["ci95_r"][0] > 0.9
    assert correlate_main(["--table", str(table), "--x", "f1", "--y", "acc", "--cluster-by", "nope", "--out", str(out)]) == 2


def test_the_scatter_of_a_clustered_fit_names_its_clusters(tmp_path):
    from experiments.reports.plots import _cluster_statistics, scatter_with_fit

    x, y, models = _fucci()
    fit = correlate(x, y, bootstrap=100, clusters=models) | {"cluster_by": "model"}
    assert _cluster_statistics(fit) == "\n3 clusters (model): perm. p = 0.17 (min 0.17), r between = +0.99, within = -0.09"
    assert _cluster_statistics(correlate(x, y, bootstrap=100)) == ""
    paths = scatter_with_fit(x, y, models, fit, "F1", "accuracy", tmp_path / "fucci")
    assert paths[0].read_bytes().startswith(b"\x89PNG")
