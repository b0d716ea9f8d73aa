"""The real-voice recipe without the network: transcripts, selection, splits, decoding, manifest and card
from a fake voice table over fake unpacked packages."""

import gzip
import json
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import soundfile

from experiments.recipes.realvoices import fetch
from experiments.recipes.realvoices.__main__ import main
from experiments.recipes.realvoices.build import Clip, assign_splits, build_realvoices, seeded_order
from experiments.recipes.realvoices.decode import decode_16k, source_seconds
from experiments.recipes.realvoices.fetch import FetchError, unpack
from experiments.recipes.realvoices.sources import GENDER_BASES, TEXT_QUALITIES, VOICES, Voice, voices_for
from experiments.recipes.realvoices.transcripts import parse_asterisk_lines, transcript, tuxpaint_line
from extract.audio import SAMPLE_RATE, load_audio
from extract.manifest import read_manifest

# --- transcripts


def test_asterisk_lines_skip_comments_blank_and_empty_and_drop_keys_listed_twice():
    lines = [
        "\ufeff; Core Asterisk Sounds in Spanish\n",
        "\n",
        "agent-pass: Por favor ingrese su clave: gracias.\n",
        "dir-welcome:\n",
        "digits/0: cero\n",
        "digits/0: diez\n",
        "digits/1: uno\n",
        "no colon on this line\n",
    ]
    assert parse_asterisk_lines(lines) == {"agent-pass": "Por favor ingrese su clave: gracias.", "digits/1": "uno"}


@pytest.mark.parametrize(
    "line, quality, expected",
    [
        ("All circuits are busy now.", "exact", ("All circuits are busy now.", "exact")),
        ("at [@]", "exact", ("at", "approximate")),
        ("Sus saludos [temporales] estan  en uso", "exact", ("Sus saludos estan en uso", "approximate")),
        ("Voce disattivata. (You are now muted.)", "exact", ("Voce disattivata.", "approximate")),
        ("il nostro (enfatico) glorioso moderatore", "approximate", ("il nostro glorioso moderatore", "approximate")),
        ("activé", "meaning", ("activé", "meaning")),
        ("Au revoir  !", "exact", ("Au revoir !", "exact")),
        ("[ascending tones]", "exact", None),
        ("(10 seconds of silence)", "exact", None),
        ("[ tono de error ]", "meaning", None),
    ],
)
def test_annotations_are_removed_and_mark_the_text_approximate(line, quality, expected):
    result = transcript(line, quality)
    assert (result.text, result.quality) == expected if expected else result is None


def test_tuxpaint_line_is_the_languages_own_line():
    description = "A US 1 cent piece ($.01) called a penny.\nes_AR.utf8=Otra.\nes.utf8=Una moneda de 1 centavo.\nfr.utf8=\n"
    assert tuxpaint_line(description, "es") == "Una moneda de 1 centavo."
    assert tuxpaint_line(description, "fr") is None  # empty
    assert tuxpaint_line(description, "ru") is None  # absent; the first (English) line is never taken


# --- the voice table


def test_voice_table_is_complete_and_consistent():
    assert len({voice.key for voice in VOICES}) == len(VOICES)
    gender_of = {}
    for voice in VOICES:
        assert gender_of.setdefault(voice.speaker, voice.gender) == voice.gender, voice.key
        assert voice.gender in ("female", "male") and voice.gender_basis in GENDER_BASES and voice.text_quality in TEXT_QUALITIES
        assert voice.licence and voice.credit and voice.gender_source and voice.version
    languages = Counter(voice.language for voice in VOICES)
    assert all(1 <= count <= 3 for count in languages.values()), languages  # the caveat the card states
    genders = Counter(gender_of.values())
    assert genders["female"] >= 3 and genders["male"] >= 3  # enough for speaker-disjoint splits of both genders
    assert {v.key for v in voices_for(("it",))} == {"carlo-flora-it", "menardi-it"}
    with pytest.raises(ValueError, match="no real voice speaks xx"):
        voices_for(("it", "xx"))


# --- selection and splits


