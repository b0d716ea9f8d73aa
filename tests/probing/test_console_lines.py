"""Console lines name their metric and unit (issue 45, item 3): a probe run's progress line and a
gap report's line per language."""

from experiments.scoring.gaps import language_gap_line
from probing.grid import _describe, _scope
from probing.run import ProbeConfig


def test_a_per_position_run_prints_f1_s_named_and_a_control_its_selectivity_in_points():
    assert _describe({"f1_macro": 52.94, "f1_s": 52.9}) == "F1_S 52.9 % (macro-F1 averaged over speech positions; 50: chance)"
    line = _describe({"f1_macro": 38.2, "f1_s": 38.25, "selectivity": 15.28})
    assert line.endswith(", selectivity +15.3 points (the real labels' F1 minus this control's)")
    assert _describe({"f1_macro": 87.84, "selectivity": -7.05}) == (
        "F1 87.8 % (macro-F1; 50: chance), selectivity -7.0 points (the real labels' F1 minus this control's)"
    )
    assert _describe({"f1_macro": 60.0, "compression": 1.234}).endswith("compression 1.23 (MDL: uniform codelength over online codelength)")


def test_the_progress_line_names_the_language_and_a_split_other_than_the_default():
    assert _scope(ProbeConfig("s", "encoder.final")) == ""
    assert _scope(ProbeConfig("s", "encoder.final", language="fr", split="stratified")) == " language=fr split=stratified"


def test_a_language_s_gap_line_gives_the_rates_with_speakers_the_interval_e_and_delta_rel():
    entry = {
        "metric": "wer",
        "groups": {"female": {"error_rate": 20.0, "speakers": 2}, "male": {"error_rate": 10.0, "speakers": 1}},
        "gap_relative": 100.0,
        "gap_estimate": "full",
        "delta_rel": 66.6667,
        "bootstrap": {"ci95": [None, None], "p_value": None, "ci95_note": "one speaker in male: the interval cannot vary it"},
    }
    line = language_gap_line(entry, ("female", "male"))
    assert line.startswith("WER female 20.00 % (2 speakers), male 10.00 % (1 speaker); E(female, male) 95 % CI undefined .. undefined")
    assert "[one speaker in male: the interval cannot vary it]; E +100.00 % (E on the full set); p undefined" in line
    assert line.endswith("; Δrel +66.67 % of the mean rate")
    missing = language_gap_line({"groups": {"female": {"error_rate": 5.0, "speakers": 1}}}, ("female", "male"))
    assert missing == "ERROR RATE female 5.00 % (1 speaker), male undefined % (0 speakers); no gap: a group is missing"


def test_a_run_that_only_shared_speakers_allow_says_so_on_its_line():
    line = _describe({"f1_macro": 55.6, "shared_speakers_only": "runs only with speakers shared between train and test: ..."})
    assert line.endswith(", warning: speakers shared by train and test, the only split that runs here (the row's shared_speakers_only says why)")
