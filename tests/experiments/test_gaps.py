import json

import jiwer
import numpy as np
import pytest

from experiments.scoring.asr_metrics import error_counts, normalize
from experiments.scoring.gaps import (
    Group,
    _stratified_draws,
    error_rate,
    published_resampling,
    stratified_allocation,
    stratified_sample_sums,
)
from experiments.scoring.group_metrics import delta_rel, relative_gap, speaker_bootstrap_interval


def test_gap_formulas_by_hand():
    assert error_rate(np.array([1, 2]), np.array([10, 10])) == pytest.approx(15.0)
    assert relative_gap(10.0, 8.0) == pytest.approx(25.0)
    assert relative_gap(6.0, 8.0) == pytest.approx(-25.0)
    assert delta_rel(10.0, 8.0) == pytest.approx(100 * 2 / 9)
    assert delta_rel(0.0, 0.0) == 0.0


def test_stratified_allocation_keeps_speaker_shares():
    codes = np.array([0, 0, 0, 0, 1, 1, 2, 2, 2, 2])
    rng = np.random.default_rng(0)
    assert stratified_allocation(codes, 5, 4, rng).tolist() == [[2, 1, 2]] * 4  # shares 2, 1, 2 are whole
    assert stratified_allocation(codes, 10, 2, rng).tolist() == [[4, 2, 4]] * 2


def test_stratified_allocation_gives_leftovers_at_random_with_the_fractional_shares():
    codes = np.array([0, 0, 0, 0, 1, 1, 2, 2, 2, 2])
    # shares of 3 draws: 1.2, 0.6, 1.2 -> floors 1, 0, 1 and one leftover draw, to speaker 1 with
    # probability 0.6 and to speakers 0 and 2 with 0.2 each
    allocation = stratified_allocation(codes, 3, 20_000, np.random.default_rng(1))
    assert (allocation.sum(axis=1) == 3).all()
    assert {tuple(row) for row in allocation.tolist()} == {(2, 0, 1), (1, 1, 1), (1, 0, 2)}
    np.testing.assert_allclose(allocation.mean(axis=0), [1.2, 0.6, 1.2], atol=0.02)


def test_stratified_allocation_never_exceeds_a_speakers_records():
    codes = np.repeat(np.arange(6), [1, 1, 2, 3, 5, 8])
    for n in range(1, 21):
        allocation = stratified_allocation(codes, n, 200, np.random.default_rng(n))
        assert (allocation.sum(axis=1) == n).all() and (allocation <= np.bincount(codes)).all() and (allocation >= 0).all()
    with pytest.raises(ValueError, match="cannot draw 21 of 20 records"):
        stratified_allocation(codes, 21, 1, np.random.default_rng(0))


def _identical_groups():
    """One group's per-utterance counts copied: 20 speakers of 7 records with different error rates,
    the copy's speakers named in reverse order (so any fixed tie-break between speakers differs)."""
    rng = np.random.default_rng(7)
    codes = np.repeat(np.arange(20), 7)
    lengths = rng.integers(5, 20, codes.size)
    errors = rng.binomial(lengths, rng.uniform(0.02, 0.3, 20)[codes])
    return Group(errors, lengths, [f"s{c:02d}" for c in codes]), Group(errors, lengths, [f"s{19 - c:02d}" for c in codes])


def test_identical_groups_show_no_resampled_gap():
    a, b = _identical_groups()
    assert a.rate == b.rate
    # the old allocation gave the 16 leftover draws of 56 to the same speakers every iteration:
    # E -3.11 and p 2.5e-27 at seed 0
    result = published_resampling(a, b, iterations=1000, seed=0)
    assert result.sample_size == 56
    assert abs(result.gap_relative) < 1.0 and result.p_value > 0.05
    for seed in range(1, 6):
        again = published_resampling(a, b, iterations=1000, seed=seed)
        assert abs(again.gap_relative) < 1.0 and again.p_value > 0.01  # the E noise here: sd 0.27 over 40 seeds
    low, high = speaker_bootstrap_interval(a, b, iterations=1000, seed=0)
    assert low < 0 < high


def _texts(seed=0, n=60):
    rng = np.random.default_rng(seed)
    words = "the cat sat on a mat with its hat and bat".split()
    references = [" ".join(rng.choice(words, rng.integers(3, 9))) for _ in range(n)]
    hypotheses = [" ".join(w for w in r.split() if rng.random() > 0.2) + (" um" if rng.random() < 0.3 else "") for r in references]
    speakers = [f"s{i % 7}" for i in range(n)]
    return references, hypotheses, speakers


