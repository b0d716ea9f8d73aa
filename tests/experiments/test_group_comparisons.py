"""Named group comparisons (``experiments.scoring.group_metrics.COMPARISONS``): hand-computed
values, each comparison's stated symmetry, the speaker bootstrap taking one by name (E by default,
with gap reports unchanged), and a new comparison registered in a test."""

import hashlib
import json
import math

import numpy as np
import pytest

from experiments.scoring.gaps import error_rate_frame, finite_or_null, gap_report, gap_summary
from experiments.scoring.group_metrics import COMPARISONS, SYMMETRIES, Comparison, comparison

# (φ(A), φ(B)) -> relative_gap, delta_rel, difference, by hand
HAND = {
    (12.0, 8.0): (50.0, 40.0, 4.0),  # E = 100 * 4 / 8; Δrel = 100 * 4 / 10
    (8.0, 12.0): (-100 / 3, -40.0, -4.0),
    (30.0, 10.0): (200.0, 100.0, 20.0),  # Δrel = 100 * 20 / 20
    (5.0, 0.0): (math.inf, 200.0, 5.0),  # E undefined (infinite) when B is 0; Δrel = 100 * 5 / 2.5
    (0.0, 0.0): (math.nan, 0.0, 0.0),  # 0 / 0: no measurement of E
}


@pytest.mark.parametrize("values", list(HAND))
def test_each_comparison_by_hand(values):
    for name, expected in zip(("relative_gap", "delta_rel", "difference"), HAND[values]):
        got = COMPARISONS[name](*values)
        assert (math.isnan(got) and math.isnan(expected)) or got == pytest.approx(expected), (name, values)


def check_comparison(compare: Comparison) -> None:
    """The contract of a registered comparison: 0 on equal values, and its declared symmetry."""
    assert compare.symmetry in SYMMETRIES and compare.summary
    for value in (0.5, 3.0, 40.0):
        assert compare(value, value) == 0
    rng = np.random.default_rng(0)
    for a, b in rng.uniform(0.5, 60, size=(20, 2)):
        forward, backward = compare(a, b), compare(b, a)
        if compare.symmetry == "antisymmetric":
            assert backward == pytest.approx(-forward)
        else:
            assert (1 + forward / 100) * (1 + backward / 100) == pytest.approx(1)


@pytest.mark.parametrize("name", list(COMPARISONS))
def test_every_comparison_is_zero_on_equal_groups_and_keeps_its_symmetry(name):
    check_comparison(COMPARISONS[name])


def _counts(errors_a, errors_b, speakers=3):
    """Per-utterance counts: group A (female) and B (male), ten reference words each, two utterances per speaker."""
    rows = []
    for gender, errors in (("female", errors_a), ("male", errors_b)):
        rows += [{"gender": gender, "speaker": f"{gender}{i // 2 % speakers}", "errors": e, "length": 10} for i, e in enumerate(errors)]
    return rows


def test_the_frame_gives_each_comparison_by_name():
    frame = error_rate_frame(_counts([3, 3, 3, 3, 3, 3], [1, 1, 1, 1, 1, 1]), ("female", "male"))  # 30 % against 10 %
    assert {name: frame.compare(name, "female", "male") for name in COMPARISONS} == {"relative_gap": 200.0, "delta_rel": 100.0, "difference": 20.0}
    assert (frame.relative_gap("female", "male"), frame.delta_rel("female", "male"), frame.difference("female", "male")) == (200.0, 100.0, 20.0)
    with pytest.raises(ValueError, match="unknown comparison 'ratio'; choose from relative_gap, delta_rel, difference"):
        frame.compare("ratio", "female", "male")


