import json

import numpy as np
import pytest

from experiments.correlate import main as correlate_main
from experiments.reports import plots as figures
from experiments.results.correlation import CorrelationError, correlate

# x = 1..4, y = 2, 4, 5, 4: Sxy = 3.5, Sxx = 5, Syy = 4.75 -> r = 3.5 / sqrt(23.75); slope 0.7, intercept 2.0;
# ranks of y 1, 2.5, 4, 2.5 -> rho = 3 / sqrt(22.5); with 2 degrees of freedom the two-sided p is 1 - |r|.
X, Y = [1, 2, 3, 4], [2, 4, 5, 4]
R = 3.5 / np.sqrt(23.75)


def test_correlation_by_hand():
    result = correlate(X, Y, bootstrap=2000, seed=0)
    assert result["n"] == 4
    assert result["pearson_r"] == pytest.approx(R)
    assert result["r2"] == pytest.approx(R**2)
    assert result["p_value"] == pytest.approx(1 - R)
    assert result["spearman_rho"] == pytest.approx(3 / np.sqrt(22.5))
    assert result["slope"] == pytest.approx(0.7) and result["intercept"] == pytest.approx(2.0)
    low, high = result["ci95_r"]
    assert -1 <= low <= R <= high <= 1


def test_bootstrap_interval_is_reproducible_and_seed_dependent():
    rng = np.random.default_rng(1)
    x = rng.normal(size=30)
    y = x + rng.normal(size=30)
    assert correlate(x, y, seed=3)["ci95_r"] == correlate(x, y, seed=3)["ci95_r"]
    assert correlate(x, y, seed=3)["ci95_r"] != correlate(x, y, seed=4)["ci95_r"]


@pytest.mark.parametrize("x, y, message", [([1, 2], [1, 2], "at least 3"), ([1, 1, 1], [1, 2, 3], "constant"), ([1, 2, 3], [1, 2], "equal length")])
def test_correlation_refuses_what_it_cannot_compute(x, y, message):
    with pytest.raises(CorrelationError, match=message):
        correlate(x, y)


def test_correlate_cli_drops_missing_rows_and_plots(tmp_path):
    table = tmp_path / "t.csv"
    rows = ["language,f1_s,gap"] + [f"l{i},{x},{y}" for i, (x, y) in enumerate(zip(X, Y))] + ["lx,80,", "ly,nan,3"]
    table.write_text("\n".join(rows) + "\n")
    out = tmp_path / "c.json"
    assert (
        correlate_main(["--table", str(table), "--x", "f1_s", "--y", "gap", "--label", "language", "--json", str(out), "--plot", str(tmp_path / "c.png")]) == 0
    )
    result = json.loads(out.read_text())
    assert result["n"] == 4 and result["dropped_rows"] == 2 and result["pearson_r"] == pytest.approx(R)
    assert (tmp_path / "c.png").stat().st_size > 1000 and (tmp_path / "c.pdf").read_bytes().startswith(b"%PDF")
    assert correlate_main(["--table", str(table), "--x", "f1", "--y", "gap", "--json", str(out)]) == 2


def _written(paths):
    assert [p.suffix for p in paths] == [".png", ".pdf"]
    assert paths[0].read_bytes().startswith(b"\x89PNG") and paths[0].stat().st_size > 2000
    assert paths[1].read_bytes().startswith(b"%PDF")
    return True


def _gap_result(seed):
    rng = np.random.default_rng(seed)
    languages = {}
    for language in ("en", "es", "it"):
        gap = float(rng.normal(0, 10))
        languages[language] = {"gap_relative": gap, "bootstrap": {"ci95": [gap - 5, gap + 5], "p_value": float(rng.uniform(0, 0.1))}}
    languages["ja"] = {"gap_relative": None, "bootstrap": {"ci95": [None, None], "p_value": None}}
    return {"languages": languages}


def test_every_figure_is_drawn_from_small_saved_results(tmp_path):
    saved = tmp_path / "saved.json"
    saved.write_text(json.dumps({"cv": _gap_result(0), "fleurs": _gap_result(1)}))
    gaps = json.loads(saved.read_text())
    f1 = np.linspace(90, 50, 120)
    assert _written(
        figures.per_position(
            f1,
            80.4,
            tmp_path / "position",
            ema=f1 - 1,
            control=np.full(120, 50.0),
            mdl_bits=np.linspace(1, 0.2, 120),
            uniform_bits=np.ones(120),
            frame_rate=50.0,
            title="whisper-base encoder.final",
        )
    )
    assert _written(figures.gap_bars(gaps, tmp_path / "gaps"))
    assert _written(figures.scatter_with_fit(X, Y, ["a", "b", "c", "d"], correlate(X, Y, bootstrap=100), "F1_S", "E", tmp_path / "scatter"))
    assert _written(figures.scatter_with_fit([70.0], [55.0], ["one"], None, "F1", "accuracy", tmp_path / "single"))
    shares = {"female": list(np.linspace(100, 0, 101)), "male": list(np.linspace(100, 10, 101))}
    assert _written(figures.error_distribution(shares, tmp_path / "distribution"))
    weights = {"seamless pre-adapter": [np.full(n, 1 / n) for n in (30, 50, 70)], "seamless post-adapter": [np.array([0.2, 0.8]), np.array([1.0])]}
    assert _written(figures.attention_profiles(weights, tmp_path / "attention"))
    assert _written(figures.confusion(["female", "male", "male", "female"], ["feminine", "masculine", "none", "masculine"], tmp_path / "confusion"))
    scores = {("encoder.layer.0", "pretrained"): 80.0, ("encoder.layer.0", "random init"): 55.0, ("encoder.final", "pretrained"): 90.0}
    assert _written(figures.site_heatmap(scores, ["encoder.layer.0", "encoder.final"], ["pretrained", "random init", "shuffled control"], tmp_path / "heatmap"))


