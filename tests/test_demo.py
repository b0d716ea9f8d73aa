"""The whole demo on a trimmed corpus (3 sentences per language, 8 voices): every stage runs, the
report and every figure are written from saved results, and a rerun finds everything done. Slow:
it synthesizes speech and runs the bundled Whisper models."""

import json

import pytest

from experiments.demo import main

pytestmark = pytest.mark.slow

FIGURES = (
    "per_position",
    "site_heatmap",
    "gaps",
    "error_distribution_en",
    "error_distribution_es",
    "f1_vs_gap",
    "f1_vs_mustshe",
    "attention_profiles",
    "confusion",
)


def test_trimmed_demo_runs_end_to_end_and_resumes(tmp_path, capsys):
    work = tmp_path / "work"
    assert main(["--trim", "--work", str(work)]) == 0
    figures = work / "report"  # the default output folder: inside the work folder, never the checkout
    for name in FIGURES:
        assert (figures / f"{name}.png").stat().st_size > 2000, name
        assert (figures / f"{name}.pdf").read_bytes().startswith(b"%PDF"), name
    report = (figures / "report.md").read_text()
    assert "**The voices are synthetic**" in report and "random weights" in report
    assert "2 CPU threads" in report and "**Reproducibility.**" in report
    assert "E on resampled means (paper)" in report and "(pseudo-replicated)" in report
    assert " speech frames" in report and "`applied_f1_macro`" in report and "`category_1.accuracy`" in report
    gaps = json.loads((work / "results" / "gap-whisper-base.json").read_text())
    assert set(gaps["languages"]) == {"en", "es"} and gaps["languages"]["en"]["bootstrap"]["iterations"] == 1000
    assert gaps["languages"]["en"]["gap_estimate"] == "resampled"
    pairing = (work / "results" / "f1_vs_mustshe.csv").read_text().splitlines()[0]
    assert pairing == "model,direction,applied_f1_macro,category_1_accuracy"
    rows = [json.loads(line) for line in (work / "results" / "probes.jsonl").read_text().splitlines()]
    sites = {row["config"]["site"] for row in rows if row["config"]["store"].endswith("whisper-base")}
    assert len(sites) == 8  # embedding, 6 layers, final layer norm
    assert {row["config"]["probe"] for row in rows} == {"positional", "attention"}
    assert any("tiny-random-seamless" in row["config"]["store"] and row["config"]["site"] == "post_adapter" for row in rows)
    capsys.readouterr()
    assert main(["--trim", "--work", str(work)]) == 0
    rerun = capsys.readouterr().out
    assert f"{len(rows)} already in" in rerun and "0 of 42 utterances to do" in rerun
    assert len((work / "results" / "probes.jsonl").read_text().splitlines()) == len(rows)
