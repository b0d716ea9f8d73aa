import json

import jiwer
import numpy as np
import pytest

from experiments.asr_metrics import error_counts, normalize
from experiments.gaps import (
    Group,
    delta_rel,
    error_rate,
    published_resampling,
    relative_gap,
    speaker_bootstrap_interval,
    stratified_allocation,
    stratified_sample_masks,
    stratified_sample_sums,
)


def test_gap_formulas_by_hand():
    assert error_rate(np.array([1, 2]), np.array([10, 10])) == pytest.approx(15.0)
    assert relative_gap(10.0, 8.0) == pytest.approx(25.0)
    assert relative_gap(6.0, 8.0) == pytest.approx(-25.0)
    assert delta_rel(10.0, 8.0) == pytest.approx(100 * 2 / 9)
    assert delta_rel(0.0, 0.0) == 0.0


def test_stratified_allocation_keeps_speaker_shares():
    codes = np.array([0, 0, 0, 0, 1, 1, 2, 2, 2, 2])
    assert stratified_allocation(codes, 5).tolist() == [2, 1, 2]
    assert stratified_allocation(codes, 3).tolist() == [1, 1, 1]  # largest remainder goes to speaker 1
    assert stratified_allocation(codes, 10).tolist() == [4, 2, 4]


def _texts(seed=0, n=60):
    rng = np.random.default_rng(seed)
    words = "the cat sat on a mat with its hat and bat".split()
    references = [" ".join(rng.choice(words, rng.integers(3, 9))) for _ in range(n)]
    hypotheses = [" ".join(w for w in r.split() if rng.random() > 0.2) + (" um" if rng.random() < 0.3 else "") for r in references]
    speakers = [f"s{i % 7}" for i in range(n)]
    return references, hypotheses, speakers


def test_resampled_rates_equal_recomputing_jiwer_on_each_sample():
    references, hypotheses, speakers = _texts()
    counts = [error_counts(r, h, "en") for r, h in zip(references, hypotheses)]
    group = Group([c.errors for c in counts], [c.reference_length for c in counts], speakers)
    masks = stratified_sample_masks(group, 24, 5, np.random.default_rng(3))
    errors, lengths = stratified_sample_sums(group, 24, 5, np.random.default_rng(3))
    assert masks.sum(axis=1).tolist() == [24] * 5
    for row, mask in enumerate(masks):
        chosen = np.flatnonzero(mask)
        assert np.bincount(group.codes[chosen], minlength=7).tolist() == stratified_allocation(group.codes, 24).tolist()
        output = jiwer.process_words([normalize(references[i], "en") for i in chosen], [normalize(hypotheses[i], "en") for i in chosen])
        assert 100 * errors[row] / lengths[row] == pytest.approx(100 * output.wer)


def test_published_resampling_is_reproducible_and_tests_a_real_difference():
    rng = np.random.default_rng(0)
    worse = Group(rng.binomial(10, 0.3, 400), np.full(400, 10), rng.integers(0, 40, 400))
    better = Group(rng.binomial(10, 0.1, 300), np.full(300, 10), rng.integers(0, 30, 300))
    first = published_resampling(worse, better, iterations=200, seed=4)
    again = published_resampling(worse, better, iterations=200, seed=4)
    assert first.sample_size == 120 and first.p_value < 1e-10
    np.testing.assert_array_equal(first.rates_a, again.rates_a)
    assert first.mean_a == pytest.approx(worse.rate, rel=0.05) and first.gap_relative > 100
    low, high = speaker_bootstrap_interval(worse, better, iterations=300, seed=1)
    assert low < relative_gap(worse.rate, better.rate) < high


def test_speaker_bootstrap_with_one_speaker_per_group_is_degenerate():
    a = Group([1, 2], [10, 10], ["x", "x"])
    b = Group([1, 1], [10, 10], ["y", "y"])
    low, high = speaker_bootstrap_interval(a, b, iterations=50)
    assert low == pytest.approx(50.0) and high == pytest.approx(50.0)