def test_figures_cli_draws_from_probe_results(tmp_path):
    from experiments.figures import main as figures_main
    from experiments.probe import main as probe_main
    from probing.results import load_rows
    from tests.synthetic_store import write_store

    store = write_store(tmp_path / "store", speakers_per_gender=5, utterances_per_speaker=4)
    out = tmp_path / "probes.jsonl"
    common = ["--store", str(store), "--site", "encoder.layer.0", "--out", str(out), "--positions", "30"]
    assert probe_main(common + ["--mdl"]) == 0
    assert probe_main(common + ["--control", "shuffled"]) == 0
    assert probe_main(common + ["--probe", "attention", "--lr", "1e-2", "--max-epochs", "5"]) == 0
    rows = load_rows(out)
    by_kind = {(r["config"]["probe"], r["config"]["control"]): run for run, r in rows.items()}
    real, control, attention = by_kind[("positional", "none")], by_kind[("positional", "shuffled")], by_kind[("attention", "none")]
    assert figures_main(["per-position", "--probes", str(out), "--run", real, "--control", control, "--out", str(tmp_path / "pp")]) == 0
    assert figures_main(["attention", "--probes", str(out), "--run", f"synthetic={attention}", "--out", str(tmp_path / "at")]) == 0
    assert figures_main(["heatmap", "--probes", str(out), "--store", str(store), "--out", str(tmp_path / "hm")]) == 0
    for name in ("pp", "at", "hm"):
        assert _written([tmp_path / f"{name}.png", tmp_path / f"{name}.pdf"])
    assert figures_main(["per-position", "--probes", str(out), "--run", "deadbeef", "--out", str(tmp_path / "x")]) == 2
    assert figures_main(["per-position", "--probes", str(out), "--run", attention, "--out", str(tmp_path / "x")]) == 2
    assert not (tmp_path / "x.png").exists()


def test_figures_cli_unknown_run_or_language_is_one_line(tmp_path, capsys):
    from experiments.figures import main as figures_main

    probes = tmp_path / "probes.jsonl"
    probes.write_text(json.dumps({"run_id": "abc", "config": {"probe": "mean"}}) + "\n")
    assert figures_main(["per-position", "--probes", str(probes), "--run", "nope", "--out", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err.strip() == f"error: no run nope in {probes} (it holds 1 runs; the run id is each row's run_id)"
    assert figures_main(["per-position", "--probes", str(probes), "--run", "abc", "--out", str(tmp_path / "x")]) == 2
    assert "is a mean probe; the per-position figure needs a positional run" in capsys.readouterr().err
    gap = tmp_path / "gap.json"
    gap.write_text(json.dumps({"languages": {"en": {}, "es": {}}}))
    assert figures_main(["error-distribution", "--gap", str(gap), "--language", "ar", "--out", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err.strip() == f"error: {gap} has no language 'ar'; it has en, es"


def test_figures_cli_malformed_pair_is_one_error_line_and_status_2(tmp_path, capsys):
    from experiments.figures import main as figures_main

    assert figures_main(["gaps", "--gap", "cv.json", "--out", str(tmp_path / "g")]) == 2
    assert capsys.readouterr().err.strip() == "error: --gap takes LABEL=VALUE, got 'cv.json'"


def test_heatmap_cells_come_from_rows_by_condition():
    def row(store, site, control="none", probe="positional", language=None, f1_s=0.0):
        return {"config": {"store": store, "site": site, "control": control, "probe": probe, "language": language}, "f1_s": f1_s, "f1_macro": 1.0}

    rows = [
        row("pre", "b", f1_s=80.0),
        row("pre", "a", f1_s=70.0),
        row("rand", "a", f1_s=50.0),
        row("pre", "a", "shuffled", f1_s=51.0),
        row("rand", "a", "shuffled", f1_s=99.0),  # a control on the random twin: no condition of the heatmap
        row("pre", "a", language="en", f1_s=99.0),
        row("pre", "a", probe="mean", f1_s=99.0),
        row("other", "a", f1_s=99.0),
    ]
    scores, sites, conditions, key = figures.site_condition_scores(rows, "pre", "rand", "positional", None, ["a", "b", "c"])
    assert scores == {("b", "pretrained"): 80.0, ("a", "pretrained"): 70.0, ("a", "random init"): 50.0, ("a", "shuffled control"): 51.0}
    assert sites == ["a", "b"] and conditions == ["pretrained", "random init", "shuffled control"] and key == "f1_s"
    assert figures.site_condition_scores(rows, "pre", None, "mean", None, ["a"])[0] == {("a", "pretrained"): 1.0}
