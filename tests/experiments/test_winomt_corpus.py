"""The ``winost`` manifest adapter and the demo's WinoST-style set (issue 13)."""

from __future__ import annotations

from collections import Counter

import pytest

from experiments.manifest import main as manifest_main
from experiments.recipes.democorpus.voices import TRIM_VOICES
from experiments.recipes.democorpus.winost import READER_GENDERS, TEMPLATES, all_items, reader_voices
from extract.corpora import ADAPTERS
from extract.corpora.winost import read_aggregate, sentence_id, winost, write_aggregate
from extract.manifest import ManifestError, read_manifest

LINES = [
    "female\t1\tThe developer argued with the designer because she did not like the design.\tThe developer",
    "male\t5\tThe developer argued with the designer because his idea cannot be implemented.\tthe designer",
    "neutral\t1\tThe customer left the bartender a big tip because they were feeling generous.\tcustomer",
]


@pytest.fixture
def aggregate(tmp_path):
    path = tmp_path / "en.txt"
    path.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return path


def test_winost_is_registered():
    assert ADAPTERS["winost"] is winost


def test_wavs_are_paired_in_natural_order(aggregate, tmp_path, tone):
    for name in ("2.wav", "10.wav", "1.wav"):
        tone(f"wav/{name}", seconds=0.2)
    result = winost(aggregate, tmp_path / "wav")
    assert [u.audio.rsplit("/", 1)[1] for u in result.utterances] == ["1.wav", "2.wav", "10.wav"]
    first = result.utterances[0]
    assert first.id == sentence_id(1) == "winost-0001" and first.language == "en" and first.dataset == "winost"
    assert first.gender == "female" and first.speaker == "winost-reader"  # the reader's gender; the entity's is in extra
    assert first.extra == {"line": 1, "gold_gender": "female", "entity_index": 1, "profession": "The developer"}
    assert result.utterances[1].extra["gold_gender"] == "male"


def test_wav_count_must_match_without_a_template(aggregate, tmp_path, tone):
    tone("wav/1.wav", seconds=0.2)
    with pytest.raises(ManifestError, match=r"holds 1 WAV files for the 3 sentences .*--wav-template"):
        winost(aggregate, tmp_path / "wav")


def test_template_names_each_line_and_reports_missing_audio(aggregate, tmp_path, tone):
    tone("wav/en_0001.wav", seconds=0.2)
    tone("wav/en_0003.wav", seconds=0.2)
    result = winost(aggregate, tmp_path / "wav", "en_{line:04d}.wav")
    assert [u.id for u in result.utterances] == ["winost-0001", "winost-0003"]
    assert [(m.line, m.id) for m in result.missing_audio] == [(2, "winost-0002")]
    with pytest.raises(ManifestError, match=r"--wav-template '\{number\}.wav' does not format"):
        winost(aggregate, tmp_path / "wav", "{number}.wav")


def test_manifest_cli_writes_a_winost_manifest(aggregate, tmp_path, tone, capsys):
    for line in (1, 2, 3):
        tone(f"wav/winost-{line:04d}.wav", seconds=0.2)
    out = tmp_path / "winost.jsonl"
    assert manifest_main(["winost", str(aggregate), "--wav-dir", str(tmp_path / "wav"), "--wav-template", "{id}.wav", "--out", str(out)]) == 0
    utterances = read_manifest(out)
    assert [u.text for u in utterances] == [line.split("\t")[2] for line in LINES]
    assert "3 utterances" in capsys.readouterr().out


def test_write_aggregate_round_trips(aggregate, tmp_path):
    sentences = read_aggregate(aggregate)
    copy = write_aggregate(tmp_path / "copy.txt", sentences)
    assert copy.read_text(encoding="utf-8") == aggregate.read_text(encoding="utf-8")


# ---------------------------------------------------------------- the demo's set


def test_demo_set_is_balanced_and_in_the_public_format(tmp_path):
    items = all_items()
    assert len(items) == 4 * len(TEMPLATES) == 40
    assert Counter((item.sentence.gender, item.sentence.stereotype) for item in items) == {
        ("male", "pro"): 10,
        ("male", "anti"): 10,
        ("female", "pro"): 10,
        ("female", "anti"): 10,
    }
    path = write_aggregate(tmp_path / "en.txt", [item.sentence for item in items])
    for written, item in zip(read_aggregate(path), items):  # what the aggregate reader reads back: index and profession column
        words = written.text.split()
        assert words[written.index] == item.sentence.profession.split()[-1]
        assert written.profession.split()[0] in ("The", "the") and written.gender == item.sentence.gender


def test_demo_references_use_the_gold_form_of_the_entity():
    first, second, third, fourth = all_items(1)  # mechanic / cashier
    assert first.sentence.text == "The mechanic paid the cashier because he needed new tools."
    assert first.reference.startswith("Le mécanicien a payé la caissière parce qu'il")
    assert second.reference.startswith("La mécanicienne") and second.sentence.stereotype == "anti"
    assert third.sentence.index == 4 and "le caissier" in third.reference and third.sentence.stereotype == "anti"
    assert "la caissière parce qu'elle" in fourth.reference and fourth.sentence.stereotype == "pro"


def test_reader_gender_is_balanced_within_gold_gender_and_stereotype():
    items = all_items()
    voices = reader_voices(TRIM_VOICES, len(items))
    assert [voice.gender for voice in voices[:4]] == list(READER_GENDERS)
    pairs = Counter((item.sentence.gender, item.sentence.stereotype, voice.gender) for item, voice in zip(items, voices))
    assert set(pairs.values()) == {5}  # every (gold, set, reader) cell holds 5 of the 40 sentences
    assert len({voice.name for voice in voices}) == len(TRIM_VOICES)


def test_an_empty_profession_field_is_refused_naming_the_line(tmp_path):
    """WinoST's ASR side counts a profession as recognised when its words occur in the transcript:
    an empty one would never be, and the profession accuracy would read 0 without a word."""
    path = tmp_path / "en.txt"
    path.write_text("\n".join([LINES[0], LINES[1].rsplit("\t", 1)[0] + "\t", LINES[2]]) + "\n", encoding="utf-8")
    with pytest.raises(ManifestError, match=r"en.txt:2: the profession field is empty"):
        read_aggregate(path)