def test_the_speaker_bootstrap_takes_the_comparison_by_name():
    frame = error_rate_frame(_counts([1, 2, 3, 4, 5, 6], [1, 1, 2, 2, 0, 1]), ("female", "male"))
    intervals = {name: frame.speaker_bootstrap("female", "male", 300, seed=1, compare=name) for name in COMPARISONS}
    assert intervals["relative_gap"] == frame.speaker_bootstrap("female", "male", 300, seed=1)
    for name, (low, high) in intervals.items():
        assert low <= frame.compare(name, "female", "male") <= high, name
    # speakers' rates: A 15, 35, 55 %, B 10, 20, 5 %; a resample's difference lies within 15 - 20 .. 55 - 5
    assert -5 <= intervals["difference"][0] < intervals["difference"][1] <= 50
    equal = error_rate_frame(_counts([2, 2, 2, 2, 2, 2], [2, 2, 2, 2, 2, 2]), ("female", "male"))
    assert all(equal.speaker_bootstrap("female", "male", 100, compare=name) == (0.0, 0.0) for name in COMPARISONS)


def _hypotheses():
    """Transcripts of 6 speakers per gender, 4 utterances each, errors drawn with a fixed seed."""
    rng = np.random.default_rng(7)
    words = "the cat sat on a mat with one red hat today".split()
    rows = []
    for gender in ("female", "male"):
        for s in range(6):
            for u in range(4):
                reference = [words[i] for i in rng.integers(0, len(words), size=8)]
                hypothesis = [w if rng.random() > (0.15 if gender == "female" else 0.1) * (1 + s % 3) else "uh" for w in reference]
                rows.append(
                    {
                        "id": f"{gender}-{s}-{u}",
                        "reference": " ".join(reference),
                        "hypothesis": " ".join(hypothesis),
                        "gender": gender,
                        "speaker": f"{gender}{s}",
                        "language": "en",
                    }
                )
    return rows


def test_a_gap_report_of_e_is_byte_identical_to_the_one_before_named_comparisons():
    """The sha256 of a language's entry, computed with the code before ``COMPARISONS`` existed."""
    report, _ = gap_report(_hypotheses(), ("female", "male"), 200, 3)
    entry = report["languages"]["en"]
    text = json.dumps(finite_or_null(entry), sort_keys=True, allow_nan=False)
    assert entry["bootstrap"]["ci95"] == [0.0, 306.76041666666674] and "ci95_of" not in entry["bootstrap"]
    assert hashlib.sha256(text.encode()).hexdigest() == "25181d997da1ab90f3da17dbc14fb93ddba8546085f55796eb8b675014ae5bd8"
    assert "ci95_of" not in report["settings"]


def test_a_gap_report_of_another_comparison_names_it():
    report, _ = gap_report(_hypotheses(), ("female", "male"), 200, 3, compare="delta_rel")
    entry = report["languages"]["en"]
    assert entry["bootstrap"]["ci95_of"] == "delta_rel" and report["settings"]["ci95_of"] == "delta_rel"
    low, high = entry["bootstrap"]["ci95"]
    assert low <= entry["delta_rel"] <= high
    assert gap_summary(entry, ("female", "male")).startswith("Δrel(female, male) 95 % CI ")
    default, _ = gap_report(_hypotheses(), ("female", "male"), 200, 3)
    assert {k: v for k, v in entry.items() if k != "bootstrap"} == {k: v for k, v in default["languages"]["en"].items() if k != "bootstrap"}
    with pytest.raises(ValueError, match="unknown comparison 'ratio'"):
        gap_report(_hypotheses(), ("female", "male"), 20, 3, compare="ratio")


def log_ratio(value_a: float, value_b: float) -> float:
    """A throwaway comparison: 100 ln(φ(A) / φ(B)), antisymmetric."""
    return 100.0 * math.log(value_a / value_b) if value_a > 0 and value_b > 0 else math.nan


def test_a_throwaway_comparison_passes_the_checks_and_reaches_the_bootstrap(monkeypatch):
    monkeypatch.setitem(COMPARISONS, "log_ratio", Comparison("log_ratio", log_ratio, "antisymmetric", "100 ln(φ(A) / φ(B))"))
    check_comparison(comparison("log_ratio"))
    frame = error_rate_frame(_counts([3, 3, 3, 3, 3, 3], [1, 1, 1, 1, 1, 1]), ("female", "male"))
    assert frame.compare("log_ratio", "female", "male") == pytest.approx(100 * math.log(3))
    low, high = frame.speaker_bootstrap("female", "male", 50, compare="log_ratio")
    assert low == pytest.approx(100 * math.log(3)) == high  # every speaker of a group has the same rate