def _write_hypotheses(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def test_asr_gap_cli_by_hand(tmp_path):
    from experiments.asr_gap import main

    rows = [
        # en, WER: female 2 errors / 8 words = 25 %, male 1 / 8 = 12.5 %
        {"id": "f1", "reference": "red green blue white", "hypothesis": "red green blue", "gender": "female", "speaker": "a", "language": "en"},
        {"id": "f2", "reference": "cat dog bird fish", "hypothesis": "cat dog bird fish cow", "gender": "She", "speaker": "b", "language": "en"},
        {"id": "m1", "reference": "red green blue white", "hypothesis": "red green blue white", "gender": "male", "speaker": "c", "language": "en"},
        {"id": "m2", "reference": "cat dog bird fish", "hypothesis": "cat dog bird fresh", "gender": "He", "speaker": "d", "language": "en"},
        {"id": "m3", "reference": "[noise]", "hypothesis": "hello", "gender": "male", "speaker": "d", "language": "en"},
        # ja, CER: female 1 / 4 characters, male 0 / 3
        {"id": "jf", "reference": "ねこです", "hypothesis": "ねこでる", "gender": "female", "speaker": "e", "language": "ja"},
        {"id": "jm", "reference": "いぬだ", "hypothesis": "いぬだ", "gender": "male", "speaker": "f", "language": "ja"},
        # sr: a Latin hypothesis of a Cyrillic reference is not an error
        {"id": "sf", "reference": "Добар дан", "hypothesis": "Dobar dan", "gender": "female", "speaker": "g", "language": "sr"},
        {"id": "sm", "reference": "Добар дан", "hypothesis": "Dobar", "gender": "male", "speaker": "h", "language": "sr"},
    ]
    out = tmp_path / "gap.json"
    assert main(["--hypotheses", str(_write_hypotheses(tmp_path / "h.jsonl", rows)), "--json", str(out), "--iterations", "50"]) == 0
    report = json.loads(out.read_text())["languages"]
    en = report["en"]
    assert en["metric"] == "wer" and en["dropped_empty_reference"] == 1
    assert en["groups"]["female"] == {"error_rate": 25.0, "utterances": 2, "speakers": 2}
    assert en["groups"]["male"]["error_rate"] == 12.5
    assert en["gap_relative"] == pytest.approx(100.0) and en["gap_absolute"] == pytest.approx(12.5)
    assert en["delta_rel"] == pytest.approx(100 * 12.5 / 18.75)
    assert set(en["bootstrap"]) >= {"iterations", "mean", "gap_relative", "ci95", "p_value"}
    assert report["ja"]["metric"] == "cer" and report["ja"]["groups"]["female"]["error_rate"] == 25.0
    assert report["ja"]["gap_relative"] is None and report["ja"]["bootstrap"]["ci95"] == [None, None]  # male CER is 0
    assert report["sr"]["groups"]["female"]["error_rate"] == 0.0 and report["sr"]["groups"]["male"]["error_rate"] == 50.0
    assert en["error_distribution"]["female"][0] == 100.0 and len(en["error_distribution"]["female"]) == 101
    again = tmp_path / "again.json"
    main(["--hypotheses", str(tmp_path / "h.jsonl"), "--json", str(again), "--iterations", "50"])
    assert again.read_text() == out.read_text()


def test_asr_gap_cli_rejects_bad_rows(tmp_path, capsys):
    from experiments.asr_gap import main

    bad = _write_hypotheses(tmp_path / "bad.jsonl", [{"id": "x", "reference": "a"}])
    assert main(["--hypotheses", str(bad), "--json", str(tmp_path / "o.json")]) == 2
    assert "bad.jsonl:1: missing key(s) hypothesis, gender, speaker, language" in capsys.readouterr().err