def _voice(key, speaker, gender, **fields) -> Voice:
    base = dict(
        key=key,
        speaker=speaker,
        name=speaker.title(),
        language="en",
        gender=gender,
        gender_basis="stated",
        gender_source=f"folder en_US_{gender[0]}_{speaker}",
        package="fake-sounds-en-g722",
        version="1.0-1",
        dataset="fake-sounds",
        licence="CC-BY-SA-3.0",
        credit=f"Recorded by {speaker.title()}",
        audio_root=f"usr/share/sounds/{speaker}",
        suffix=".g722",
        transcripts="asterisk",
        transcript_package="fake-sounds-en",
        transcript_file="usr/share/doc/fake-sounds-en/core-sounds-en.txt.gz",
        text_quality="exact",
        sample_rate=16_000,
        channel="test",
    )
    return Voice(**{**base, **fields})


def test_seeded_order_depends_on_the_seed_and_the_voice_only():
    voice = _voice("ann-en", "ann", "female")
    clips = [Clip(voice, f"c{i}", Path(f"c{i}"), "t", "exact", 1.0) for i in range(20)]
    first = [c.key for c in seeded_order(clips, 7, voice.key)]
    assert first == [c.key for c in seeded_order(list(clips), 7, voice.key)]
    assert sorted(first) == sorted(c.key for c in clips)
    assert first != [c.key for c in seeded_order(clips, 8, voice.key)]
    assert first != [c.key for c in seeded_order(clips, 7, "other-voice")]


def test_splits_are_speaker_disjoint_seeded_and_hold_both_genders():
    voices = tuple(
        _voice(f"{s}-{lang}", s, g, language=lang)
        for s, g in [("f1", "female"), ("f2", "female"), ("f3", "female"), ("m1", "male"), ("m2", "male"), ("m3", "male"), ("m4", "male")]
        for lang in ("en", "fr")
    )
    splits = assign_splits(voices, 3)
    assert set(splits) == {"f1", "f2", "f3", "m1", "m2", "m3", "m4"}  # one split per speaker, whatever the languages
    for split in ("test", "dev"):
        assert sorted(voice.gender for voice in voices if splits[voice.speaker] == split and voice.language == "en") == ["female", "male"]
    assert splits == assign_splits(voices, 3)
    assert any(assign_splits(voices, seed) != splits for seed in range(4, 12))
    few_men = tuple(v for v in voices if v.speaker not in ("m3", "m4"))
    assert set(assign_splits(few_men, 3).values()) == {""}


# --- decoding


def _encode_g722(path: Path, samples: np.ndarray) -> Path:
    import av

    pcm = (samples * 32767).astype(np.int16)[None, :]
    with av.open(str(path), "w", format="g722") as container:
        stream = container.add_stream("g722", rate=SAMPLE_RATE, layout="mono")
        frame = av.AudioFrame.from_ndarray(pcm, format="s16", layout="mono")
        frame.rate = SAMPLE_RATE
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            container.mux(packet)
    return path


def _tone(seconds: float, hz: float = 440.0, rate: int = SAMPLE_RATE, amplitude: float = 0.3) -> np.ndarray:
    return (amplitude * np.sin(2 * np.pi * hz * np.arange(int(seconds * rate)) / rate)).astype(np.float32)


def test_g722_decodes_to_16k_with_its_length_from_the_file_size(tmp_path):
    path = _encode_g722(tmp_path / "tone.g722", _tone(1.0))
    samples = decode_16k(path)
    assert len(samples) == 2 * path.stat().st_size == SAMPLE_RATE  # 4 bits a sample at 16 kHz
    assert source_seconds(path) == pytest.approx(1.0)
    assert np.fft.rfftfreq(len(samples), 1 / SAMPLE_RATE)[np.argmax(np.abs(np.fft.rfft(samples)))] == pytest.approx(440.0, abs=2)
    assert 0.25 < np.abs(samples).max() < 0.35 and samples.dtype == np.float32


def test_gsm_is_decoded_by_pyav_not_encoded_here():
    """PyAV's wheels carry a GSM 06.10 decoder but no encoder: the GSM voices are decoded in the slow tests."""
    import av

    assert "gsm" in av.codecs_available and "gsm" in av.formats_available