def stratified_sample_masks(group: Group, n: int, iterations: int, rng: np.random.Generator) -> np.ndarray:
    """The same draws as :func:`stratified_sample_sums` (same generator state) as ``[iterations, N]`` masks."""
    masks = np.zeros((iterations, len(group)), dtype=bool)
    for members, chosen in _stratified_draws(group, n, iterations, rng):
        masks[:, members.ravel()] = chosen.reshape(iterations, -1)
    return masks


def test_resampled_rates_equal_recomputing_jiwer_on_each_sample():
    references, hypotheses, speakers = _texts()
    counts = [error_counts(r, h, "en") for r, h in zip(references, hypotheses)]
    group = Group([c.errors for c in counts], [c.reference_length for c in counts], speakers)
    masks = stratified_sample_masks(group, 24, 5, np.random.default_rng(3))
    errors, lengths = stratified_sample_sums(group, 24, 5, np.random.default_rng(3))
    allocation = stratified_allocation(group.codes, 24, 5, np.random.default_rng(3))  # the draws' first use of the generator
    assert masks.sum(axis=1).tolist() == [24] * 5
    for row, mask in enumerate(masks):
        chosen = np.flatnonzero(mask)
        assert np.bincount(group.codes[chosen], minlength=7).tolist() == allocation[row].tolist()
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


def test_asr_gap_cli_by_hand(tmp_path, capsys):
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
    assert main(["--hypotheses", str(_write_hypotheses(tmp_path / "h.jsonl", rows)), "--out", str(out), "--iterations", "50"]) == 0
    report = json.loads(out.read_text())["languages"]
    en = report["en"]
    assert en["metric"] == "wer" and en["dropped_empty_reference"] == 1
    assert en["groups"]["female"] == {"error_rate": 25.0, "utterances": 2, "speakers": 2}
    assert en["groups"]["male"]["error_rate"] == 12.5
    assert en["gap_relative_full"] == pytest.approx(100.0) and en["gap_absolute"] == pytest.approx(12.5)
    assert en["delta_rel"] == pytest.approx(100 * 12.5 / 18.75)
    printed = capsys.readouterr().out
    assert "[asr_gap] en WER: female 25.00 %, male 12.50 %; " in printed and f"; Δrel {100 * 12.5 / 18.75:+.2f} % of the mean rate; dropped 1" in printed
    assert set(en["bootstrap"]) >= {"iterations", "mean", "gap_relative", "ci95", "p_value", "p_value_note"}
    # the paper's estimate by default: one record of 4 words per group and iteration (40 % of 2, rounded);
    # each female record has 1 error (25 %), the male records 0 and 1 (0 % or 25 %)
    mean = en["bootstrap"]["mean"]
    assert mean["female"] == pytest.approx(25.0) and mean["male"] in [25.0 * k / 50 for k in range(51)]
    assert en["gap_estimate"] == "resampled" and en["gap_relative"] == en["gap_relative_resampled"] == en["bootstrap"]["gap_relative"]
    assert en["gap_relative_resampled"] == pytest.approx(100 * (25.0 - mean["male"]) / mean["male"])
    assert "pseudo-replicated" in en["bootstrap"]["p_value_note"] and "ci95" in en["bootstrap"]["p_value_note"]
    assert en["scoring"]["normalizer"] == "whisper" and en["scoring"]["normalizer_applied"] == "whisper english"
    assert report["sr"]["scoring"]["transliteration"]["library"] == "cyrtranslit"
    assert report["ja"]["metric"] == "cer" and report["ja"]["groups"]["female"]["error_rate"] == 25.0
    assert report["ja"]["gap_relative"] is None and report["ja"]["bootstrap"]["ci95"] == [None, None]  # male CER is 0
    assert report["sr"]["groups"]["female"]["error_rate"] == 0.0 and report["sr"]["groups"]["male"]["error_rate"] == 50.0
    assert en["error_distribution"]["female"][0] == 100.0 and len(en["error_distribution"]["female"]) == 101
    again = tmp_path / "again.json"
    main(["--hypotheses", str(tmp_path / "h.jsonl"), "--out", str(again), "--iterations", "50"])
    assert again.read_text() == out.read_text()


