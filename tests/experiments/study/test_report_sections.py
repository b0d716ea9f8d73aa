"""RESULTS.md's numbers explain themselves (issue 45, item 3): controls with their selectivity, the
gaps no probe joined with their intervals, and why nothing joined; from hand-written long.csv rows,
then on a pooled study that joins nothing."""

import json

import pytest

from experiments.study import report_sections as sections
from experiments.study.__main__ import main
from tests.experiments.study.test_joins import pooled_study


def probe_row(control="none", metric="f1_s", value="60.0", seed="0", split="", probe="positional", site="encoder.final"):
    return {"kind": "probe", "model": "wb", "dataset": "rv", "language": "fr", "site": site, "probe": probe, "control": control} | {
        "seed": seed, "task": "female-male", "split": split, "applied_to": "", "metric": metric, "value": value
    }  # fmt: skip


def gap_row(metric, value, language="fr"):
    return {"kind": "asr_gap", "model": "wb", "dataset": "rv", "language": language, "site": "", "probe": "", "control": ""} | {
        "seed": "", "task": "female-male", "split": "", "applied_to": "", "metric": metric, "value": value
    }  # fmt: skip


def test_each_control_shows_its_score_and_selectivity_averaged_over_seeds():
    rows = [
        probe_row(),
        probe_row("shuffled", "f1_s", "48.0", seed="0"),
        probe_row("shuffled", "selectivity", "12.0", seed="0"),
        probe_row("shuffled", "f1_s", "52.0", seed="1"),
        probe_row("shuffled", "selectivity", "8.0", seed="1"),
        probe_row("speaker", "f1_s", "70.5"),
        probe_row("speaker", "selectivity", "-10.5"),
        probe_row("shuffled", "f1_macro", "40.0"),  # not the positional probe's headline
    ]
    cells = sections.control_cells(rows)
    key = ("wb", "rv", "fr", "encoder.final", "female-male", "fixed", "positional")
    assert cells == {key: "shuffled 50.0 (selectivity +10.0); speaker 70.5 (selectivity -10.5)"}


def test_a_control_of_another_split_or_kind_is_kept_apart():
    cells = sections.control_cells([probe_row("shuffled", "f1_s", "50", split="loso"), probe_row("shuffled", "f1_macro", "45", probe="mean")])
    assert set(cells) == {
        ("wb", "rv", "fr", "encoder.final", "female-male", "loso", "positional"),
        ("wb", "rv", "fr", "encoder.final", "female-male", "fixed", "mean"),
    }


def test_a_gap_no_probe_joined_is_shown_with_its_interval_and_delta_rel():
    long = [
        gap_row("groups.female.error_rate", "20.0"),
        gap_row("groups.female.speakers", "2"),
        gap_row("groups.male.error_rate", "10.0"),
        gap_row("groups.male.speakers", "1"),
        gap_row("gap_relative", "100.0"),
        gap_row("ci95_low", "-5.25"),
        gap_row("ci95_high", "150.0"),
        gap_row("delta_rel", "66.6667"),
        gap_row("gap_relative", "-100.0", language="it"),
    ]
    rows = sections.unjoined_gaps(long, gap_rows=[{"model": "wb", "dataset": "rv", "language": "ru", "task": "female-male"}])
    assert rows == [
        ["wb", "rv", "fr", "female 20.0 (2 spk), male 10.0 (1 spk)", "+100.0", "-5.2 .. +150.0", "+66.7"],
        ["wb", "rv", "it", "female n/a (? spk), male n/a (? spk)", "-100.0", "n/a", "n/a"],
    ]
    joined = [{"model": "wb", "dataset": "rv", "language": "fr", "task": "female-male"}, {"model": "wb", "dataset": "rv", "language": "it", "task": ""}]
    assert sections.unjoined_gaps(long, joined) == []


def test_the_why_lines_read_the_unmatched_keys_and_every_gap():
    collected = {
        "unmatched": {
            "probes_without_gap": [{"model": "wb", "dataset": "rv", "language": "fr+it", "site": "s", "task": "female-male", "split": "loso"}],
            "gaps_without_probe": [{"model": "wb", "dataset": "rv", "language": "fr", "task": "female-male", "source": "g.json"}],
        }
    }
    joined = [{"model": "wb", "dataset": "rv", "language": "it", "task": "female-male"}]
    (line,) = sections.why_lines(collected, joined)
    assert line.startswith("- why: the female-male probes of wb on rv (language fr+it) read the languages pooled") and "`languages: [fr, it]`" in line
    assert sections.why_lines({"unmatched": {"probes_without_gap": [], "gaps_without_probe": []}}, []) == []


@pytest.fixture(scope="module")
def pooled_results(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pooled")
    study = pooled_study(folder, ", split: loso")
    study.write_text(study.read_text().replace("controls: [none]", "controls: [none, shuffled]"))
    assert main(["run", str(study), "--quiet"]) == 0
    return folder / "runs" / "pooled"


def test_a_study_that_joins_nothing_says_why_and_shows_its_gaps_and_controls(pooled_results):
    results = (pooled_results / "RESULTS.md").read_text()
    assert "## What the numbers are" in results and "**selectivity** = F1(probe) − F1(control)" in results
    assert "## Gaps without a probe" in results
    for language in ("en", "it"):
        entry = json.loads((pooled_results / "behaviour" / "tiny" / "gap-toy-all.json").read_text())["languages"][language]
        assert f"| tiny | toy | {language} | female " in results and f"| {entry['gap_relative']:+.1f} |" in results
    assert "- why: the female-male probes of tiny on toy (language en+it) read the languages pooled in one store" in results
    assert "| tiny | toy | en+it | encoder.final | positional | loso | F1_S |" in results and "| shuffled " in results
    assert "(selectivity " in results
