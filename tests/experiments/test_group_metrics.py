"""The group-metrics frame: metric by group, gaps between groups, speaker counts and the speaker bootstrap."""

import math

import numpy as np
import pytest

from experiments.scoring.gaps import Group, group_error_rate
from experiments.scoring.group_metrics import GroupMetricFrame, Members, speaker_bootstrap_interval


def _rate(columns):
    return 100.0 * float(np.sum(columns["errors"])) / float(np.sum(columns["lengths"]))


def _frame(groups=None):
    # female: speakers a (1 error / 10 words) and b (2 / 10) -> 15 %; male: speaker c, 3 / 10 -> 30 %;
    # other: speaker d, 4 / 10, counted only overall when not asked for -> overall 10 / 40 = 25 %
    columns = {"errors": np.array([1, 2, 0, 3, 4]), "lengths": np.array([10, 10, 5, 5, 10])}
    return GroupMetricFrame(_rate, columns, ["female", "female", "male", "male", "other"], ["a", "b", "c", "c", "d"], groups)


def test_metric_by_group_and_overall_by_hand():
    frame = _frame(groups=("female", "male", "unknown"))
    assert frame.by_group == {"female": 15.0, "male": 30.0}
    assert list(frame.by_group) == ["female", "male"] and frame.missing == ["unknown"] and frame.present == ["female", "male"]
    assert frame.overall == pytest.approx(25.0)
    assert (frame.speaker_count("female"), frame.speaker_count("male")) == (2, 1)
    assert len(frame.members("male")) == 2


def test_groups_default_to_every_label_in_order_of_first_appearance():
    frame = GroupMetricFrame(lambda c: len(c["x"]), {"x": [1, 2, 3]}, ["m", "f", "m"])
    assert frame.groups == ["m", "f"] and frame.by_group == {"m": 2, "f": 1}


def test_gaps_between_two_groups_by_hand():
    frame = _frame()
    assert frame.compare("difference", "female", "male") == pytest.approx(-15.0)
    assert frame.compare("relative_gap", "female", "male") == pytest.approx(-50.0)  # 100 (15 - 30) / 30
    assert frame.compare("delta_rel", "female", "male") == pytest.approx(-200 / 3)  # 100 (15 - 30) / 22.5
    assert frame.compare("relative_gap", "male", "female") == pytest.approx(100.0)


def test_an_empty_group_is_evaluated_only_when_asked():
    def counts(columns):
        return int(np.sum(columns["n"]))

    frame = GroupMetricFrame(counts, {"n": np.array([2, 3], dtype=np.int64)}, ["She", None], groups=("She", "He"))
    assert frame.by_group == {"She": 2} and frame.evaluate("He") == 0 and frame.overall == 5


def test_text_columns_are_taken_per_group():
    frame = GroupMetricFrame(lambda c: " ".join(c["text"]), {"text": ["a", "b", "c"]}, ["x", "y", "x"])
    assert frame.by_group == {"x": "a c", "y": "b"} and frame.overall == "a b c"


def test_speaker_bootstrap_by_hand():
    # female resamples of speakers a (10 %) and b (20 %): aa 10 %, ab 15 %, bb 20 % with probabilities 1/4, 1/2, 1/4;
    # male has one speaker, 30 % in every resample -> E in {-66.7, -50, -33.3}
    frame = _frame()
    low, high = frame.speaker_bootstrap("female", "male", iterations=2000, seed=3)
    assert low == pytest.approx(-200 / 3) and high == pytest.approx(-100 / 3)
    assert frame.speaker_bootstrap("female", "male", iterations=2000, seed=3) == (low, high)


def test_speaker_bootstrap_takes_every_record_of_a_drawn_speaker():
    # metric: records in the resample. A: speakers with 1 and 3 records -> 2, 4 or 6; B: one speaker, 2 records
    # -> E(A, B) in {0, 100, 200}
    def size(columns):
        return float(len(columns["x"]))

    a = Members({"x": np.zeros(4)}, ["p", "q", "q", "q"], size)
    b = Members({"x": np.zeros(2)}, ["r", "r"], size)
    assert speaker_bootstrap_interval(a, b, iterations=2000, seed=0) == pytest.approx((0.0, 200.0))


def test_speaker_bootstrap_is_undefined_when_b_is_always_zero():
    a = Members({"errors": np.array([1]), "lengths": np.array([4])}, ["a"], group_error_rate)
    b = Members({"errors": np.array([0]), "lengths": np.array([4])}, ["b"], group_error_rate)
    low, high = speaker_bootstrap_interval(a, b, iterations=20)
    assert math.isnan(low) and math.isnan(high)


def test_speaker_bootstrap_of_error_rates_is_the_weighted_sum_of_speaker_counts():
    """The frame re-evaluates the metric on resampled records; for error rates that must equal the
    vectorised sum of per-speaker counts (the implementation it replaced), to the last bit."""
    rng = np.random.default_rng(11)
    groups = [Group(rng.integers(0, 6, n), rng.integers(3, 12, n), rng.integers(0, speakers, n).astype(str)) for n, speakers in ((90, 13), (70, 9))]
    draw = np.random.default_rng(5)
    rates = []
    for group in groups:
        errors = np.bincount(group.codes, weights=group.errors)
        lengths = np.bincount(group.codes, weights=group.lengths)
        draws = draw.integers(0, len(errors), size=(300, len(errors)))
        rates.append(100.0 * errors[draws].sum(axis=1) / lengths[draws].sum(axis=1))
    expected = np.percentile(100.0 * (rates[0] - rates[1]) / rates[1], [2.5, 97.5])
    assert speaker_bootstrap_interval(*groups, iterations=300, seed=5) == (expected[0], expected[1])


def test_bad_frames_are_refused():
    with pytest.raises(ValueError, match="one entry per record"):
        GroupMetricFrame(len, {"a": [1, 2], "b": [1]}, ["x", "x"])
    with pytest.raises(ValueError, match="1 group labels for 2 records"):
        GroupMetricFrame(len, {"a": [1, 2]}, ["x"])
    with pytest.raises(ValueError, match="3 speakers for 2 records"):
        GroupMetricFrame(len, {"a": [1, 2]}, ["x", "y"], ["s", "t", "u"])
    frame = GroupMetricFrame(lambda c: float(len(c["a"])), {"a": [1, 2]}, ["x", "y"])
    with pytest.raises(ValueError, match="needs the records' speakers"):
        frame.speaker_bootstrap("x", "y", iterations=5)
    with pytest.raises(ValueError, match="no speakers"):
        frame.speaker_count("x")
