"""The demo corpus, trimmed: one sentence per language, a subset of voices. Synthesizes speech (slow)."""

import hashlib
import json
import os
import shutil
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from experiments.recipes.democorpus.build import assign_splits, build_demo_corpus
from experiments.recipes.democorpus.sentences import MUSTSHE_SENTENCES
from experiments.recipes.democorpus.voices import TRIM_VOICES, VOICES
from extract.audio import SAMPLE_RATE, load_audio
from extract.corpora import must_she
from extract.manifest import read_manifest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo") / "corpus"
    return build_demo_corpus(root, seed=3, sentences_per_language=1, mustshe_sentences=2, voices=TRIM_VOICES, show_progress=False, workers=2)


def test_voice_roster_meets_the_brief():
    for language in ("en", "es"):
        for gender in ("female", "male"):
            assert sum(v.gender == gender and language in v.languages for v in VOICES) >= 4, (language, gender)


def test_splits_are_speaker_disjoint_and_seeded(corpus):
    utterances = read_manifest(corpus.manifest)
    split_of = defaultdict(set)
    for u in utterances:
        split_of[u.speaker].add(u.split)
    assert all(len(splits) == 1 for splits in split_of.values())
    for split in ("train", "dev", "test"):
        for language in ("en", "es"):
            genders = {u.gender for u in utterances if u.split == split and u.language == language}
            assert genders == {"female", "male"}, (split, language)
    assert assign_splits(TRIM_VOICES, 3, ("en", "es")) == assign_splits(TRIM_VOICES, 3, ("en", "es"))
    assert any(assign_splits(TRIM_VOICES, seed, ("en", "es")) != assign_splits(TRIM_VOICES, 3, ("en", "es")) for seed in range(4, 12))


def test_manifest_and_audio(corpus):
    utterances = read_manifest(corpus.manifest)
    assert len(utterances) == 6 * 2 + 2 * 1  # six voices speak en+es, the two espeak voices en only
    for u in utterances:
        audio = load_audio(u.audio)
        assert abs(audio.seconds - u.duration) < 0.01 and 1.0 < audio.seconds < 10.0
        assert u.extra["synthetic"] is True and u.dataset == "demo"
    rms = {u.id: float(np.sqrt(np.mean(load_audio(u.audio).samples ** 2))) for u in utterances}
    assert min(rms.values()) > 0.01


def test_mustshe_tsv_is_in_the_official_format(corpus):
    result = must_she(corpus.mustshe_tsv)
    assert not result.missing_audio and len(result.utterances) == 4
    female, male = result.utterances[:2]
    assert (female.extra["category"], female.gender, male.extra["category"], male.gender) == ("1F", "female", "1M", "male")
    assert female.translation == MUSTSHE_SENTENCES[0].feminine and male.translation == MUSTSHE_SENTENCES[0].masculine
    assert female.extra["genderterms"] == "cansada cansado" and male.extra["genderterms"] == "cansado cansada"
    assert female.extra["wrong_reference"] == MUSTSHE_SENTENCES[0].masculine
    assert len(read_manifest(corpus.mustshe_manifest)) == 4
    three_terms = next(s for s in MUSTSHE_SENTENCES if len(s.terms) == 3)
    assert three_terms.feminine.count(" ") == three_terms.masculine.count(" ")


def test_a_moved_corpus_folder_keeps_both_manifests_audio(corpus, tmp_path):
    """Both manifests name their audio relative to the corpus folder, so a cache moved elsewhere
    still serves them (the MuST-SHE one held absolute paths: a moved cache lost all its audio)."""
    moved = tmp_path / "moved"
    shutil.copytree(corpus.root, moved)
    for manifest in ("manifest.jsonl", "mustshe.jsonl"):
        rows = [json.loads(line) for line in (moved / manifest).read_text().splitlines()]
        assert rows and all(not Path(row["audio"]).is_absolute() for row in rows)
        assert all(Path(u.audio).is_relative_to(moved) and Path(u.audio).is_file() for u in read_manifest(moved / manifest))