# --- a whole build over fake packages


def _fake_cache(root: Path) -> Path:
    """Three fake packages, unpacked: G.722 prompts with a key: text list, 8 kHz WAV prompts sharing
    that list, and Tux Paint-style Ogg descriptions with per-language .txt lines."""
    unpacked = root / "unpacked"
    texts = {f"prompt-{i}": f"Prompt number {i}." for i in range(6)} | {"beep": "[a beep]", "short": "Short.", "long": "Far too many words. " * 5}
    doc = unpacked / "fake-sounds-en/usr/share/doc/fake-sounds-en"
    doc.mkdir(parents=True)
    with gzip.open(doc / "core-sounds-en.txt.gz", "wt", encoding="utf-8") as handle:
        handle.write("; fake\n\n" + "".join(f"{key}: {text}\n" for key, text in texts.items()))
    ann = unpacked / "fake-sounds-en-g722/usr/share/sounds/ann"
    ann.mkdir(parents=True)
    for i in range(6):
        _encode_g722(ann / f"prompt-{i}.g722", _tone(0.8 + 0.1 * i, hz=220))
    _encode_g722(ann / "beep.g722", _tone(0.5, hz=1000))  # annotation only
    _encode_g722(ann / "untranscribed.g722", _tone(0.5, hz=220))
    _encode_g722(ann / "long.g722", _tone(0.5, hz=220))  # 100 characters in half a second: another recording's text
    carl = unpacked / "fake-prompts/usr/share/sounds/carl"
    (carl / "digits").mkdir(parents=True)
    for i in range(4):
        soundfile.write(carl / f"prompt-{i}.wav", _tone(1.0, hz=110, rate=8000), 8000, subtype="PCM_16")
    soundfile.write(carl / "short.wav", _tone(0.1, rate=8000), 8000, subtype="PCM_16")
    soundfile.write(carl / "digits/9.wav", _tone(1.0, rate=8000), 8000, subtype="PCM_16")  # no transcript
    stamps = unpacked / "fake-stamps/usr/share/stamps/animals"
    stamps.mkdir(parents=True)
    for name in ("cat", "dog", "cow"):
        stereo = np.stack([_tone(1.2, hz=150, rate=44_100)] * 2, axis=1)
        soundfile.write(stamps / f"{name}_desc_xx.ogg", stereo, 44_100, format="OGG", subtype="VORBIS")
        (stamps / f"{name}.txt").write_text(f"A {name}.\nxx.utf8=Un {name} (animal).\n", encoding="utf-8")
    for package in ("fake-sounds-en", "fake-sounds-en-g722", "fake-prompts", "fake-stamps"):
        (unpacked / f"{package}.json").write_text(json.dumps({"package": package, "version": "1.0-1", "deb": f"{package}_1.0-1_all.deb"}))
    return root


FAKE_VOICES = (
    _voice("ann-en", "ann", "female"),
    _voice(
        "carl-en", "carl", "male", package="fake-prompts", suffix=".wav", text_quality="approximate", sample_rate=8000, licence="GPL-2", credit="Carl's credit"
    ),
    _voice(
        "bob-xx",
        "bob",
        "male",
        language="xx",
        gender_basis="given name",
        package="fake-stamps",
        audio_root="usr/share/stamps",
        suffix="_desc_xx.ogg",
        transcripts="tuxpaint",
        transcript_package="fake-stamps",
        transcript_file="",
        text_quality="approximate",
        sample_rate=44_100,
        licence="GPL-2",
        credit="Read by Bob",
    ),
)


@pytest.fixture
def fake_cache(tmp_path):
    return _fake_cache(tmp_path / "cache")