def test_interval_of_names_the_comparison_the_speaker_interval_is_of(tmp_path, capsys):
    """``--interval-of difference``: the interval is of φ(A) − φ(B) in points (so it holds the full-set
    difference here, where every resample of 3 speakers per group keeps female above male), the
    report and its settings name it, and the printed line says what it is of."""
    from experiments.asr_gap import main

    rows = []
    for gender, errors in (("female", 2), ("male", 1)):
        for speaker in range(3):
            for utterance in range(2):
                words = ["red", "green", "blue", "white"]
                rows.append(
                    {
                        "id": f"{gender}-{speaker}-{utterance}",
                        "reference": " ".join(words),
                        "hypothesis": " ".join(["x"] * (errors + utterance % 2) + words[errors + utterance % 2 :]),
                        "gender": gender,
                        "speaker": f"{gender}-{speaker}",
                        "language": "en",
                    }
                )
    out = tmp_path / "gap.json"
    hypotheses = str(_write_hypotheses(tmp_path / "h.jsonl", rows))
    assert main(["--hypotheses", hypotheses, "--out", str(out), "--iterations", "50", "--interval-of", "difference"]) == 0
    report = json.loads(out.read_text())
    entry = report["languages"]["en"]
    assert report["settings"]["ci95_of"] == "difference" and entry["bootstrap"]["ci95_of"] == "difference"
    assert entry["gap_absolute"] == pytest.approx(25.0)  # each female speaker 5 / 8 words wrong, each male 3 / 8: 62.5 − 37.5 points
    assert entry["bootstrap"]["ci95"] == pytest.approx([25.0, 25.0])  # every speaker of a group has the same rate
    assert "difference(female, male) 95 % CI" in capsys.readouterr().out
    with pytest.raises(SystemExit) as refused:
        main(["--hypotheses", str(tmp_path / "h.jsonl"), "--out", str(tmp_path / "bad.json"), "--interval-of", "ratio"])
    assert refused.value.code == 2 and "invalid choice: 'ratio'" in capsys.readouterr().err


def test_e_is_undefined_when_the_reference_group_makes_no_error(tmp_path, capsys):
    """E(0, 0) was 0.0, shown "+0.0"; like E(x > 0, 0) it is undefined: null in the JSON, in the
    resampled estimate and the bootstrap too (science audit D5)."""
    from experiments.asr_gap import main

    assert np.isnan(relative_gap(0.0, 0.0)) and relative_gap(1.0, 0.0) == float("inf")
    rows = [
        {"id": f"{g}{k}", "reference": "red green blue", "hypothesis": "red green blue", "gender": g, "speaker": f"{g}{k}", "language": "en"}
        for g in ("female", "male")
        for k in range(3)
    ]
    out = tmp_path / "gap.json"
    assert main(["--hypotheses", str(_write_hypotheses(tmp_path / "h.jsonl", rows)), "--out", str(out), "--iterations", "50"]) == 0
    en = json.loads(out.read_text())["languages"]["en"]
    assert en["gap_relative"] is None and en["gap_relative_full"] is None and en["gap_relative_resampled"] is None
    assert en["bootstrap"]["gap_relative"] is None and en["bootstrap"]["ci95"] == [None, None]
    assert en["gap_absolute"] == 0.0
    assert "E undefined" in capsys.readouterr().out


def test_asr_gap_cli_rejects_bad_rows(tmp_path, capsys):
    from experiments.asr_gap import main

    bad = _write_hypotheses(tmp_path / "bad.jsonl", [{"id": "x", "reference": "a"}])
    assert main(["--hypotheses", str(bad), "--out", str(tmp_path / "o.json")]) == 2
    assert "bad.jsonl:1: missing key(s) hypothesis, gender, speaker, language" in capsys.readouterr().err


def _gap_rows():
    # en, WER: female 2 errors / 8 words = 25 %, male 1 / 8 = 12.5 %; "..." is empty after normalization
    return [
        {"id": "f1", "reference": "red green blue white", "hypothesis": "red green blue", "gender": "female", "speaker": "a", "language": "en"},
        {"id": "f2", "reference": "cat dog bird fish", "hypothesis": "cat dog bird fish cow", "gender": "female", "speaker": "b", "language": "en"},
        {"id": "m1", "reference": "red green blue white", "hypothesis": "red green blue white", "gender": "male", "speaker": "c", "language": "en"},
        {"id": "m2", "reference": "cat dog bird fish", "hypothesis": "cat dog bird fresh", "gender": "male", "speaker": "d", "language": "en"},
        {"id": "m3", "reference": "...", "hypothesis": "so", "gender": "male", "speaker": "d", "language": "en"},
    ]