def test_rebuild_is_a_no_op_and_synthesis_is_reproducible(corpus):
    first = read_manifest(corpus.manifest)[0]
    before = hashlib.sha256(open(first.audio, "rb").read()).hexdigest()
    mtime = (corpus.root / "build.json").stat().st_mtime
    again = build_demo_corpus(corpus.root, seed=3, sentences_per_language=1, mustshe_sentences=2, voices=TRIM_VOICES, show_progress=False)
    assert (again.root / "build.json").stat().st_mtime == mtime
    voice = next(v for v in TRIM_VOICES if v.name == first.speaker)
    audio, rate = voice.synthesize(first.text, first.language, first.extra["speed"])
    import soxr

    resampled = soxr.resample(audio, rate, SAMPLE_RATE)
    stored = load_audio(first.audio).samples
    assert len(resampled) == len(stored)
    assert before == hashlib.sha256(open(first.audio, "rb").read()).hexdigest()


def test_a_build_of_earlier_code_that_recorded_measured_is_the_same_build(corpus):
    """Whether a corpus has its card is not a build setting: a build.json that records ``measured``
    (written by earlier code) is reused, never synthesized again."""
    import json

    build = corpus.root / "build.json"
    recorded = build.read_text()
    first = read_manifest(corpus.manifest)[0]
    written = os.stat(first.audio).st_mtime_ns
    build.write_text(json.dumps(json.loads(recorded) | {"measured": True}))
    try:
        build_demo_corpus(corpus.root, seed=3, sentences_per_language=1, mustshe_sentences=2, voices=TRIM_VOICES, show_progress=False)
        assert os.stat(first.audio).st_mtime_ns == written
    finally:
        build.write_text(recorded)


def test_the_card_from_the_studys_transcripts_is_written_once_and_keeps_the_limit(corpus, tmp_path):
    """The demo writes the corpus card from its study's Whisper base transcripts (no second
    transcription): once, again only when the transcripts are newer, and a voice over the WER limit
    is refused before card.json is written, so every rerun refuses it again."""
    import json

    from experiments.demo.work import Work, write_corpus_card
    from experiments.recipes.democorpus.card import VoiceTooHardError

    work = Work(tmp_path, corpus, tmp_path / "report", "float32", 1)
    hypotheses = work.hypotheses("whisper-base")
    hypotheses.parent.mkdir(parents=True)
    utterances = read_manifest(corpus.manifest)
    hypotheses.write_text("".join(json.dumps({"id": u.id, "hypothesis": u.text}) + "\n" for u in utterances))
    corpus.card.unlink(missing_ok=True)
    assert write_corpus_card(work) is True
    card = json.loads(corpus.card.read_text())
    assert card["transcripts"].endswith(str(hypotheses)) and "float32" in card["transcripts"]
    assert {(row["voice"], row["language"]) for row in card["voices"]} == {(u.speaker, u.language) for u in utterances}
    assert all(row["wer"] == 0 for row in card["voices"]) and set(card["hypotheses"]) == {u.id for u in utterances}
    assert write_corpus_card(work) is False
    hypotheses.write_text("".join(json.dumps({"id": u.id, "hypothesis": "zzz qqq"}) + "\n" for u in utterances))
    later = corpus.card.stat().st_mtime + 10
    os.utime(hypotheses, (later, later))
    for _ in range(2):
        with pytest.raises(VoiceTooHardError, match="WER limit"):
            write_corpus_card(work)
    assert json.loads(corpus.card.read_text())["voices"] == card["voices"]
    assert "zzz qqq" in (corpus.root / "CARD.md").read_text()
    corpus.card.unlink()


def _audio_hashes(root) -> dict[str, str]:
    return {str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted(root.rglob("*.wav"))}


def test_a_second_build_elsewhere_in_one_process_gives_identical_audio(corpus, tmp_path):
    """The fixture spoke in two worker processes of one Kokoro thread each; this build speaks in
    this process with Kokoro's default threads: the same bytes, the same speeds and durations."""
    again = build_demo_corpus(tmp_path / "again", seed=3, sentences_per_language=1, mustshe_sentences=2, voices=TRIM_VOICES, show_progress=False, workers=1)
    first, second = _audio_hashes(corpus.root), _audio_hashes(again.root)
    assert len(first) == 14 + 4 and first == second
    assert corpus.manifest.read_text() == again.manifest.read_text()
    assert corpus.mustshe_tsv.read_text() == again.mustshe_tsv.read_text()


