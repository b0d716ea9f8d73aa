"""The whole demo on a trimmed corpus (3 sentences per language, 8 voices, 3 clips per real voice),
run as a study: its collected results hold every run once, the per-language probes join the
per-language gaps, the real voices give leave-one-speaker-out rows per site beside the F0 baseline
(or the report says why they were skipped), the report and figures are written, and a rerun only
checks. Slow: it synthesizes speech and runs the bundled Whisper models."""

import csv
import json
import time

import pytest

from experiments.demo.__main__ import main
from experiments.demo.work import WHISPER_BASE_SITES

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
LAST = WHISPER_BASE_SITES[-1]


def _rows(path):
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _probe_scores(long, metric, **where):
    return [row for row in long if row["kind"] == "probe" and row["metric"] == metric and all(row[key] == value for key, value in where.items())]


def test_trimmed_demo_runs_as_a_study_end_to_end_and_resumes(tmp_path, capsys):
    work = tmp_path / "work"
    assert main(["--trim", "--work", str(work)]) == 0
    figures = work / "report"  # the default output folder: inside the work folder, never the checkout
    for name in FIGURES:
        assert (figures / f"{name}.png").stat().st_size > 2000, name
        assert (figures / f"{name}.pdf").read_bytes().startswith(b"%PDF"), name
    assert (work / "RESULTS.md").read_text().startswith("# demo: results")

    results = work / "results"
    long = _rows(results / "long.csv")
    gaps = json.loads((work / "behaviour" / "whisper-base" / "gap-demo-all.json").read_text())
    assert set(gaps["languages"]) == {"en", "es"} and gaps["languages"]["en"]["bootstrap"]["iterations"] == 1000
    tiny_gap = json.loads((work / "behaviour" / "whisper-tiny.en" / "gap-demo-all.json").read_text())
    assert set(tiny_gap["languages"]) == {"en"}

    # the per-language probes at the last site join the per-language gaps of one pooled hypotheses file
    joined = {(row["model"], row["language"]): row for row in _rows(results / "f1_vs_gap.csv") if row["dataset"] == "demo"}
    assert set(joined) == {("whisper-base", "en"), ("whisper-base", "es"), ("whisper-tiny.en", "en")}
    for (model, language), row in joined.items():
        assert row["site"] == LAST
        gap = gaps if model == "whisper-base" else tiny_gap
        assert float(row["gap_relative"]) == pytest.approx(gap["languages"][language]["gap_relative"])
        (probe,) = _probe_scores(long, "f1_s", model=model, dataset="demo", language=language, site=LAST, control="none")
        assert float(row["f1_s"]) == pytest.approx(float(probe["value"]))

    # the pooled store's probes: every site with its shuffled control, the random-init twin, MDL once
    for model, control in (("whisper-base", "none"), ("whisper-base", "shuffled"), ("whisper-base-random", "none")):
        rows = _probe_scores(long, "f1_s", model=model, dataset="demo", language="en+es", control=control, probe="positional")
        assert sorted(row["site"] for row in rows) == sorted(WHISPER_BASE_SITES), (model, control)
    (mdl,) = _probe_scores(long, "compression", dataset="demo")
    assert (mdl["model"], mdl["site"], mdl["control"], mdl["language"]) == ("whisper-base", LAST, "none", "en+es")

    # the attention probe applied to MuST-SHE, and the tiny random models through the study
    (pairing,) = _rows(results / "f1_vs_mustshe.csv")
    assert (pairing["model"], pairing["site"], pairing["tgt_lang"]) == ("whisper-base", LAST, "es")
    (applied,) = _probe_scores(long, "applied_f1_macro", model="whisper-base", probe="attention")
    assert float(pairing["applied_f1_macro"]) == pytest.approx(float(applied["value"]))
    assert _probe_scores(long, "f1_macro", model="tiny-random-seamless", site="post_adapter", probe="attention", language="en")

    # the real voices: leave-one-speaker-out per site and the F0 baseline, gaps where both genders speak
    skipped = work / "realvoices" / "skipped.json"
    report = (figures / "report.md").read_text()
    if skipped.exists():
        print(f"real voices skipped: {json.loads(skipped.read_text())['reason']}")
        assert "**Skipped**: the real-voice corpus could not be built" in report
    else:
        loso = _probe_scores(long, "f1_macro", dataset="realvoices", split="loso", control="none", probe="mean")
        assert sorted(row["site"] for row in loso if row["model"] == "whisper-base") == sorted(WHISPER_BASE_SITES)
        assert [row["site"] for row in loso if row["model"] == "praat-f0"] == ["f0"]
        real = json.loads((work / "behaviour" / "whisper-base" / "gap-realvoices-all.json").read_text())["languages"]
        for language in ("fr", "ru", "it"):  # both genders speak these (es: Allison Smith and other women only)
            assert real[language].get("gap_relative") is not None, language
        # English has had a male voice since 2026-12-03 (John Arundel's numbers), so only Spanish lacks one; a language
        # whose male voice makes no error has both groups and no E (E divides by the men's rate)
        assert real["es"].get("gap_relative") is None and real["es"]["missing_groups"] == ["male"]
        assert all("missing_groups" not in real[language] for language in ("en", "cs"))
        assert "| whisper-base | es | WER |" in report and "(no male voice)" in report

    probes = (work / "probes" / "probes.jsonl").read_text().splitlines()
    capsys.readouterr()
    started = time.time()
    assert main(["--trim", "--work", str(work)]) == 0
    elapsed = time.time() - started
    rerun = capsys.readouterr().out
    for stage in ("extract", "transcribe", "probe", "asr_gap", "collect"):
        assert f"  {stage:<11} " in rerun and f"  {stage:<11} 0 of" not in rerun and " to do" not in rerun.split(f"  {stage:<11} ")[1].splitlines()[0]
    assert (work / "probes" / "probes.jsonl").read_text().splitlines() == probes
    print(f"rerun: {elapsed:.1f} s")
