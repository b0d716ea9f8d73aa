"""The typed run records of ``extract.jobs``: what a store's config and a transcription's settings
file record is a contract a resumed run is checked against, so its keys and order are fixed here."""

import hashlib
from pathlib import Path

from extract.families.generation import GenerationOptions
from extract.jobs import ExtractionJob, TranscriptionJob
from extract.spec import ModelSpec


def _manifest(folder: Path) -> Path:
    manifest = folder / "m.jsonl"
    manifest.write_text('{"id": "a", "audio": "a.wav", "language": "en", "text": "x", "gender": "female", "speaker": "s"}\n')
    return manifest


def test_store_config_records_the_spec_and_the_run_settings(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sha256 = hashlib.sha256(_manifest(tmp_path).read_bytes()).hexdigest()
    job = ExtractionJob(ModelSpec("whisper", "bundled-base", dtype="bfloat16", device="cpu", random_init=True, seed=3), Path("m.jsonl"), Path("out"))
    config = job.store_config(["encoder.final"], "/weights/whisper-base", "0123456789abcdef")
    assert config == {
        "model": "whisper",
        "checkpoint": "/weights/whisper-base",
        "revision": None,
        "model_fingerprint": "0123456789abcdef",
        "sites": ["encoder.final"],
        "dtype": "bfloat16",
        "storage_dtype": "float16",
        "max_seconds": 30.0,
        "keep_padding": False,
        "random_init": True,
        "seed": 3,
        "limit": None,
        "num_shards": 1,
        "utterances_per_part": 256,
        "manifest": "m.jsonl",
        "label": "whisper-base-random",
        "manifest_sha256": sha256,
    }
    assert list(config) == [
        "model",  # the model (extract.jobs.model_config, shared with decoder_states)
        "checkpoint",
        "revision",
        "model_fingerprint",
        "dtype",
        "random_init",
        "seed",
        "sites",
        "storage_dtype",
        "max_seconds",
        "keep_padding",
        "limit",  # the utterances in each part (extract.jobs.manifest_config)
        "num_shards",
        "utterances_per_part",
        "manifest",
        "manifest_sha256",
        "label",
    ]
    pretrained = ExtractionJob(ModelSpec("whisper", device="cpu", seed=3), Path("m.jsonl"), Path("out"))
    assert pretrained.store_config([], "c", None)["seed"] is None  # the seed matters only to random weights
    assert pretrained.store_config([], "c", None)["label"] == "whisper-large-v3"  # the family's reference checkpoint
    labelled = ExtractionJob(ModelSpec("whisper", device="cpu"), Path("m.jsonl"), Path("out"), label="wl3")
    assert labelled.store_config([], "c", None)["label"] == "wl3"


def test_transcription_settings_default_trim_and_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sha256 = hashlib.sha256(_manifest(tmp_path).read_bytes()).hexdigest()
    spec = ModelSpec("whisper", "bundled-base", device="cpu")
    asr = TranscriptionJob(spec, Path("m.jsonl"), Path("hyps/a.jsonl"), "asr")
    st = TranscriptionJob(
        spec, Path("m.jsonl"), Path("hyps/b.jsonl"), "st", tgt_lang="es", name="whisper-base", options=GenerationOptions(num_beams=1, decoder="nllb")
    )
    assert (asr.trim_seconds, st.trim_seconds) == (30.0, 60.0)
    assert asr.settings_path == Path("hyps/a.jsonl.settings.json")
    settings = st.settings("/weights/whisper-base", {"num_beams": 1}, fingerprint="0123456789abcdef")
    assert list(settings) == [
        "model",
        "family",
        "checkpoint",
        "revision",
        "model_fingerprint",
        "task",
        "tgt_lang",
        "dtype",
        "max_seconds",
        "decoding",
        "decoder",
        "manifest",
        "manifest_sha256",
        "provenance",
    ]
    assert (settings["model"], settings["tgt_lang"], settings["max_seconds"], settings["decoder"]) == ("whisper-base", "es", 60.0, None)
    assert settings["manifest_sha256"] == sha256
    assert asr.settings("/weights/whisper-base", {}, fingerprint=None)["model"] == "whisper-base"  # no name: the label of the family and checkpoint
    assert settings["model_fingerprint"] == "0123456789abcdef"