def test_gap_estimate_full_puts_e_on_all_records_in_gap_relative(tmp_path, capsys):
    from experiments.asr_gap import main

    hypotheses = _write_hypotheses(tmp_path / "h.jsonl", _gap_rows())
    assert main(["--hypotheses", str(hypotheses), "--out", str(tmp_path / "full.json"), "--iterations", "50", "--gap-estimate", "full"]) == 0
    report = json.loads((tmp_path / "full.json").read_text())
    en = report["languages"]["en"]
    assert en["dropped_empty_reference"] == 1  # "..." kept a "." token through the English normalizer before
    assert en["gap_estimate"] == "full" and en["gap_relative"] == pytest.approx(100.0) == en["gap_relative_full"]
    assert en["gap_relative_resampled"] == en["bootstrap"]["gap_relative"]
    assert report["settings"]["gap_estimate"] == "full"
    assert "E +100.00 % (E on the full set)" in capsys.readouterr().out
    with pytest.raises(SystemExit) as error:
        main(["--hypotheses", str(hypotheses), "--out", str(tmp_path / "x.json"), "--gap-estimate", "mean"])
    assert error.value.code == 2 and "invalid choice: 'mean'" in capsys.readouterr().err


def _entry(low, high, p_value, gap=3.0, estimate="resampled"):
    return {"gap_relative": gap, "gap_estimate": estimate, "bootstrap": {"ci95": [low, high], "p_value": p_value}}


def test_gap_summary_leads_with_the_interval_and_never_leaves_a_tiny_p_unqualified():
    from experiments.scoring.gaps import gap_summary

    crossing = gap_summary(_entry(-5.0, 8.0, 1.74e-20), ("female", "male"))
    assert crossing.startswith("E(female, male) 95 % CI -5.00 .. +8.00 (speaker bootstrap, crosses 0: no gap shown either way)")
    assert crossing.index("95 % CI") < crossing.index("E +3.00 % (E on the resampled means (Attanasio et al. 2024))") < crossing.index("p 1.74e-20")
    assert "pseudo-replicated; the interval crosses 0: trust the interval, not p" in crossing
    excluding = gap_summary(_entry(1.0, 8.0, 1.74e-20, estimate="full"), ("female", "male"))
    assert excluding == (
        "E(female, male) 95 % CI +1.00 .. +8.00 (speaker bootstrap); E +3.00 % (E on the full set); p 1.74e-20 (published resampling t-test, pseudo-replicated)"
    )
    large_p = gap_summary(_entry(-5.0, 8.0, 0.4), ("female", "male"))
    assert "trust the interval" not in large_p and "crosses 0" in large_p
    undefined = gap_summary(_entry(float("nan"), float("nan"), float("nan"), gap=float("inf")), ("female", "male"))
    assert "CI undefined .. undefined" in undefined and "E undefined" in undefined and "p undefined" in undefined
    assert gap_summary({"groups": {}}, ("female", "male")) == "no gap: a group is missing"


def test_gap_figure_names_the_estimate_and_marks_only_intervals_clear_of_zero(tmp_path):
    from experiments.reports import plots as figures

    results = {"cv": {"languages": {"en": _entry(-5.0, 8.0, 1e-20), "it": _entry(1.0, 2.0, 1e-20, gap=2.5), "ja": {"gap_relative": None}}}}
    assert figures.axis_label("gap_relative") == "E(F, M): relative WER gap (%)\n>0: worse for women"
    assert figures.gap_estimate_note(results) == "bars: E on the resampled means (Attanasio et al. 2024)"
    mixed = {**results, "fleurs": {"languages": {"en": _entry(1.0, 8.0, 0.03, estimate="full")}}}
    assert figures.gap_estimate_note(mixed) == "bars: E on the full set / E on the resampled means (Attanasio et al. 2024)"
    assert figures.gap_estimate_note({"old": {"languages": {"en": {"gap_relative": 1.0}}}}) == "bars: estimate not recorded"
    perfect = {"rv": {"languages": {"it": {"gap_relative": -100.0}, "fr": {"gap_relative": -99.9}, "ru": {"gap_relative": None}}}}
    assert figures.no_error_languages(perfect) == ["it"]
    both = {"female": {"error_rate": 5.0}, "male": {"error_rate": 0.0}}
    undefined = {"rv": {"languages": {"en": {"gap_relative": None, "groups": both}, "bg": {"groups": {"male": {}}, "missing_groups": ["female"]}}}}
    assert figures.undefined_gap_languages(undefined) == ["en"] and figures.undefined_gap_languages(perfect) == []
    assert figures.gap_mark(_entry(-5.0, 8.0, 1e-20)) == ""  # interval crosses 0: no star, whatever p
    assert figures.gap_mark(_entry(1.0, 8.0, 1e-20)) == "**" and figures.gap_mark(_entry(1.0, 8.0, 0.03)) == "*"
    assert figures.gap_mark(_entry(None, None, 1e-20)) == ""
    # the resampled E (2.5) lies outside its interval (1.0 .. 2.0): still drawn
    paths = figures.gap_bars(mixed, tmp_path / "gaps")
    assert paths[0].read_bytes().startswith(b"\x89PNG") and paths[1].read_bytes().startswith(b"%PDF")