def test_build_writes_a_manifest_of_16k_clips_with_credits(fake_cache, tmp_path):
    rows = build_realvoices(tmp_path / "out", per_speaker=2, seed=1, cache=fake_cache, voices=FAKE_VOICES, show_progress=False)
    utterances = read_manifest(tmp_path / "out/manifest.jsonl")
    assert Counter(u.extra["voice"] for u in utterances) == {"ann-en": 2, "carl-en": 2, "bob-xx": 2}
    by_voice = {u.extra["voice"]: u for u in utterances}
    ann, carl, bob = by_voice["ann-en"], by_voice["carl-en"], by_voice["bob-xx"]
    assert (ann.gender, ann.speaker, ann.dataset, ann.language, ann.split) == ("female", "ann", "fake-sounds", "en", "")
    assert ann.id.startswith("ann-en.prompt-") and ann.text.startswith("Prompt number ")
    assert ann.extra == {
        "source": "fake-sounds",
        "voice": "ann-en",
        "name": "Ann",
        "package": "fake-sounds-en-g722",
        "package_version": "1.0-1",
        "source_file": f"usr/share/sounds/ann/{ann.id.split('.', 1)[1]}.g722",
        "source_rate": 16000,
        "licence": "CC-BY-SA-3.0",
        "credit": "Recorded by Ann",
        "text_quality": "exact",
        "gender_basis": "stated",
        "synthetic": False,
    }
    assert carl.extra["licence"] == "GPL-2" and carl.extra["text_quality"] == "approximate" and carl.extra["source_rate"] == 8000
    assert bob.text.startswith("Un ") and bob.text.endswith(".") and "(" not in bob.text and bob.id.startswith("bob-xx.animals.")
    for u in utterances:
        audio = load_audio(u.audio)
        assert abs(audio.seconds - u.duration) < 1e-3 and soundfile.info(u.audio).samplerate == SAMPLE_RATE
        assert soundfile.info(u.audio).channels == 1 and np.abs(audio.samples).max() > 0.2
    assert abs(carl.duration - 1.0) < 0.01 and abs(bob.duration - 1.2) < 0.01
    ann_row = next(r for r in rows if r["voice"] == "ann-en")
    assert (ann_row["available"], ann_row["clips"]) == (6, 2)
    assert ann_row["left_out"] == {
        "annotation only (a tone or a silence)": 1,
        "no transcript": 1,
        "text too long for the audio (over 30 characters a second)": 1,
    }
    assert next(r for r in rows if r["voice"] == "carl-en")["left_out"] == {"no transcript": 1, "shorter than 0.3 s": 1}
    assert 200 < ann_row["median_f0_hz"] < 240 and 100 < next(r for r in rows if r["voice"] == "carl-en")["median_f0_hz"] < 120


def test_a_dataset_name_is_recorded_by_every_row_and_the_source_kept(fake_cache, tmp_path):
    """``--dataset realvoices``: the rows record the study's corpus name (its dataset check), the
    source package family stays in ``extra.source``."""
    build_realvoices(tmp_path / "out", per_speaker=2, seed=1, cache=fake_cache, voices=FAKE_VOICES, show_progress=False, dataset="realvoices")
    utterances = read_manifest(tmp_path / "out/manifest.jsonl")
    assert {u.dataset for u in utterances} == {"realvoices"}
    assert {u.extra["voice"]: u.extra["source"] for u in utterances} == {voice.key: voice.dataset for voice in FAKE_VOICES}
    assert json.loads((tmp_path / "out/card.json").read_text(encoding="utf-8"))["settings"]["dataset"] == "realvoices"


def test_card_names_every_voice_its_package_licence_credit_and_counts(fake_cache, tmp_path):
    build_realvoices(tmp_path / "out", per_speaker=2, seed=1, cache=fake_cache, voices=FAKE_VOICES, show_progress=False)
    card = (tmp_path / "out/CARD.md").read_text(encoding="utf-8")
    assert "6 clips of 3 voices (3 speakers: 1 female, 2 male) in 2 languages" in card and "2 clips per voice, seed 1" in card
    assert "| Ann | en | female (stated) | fake-sounds-en-g722 + fake-sounds-en (1.0-1) | CC-BY-SA-3.0 | exact | 2 (6) |" in card
    assert "| Bob | xx | male (given name) | fake-stamps (1.0-1) | GPL-2 | approximate | 2 (3) |" in card
    assert "- Carl (en, `fake-prompts`, GPL-2): Carl's credit. Gender: folder en_US_m_carl." in card
    assert "| en | 2 | 1 | 1 | 4 |" in card and "| xx | 1 | 0 | 1 | 2 |" in card
    assert "- Carl (en): 1 no transcript, 1 shorter than 0.3 s" in card
    assert "speaker, source (telephone prompts, children's software), language and channel" in card
    assert "No fixed split" in card
    saved = json.loads((tmp_path / "out/card.json").read_text(encoding="utf-8"))
    assert saved["settings"] == {"languages": ["en", "xx"], "per_speaker": 2, "seed": 1, "dataset": None}
    assert [r["language"] for r in saved["languages"]] == ["en", "xx"]