def test_two_workers_speak_into_an_empty_kokoro_cache(tmp_path, monkeypatch):
    """From an empty cache the Kokoro model is assembled once, by the parent, before the workers start
    (two workers assembling it at once raced on one temporary file: the demo failed from an empty cache)."""
    from experiments.recipes.democorpus.build import Speech, speak_all

    monkeypatch.setenv("KOKORO_JA_CACHE", str(tmp_path / "kokoro"))
    kokoro = [voice for voice in TRIM_VOICES if voice.engine == "kokoro"][:2]
    speeches = [Speech(voice, "Good morning.", "en", 1.0, tmp_path / f"{voice.name}.wav") for voice in kokoro]

    class Bar:
        ticks = 0

        def update(self):
            self.ticks += 1

    bar = Bar()
    seconds = speak_all(speeches, 2, bar)
    assert bar.ticks == 2 and len(seconds) == 2 and all(0.3 < value < 5 for value in seconds)
    assert [load_audio(speech.path).seconds for speech in speeches] == pytest.approx(seconds, abs=1e-3)
    assert (tmp_path / "kokoro" / "kokoro-v1.0.int8.onnx").stat().st_size > 0 and not list((tmp_path / "kokoro").glob("*.tmp"))


def test_a_build_needs_at_least_one_worker(tmp_path):
    with pytest.raises(ValueError, match="workers must be at least 1, got 0"):
        build_demo_corpus(tmp_path / "none", seed=3, sentences_per_language=1, mustshe_sentences=2, voices=TRIM_VOICES, workers=0)
    assert not (tmp_path / "none").exists()


def test_espeak_speaks_a_sentence_identically_whatever_came_before():
    """espeak-ng seeds its breath noise from the clock and carries wave-generator state between
    utterances; each utterance in a fresh, seeded process removes both."""
    from experiments.recipes.democorpus import espeak

    text = "The train to the city leaves every morning at seven."
    first = {voice: espeak.synthesize(text, voice, 150, 60)[0] for voice in ("en-us+f2", "en-us+m4")}
    espeak.synthesize("Dinner will be ready in about twenty minutes.", "en-us+f5", 140, 60)
    for voice in ("en-us+m4", "en-us+f2"):
        audio, rate = espeak.synthesize(text, voice, 150, 60)
        assert rate == 22050 and audio.tobytes() == first[voice].tobytes(), voice
    assert first["en-us+f2"].tobytes() != espeak.synthesize(text, "en-us+f2", 150, 61)[0].tobytes()  # the arguments still matter


def test_espeak_errors_name_the_voice():
    from experiments.recipes.democorpus import espeak

    with pytest.raises(espeak.EspeakError, match="no-such-voice"):
        espeak.synthesize("Hello.", "no-such-voice", 150, 50)


def test_mustshe_is_read_by_voices_outside_the_train_split(corpus):
    split_of = {u.speaker: u.split for u in read_manifest(corpus.manifest)}
    readers = {u.speaker for u in read_manifest(corpus.mustshe_manifest)}
    assert readers and all(split_of[speaker] != "train" for speaker in readers)
    assert {u.gender for u in read_manifest(corpus.mustshe_manifest)} == {"female", "male"}


def test_card_measures_every_voice(corpus):
    from experiments.recipes.democorpus.card import write_card

    rows = write_card(corpus, show_progress=False)
    assert {(r["voice"], r["language"]) for r in rows} == {(u.speaker, u.language) for u in read_manifest(corpus.manifest)}
    for row in rows:
        assert 0 <= row["wer"] < 30 and row["utterances"] == 1
        assert (row["median_f0_hz"] > 160) == (row["gender"] == "female"), row
    assert "Synthetic voices" in (corpus.root / "CARD.md").read_text()