def test_scoring_options_reach_the_rates_and_are_recorded(tmp_path):
    from experiments.asr_gap import main

    rows = [
        # yo, CER: female "ọmọ mi dé" read as "ọmọmi dé": 0 / 7 without spaces, 1 / 9 with them; male exact
        {"id": "yf", "reference": "ọmọ mi dé", "hypothesis": "ọmọmi dé", "gender": "female", "speaker": "a", "language": "yo"},
        {"id": "ym", "reference": "ọmọ mi dé", "hypothesis": "ọmọ mi dé", "gender": "male", "speaker": "b", "language": "yo"},
        # en, WER: only case and punctuation differ, errors only without a normalizer (2 of 3 words)
        {"id": "ef", "reference": "The cat sat.", "hypothesis": "the cat sat", "gender": "female", "speaker": "c", "language": "en"},
        {"id": "em", "reference": "the cat sat", "hypothesis": "the cat sat", "gender": "male", "speaker": "d", "language": "en"},
    ]
    hypotheses = _write_hypotheses(tmp_path / "h.jsonl", rows)
    assert main(["--hypotheses", str(hypotheses), "--out", str(tmp_path / "default.json"), "--iterations", "20"]) == 0
    assert (
        main(["--hypotheses", str(hypotheses), "--out", str(tmp_path / "raw.json"), "--iterations", "20", "--normalizer", "none", "--cer-spaces", "keep"]) == 0
    )
    default = json.loads((tmp_path / "default.json").read_text())
    raw = json.loads((tmp_path / "raw.json").read_text())
    assert default["languages"]["yo"]["groups"]["female"]["error_rate"] == 0.0
    assert raw["languages"]["yo"]["groups"]["female"]["error_rate"] == pytest.approx(100 / 9)
    assert default["languages"]["en"]["groups"]["female"]["error_rate"] == 0.0
    assert raw["languages"]["en"]["groups"]["female"]["error_rate"] == pytest.approx(200 / 3)
    assert default["languages"]["yo"]["scoring"]["cer_spaces"] == "drop" and raw["languages"]["yo"]["scoring"]["cer_spaces"] == "keep"
    assert raw["languages"]["en"]["scoring"]["normalizer"] == "none" and raw["settings"]["normalizer"] == "none"


def test_the_speaker_interval_says_when_it_rests_on_too_few_speakers():
    from experiments.reports.plots import gap_mark
    from experiments.scoring.gaps import RELIABLE_SPEAKERS, gap_summary, score_language

    def rows(speakers_per_group):
        out = []
        for gender, hypothesis in (("female", "red green"), ("male", "red green blue white black")):  # WER 50 vs 25
            for s in range(speakers_per_group):
                for u in range(2):
                    out.append(
                        {
                            "id": f"{gender}{s}{u}",
                            "reference": "red green blue white",
                            "hypothesis": hypothesis,
                            "gender": gender,
                            "speaker": f"{gender}{s}",
                            "language": "en",
                        }
                    )
        return out

    lone, _ = score_language(rows(1), "en", ("female", "male"), 20, 0)
    assert lone["bootstrap"]["ci95"] == [None, None] and "one speaker" in lone["bootstrap"]["ci95_note"]
    assert "[a group has one speaker" in gap_summary(lone, ("female", "male"))
    few, _ = score_language(rows(2), "en", ("female", "male"), 20, 0)
    assert few["bootstrap"]["speakers"] == {"female": 2, "male": 2} and "only 2 speakers" in few["bootstrap"]["ci95_note"]
    assert few["bootstrap"]["ci95"] == [100.0, 100.0]
    starred = {**few, "bootstrap": {**few["bootstrap"], "p_value": 1e-6}}
    assert gap_mark(starred) == ""  # no star from an interval two speakers make
    assert gap_mark({**starred, "bootstrap": {k: v for k, v in starred["bootstrap"].items() if k != "ci95_note"}}) == "**"
    enough, _ = score_language(rows(RELIABLE_SPEAKERS), "en", ("female", "male"), 20, 0)
    assert "ci95_note" not in enough["bootstrap"] and enough["bootstrap"]["ci95"][0] is not None