def test_rebuild_is_identical_and_decodes_only_what_is_missing(fake_cache, tmp_path):
    build_realvoices(tmp_path / "a", per_speaker=2, seed=1, cache=fake_cache, voices=FAKE_VOICES, show_progress=False)
    wavs = sorted((fake_cache / "wav").rglob("*.wav"))
    stamps = {path: path.stat().st_mtime_ns for path in wavs}
    wavs[0].unlink()
    build_realvoices(tmp_path / "b", per_speaker=2, seed=1, cache=fake_cache, voices=FAKE_VOICES, show_progress=False)
    assert (tmp_path / "a/manifest.jsonl").read_text() == (tmp_path / "b/manifest.jsonl").read_text()
    assert (tmp_path / "a/CARD.md").read_text() == (tmp_path / "b/CARD.md").read_text()
    assert all(path.stat().st_mtime_ns == stamp for path, stamp in stamps.items() if path != wavs[0]) and wavs[0].is_file()
    assert not list((fake_cache / "wav").rglob("*.tmp"))
    for seed in (2, 3, 4):
        build_realvoices(tmp_path / f"s{seed}", per_speaker=2, seed=seed, cache=fake_cache, voices=FAKE_VOICES, show_progress=False)
    chosen = {seed: {u.id for u in read_manifest(tmp_path / f"s{seed}/manifest.jsonl")} for seed in (2, 3, 4)}
    assert len({frozenset(ids) for ids in chosen.values()}) > 1


# --- fetching


def test_missing_apt_get_is_one_line_saying_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setattr(fetch.shutil, "which", lambda name: None)
    with pytest.raises(FetchError, match=r"apt-get not found: .*put asterisk-core-sounds-en.s \.deb from https://packages\.debian\.org"):
        unpack("asterisk-core-sounds-en", tmp_path)


def test_failed_download_says_to_run_apt_get_update_and_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(fetch.shutil, "which", lambda name: f"/usr/bin/{name}")
    failed = subprocess.CompletedProcess(["apt-get"], 100, "", "W: something\nE: Unable to locate package nope\n")
    monkeypatch.setattr(fetch, "_run", lambda command, cwd=None: failed)
    with pytest.raises(FetchError) as caught:
        unpack("nope", tmp_path)
    message = str(caught.value)
    assert "apt-get download nope failed (E: Unable to locate package nope)" in message
    assert "run `apt-get update` first (as root)" in message and "\n" not in message
    assert not list((tmp_path / "debs").iterdir())


def test_a_complete_unpack_is_reused_without_apt_get(fake_cache, monkeypatch):
    monkeypatch.setattr(fetch, "_run", lambda *args, **kwargs: pytest.fail("ran a command"))
    package = unpack("fake-stamps", fake_cache)
    assert package.version == "1.0-1" and (package.root / "usr/share/stamps/animals/cat.txt").is_file()


# --- the command line


def test_cli_refuses_bad_flags(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    for argv in (["--out", str(tmp_path / "file")], ["--out", str(tmp_path), "--per-speaker", "0"], ["--out", str(tmp_path), "--languages", "xx"]):
        with pytest.raises(SystemExit) as caught:
            main(argv)
        assert caught.value.code == 2
    assert "is a file" in capsys.readouterr().err


def test_cli_fetch_failure_is_one_line_and_status_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SPEECH_GENDER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(fetch.shutil, "which", lambda name: None)
    assert main(["--out", str(tmp_path / "out"), "--languages", "en", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: apt-get not found") and err.count("\n") == 1
    assert not (tmp_path / "out/manifest.jsonl").exists()
