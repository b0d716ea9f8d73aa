"""The study report's statistics: q-values across its F1_S-E correlations, intervals it cannot
give, and the controls beside each probe (experiments.study.report), on a hand-made f1_vs_gap.csv."""

import json
from types import SimpleNamespace

import pytest

from experiments.results.collect import F1_VS_GAP, write_csv
from experiments.study.report import _gap_section, write_correlations

# site s0: F1_S 60, 70, 80, 90 against E 1, 2.8, 3, 5 (r 0.963; with 2 degrees of freedom p = 1 - r = 0.037);
# site s1: the same F1_S against E 4, 1, 3, 2 (r -0.4, p 0.6)
F1 = (60.0, 70.0, 80.0, 90.0)
GAPS = {"s0": (1.0, 2.8, 3.0, 5.0), "s1": (4.0, 1.0, 3.0, 2.0)}


def _row(site, index, language, f1, gap, **controls):
    empty = dict.fromkeys(F1_VS_GAP)
    return (
        empty
        | {
            "model": "m",
            "dataset": "d",
            "language": language,
            "site": site,
            "site_index": index,
            "site_role": "layer",
            "task": "female-male",
            "split": "fixed",
            "f1_s": f1,
            "seeds": "0",
            "gap_relative": gap,
            "gap_estimate": "resampled",
            "probe_runs": "r",
            "gap_source": "gone.json",
        }
        | controls
    )


def test_q_values_across_sites_and_what_an_interval_of_four_languages_cannot_say(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    rows = [_row(site, index, f"l{k}", F1[k], GAPS[site][k]) for index, site in enumerate(GAPS) for k in range(4)]
    rows[0] |= {"f1_control_shuffled": 50.0, "selectivity_shuffled": 10.0}
    files = {"f1_vs_gap": write_csv(rows, F1_VS_GAP, results / "f1_vs_gap.csv"), "f1_vs_mustshe": results / "f1_vs_mustshe.csv"}
    layout = SimpleNamespace(results=results, figures=tmp_path / "figures")
    correlations = json.loads(write_correlations(layout, SimpleNamespace(report={"site": "s0"})).read_text())
    s0, s1 = correlations["f1_vs_gap"]
    assert (s0["site"], s1["site"]) == ("s0", "s1")
    # two tests: the smaller p gets min(2 p, the larger p), the larger keeps its p
    assert s0["q_value"] == pytest.approx(min(2 * s0["p_value"], s1["p_value"])) and s1["q_value"] == pytest.approx(s1["p_value"])
    assert s0["p_value"] == pytest.approx(1 - s0["pearson_r"]) and s0["p_value"] < 0.05 < s0["q_value"]  # significant by p, not by q
    assert s0["permutation"] == {"method": "exact", "arrangements": 24, "units": "rows", "seed": 0}
    lines = _gap_section(files, correlations, SimpleNamespace(report={"site": "s0"}))
    text = "\n".join(lines)
    row = f"| m | d | s0 | fixed | 4 | {s0['pearson_r']:+.3f} | not meaningful: 4 rows < 10 | {s0['p_value']:.3g} | {s0['q_value']:.3g} |"
    assert row + f" {s0['p_permutation']:.3g} |" in text
    # of the 24 orders of E, Sxy = sum of (F1_S - 75) x E is largest in size for the sorted order (61) and the reversed
    # one (-61); the next, 1, 3, 2.8, 5, gives 59 (|r| 0.931 < 0.963): 2 of 24 reach |r|, p = 1/12
    assert s0["p_permutation"] == pytest.approx(1 / 12)
    assert "q: Benjamini-Hochberg across the 2 correlations of this table" in text and "read significance from q, not p" in text
    assert "shuffled control: F1_S (selectivity)" in text and "speaker control: F1_S (selectivity)" in text
    assert "| 50.00 (+10.00) | none run |" in text  # l0's controls at the headline site
    assert "| none run | none run |" in text


def test_significance_is_marked_by_q():
    from experiments.study.report import _q

    assert _q(0.01) == "0.01 *" and _q(0.05) == "0.05" and _q(None) == "n/a"
