"""A local model is identified by its content (extract.fingerprint, ModelSpec.fingerprint): the same
folder through a symlink, a relative path or a copy is one model, and weights changed in place are
another, for a resumed store, an intervention, a transcription's settings and a fine-tuning run."""

import json
import os

import numpy as np
import pytest
import torch

from experiments import extract as extract_cli
from experiments.finetuning.run import FinetuneConfig, FinetuneError, _check_run_file, _settings
from extract import fingerprint
from extract.families import FAMILIES
from extract.interventions import Intervener, Intervention, InterventionError, runtime_model_identity, store_model_identity
from extract.manifest import Utterance, write_manifest
from extract.runner import SettingsMismatchError, check_settings
from extract.spec import ModelSpec, load_extractor
from extract.store import ShardReader

SITE = "encoder.layer.0"


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPEECH_GENDER_CACHE", str(tmp_path / "cache"))


def _save_whisper(folder, seed=None):
    """The tiny random Whisper saved as a checkpoint folder; ``seed``: its weights drawn again."""
    model, processor = FAMILIES["whisper"].tiny_model()
    if seed is not None:
        torch.manual_seed(seed)
        for parameter in model.parameters():
            parameter.data.normal_(0, 0.05)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def _flip_a_weight_byte_keeping_size_and_mtime(folder):
    path = folder / "model.safetensors"
    status = path.stat()
    data = bytearray(path.read_bytes())
    data[-3] ^= 1
    path.write_bytes(bytes(data))
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))
    assert path.stat().st_size == status.st_size and path.stat().st_mtime_ns == status.st_mtime_ns


def test_the_fingerprint_follows_the_content_not_the_path(tmp_path, monkeypatch):
    folder = _save_whisper(tmp_path / "models" / "w")
    first = fingerprint.folder_fingerprint(folder)
    assert len(first) == 16 and int(first, 16) >= 0
    (tmp_path / "link").symlink_to(folder)
    copy = tmp_path / "copy"
    copy.mkdir()
    for path in folder.iterdir():
        (copy / path.name).write_bytes(path.read_bytes())
    monkeypatch.chdir(tmp_path)
    assert {fingerprint.folder_fingerprint(p) for p in ("models/w", "./models/w/", "link", copy)} == {first}
    (folder / "README.md").write_text("notes")  # not a model file
    assert fingerprint.folder_fingerprint(folder) == first
    _flip_a_weight_byte_keeping_size_and_mtime(folder)
    changed = fingerprint.folder_fingerprint(folder)
    (folder / "config.json").write_text((folder / "config.json").read_text().replace('"d_model": 16', '"d_model": 16 '))
    assert len({first, changed, fingerprint.folder_fingerprint(folder)}) == 3 and fingerprint.folder_fingerprint(copy) == first


def test_each_file_is_hashed_once_then_read_from_the_cache(tmp_path, monkeypatch):
    folder = _save_whisper(tmp_path / "w")
    first = fingerprint.folder_fingerprint(folder)
    cache = json.loads((tmp_path / "cache" / fingerprint.CACHE_NAME).read_text())
    weights = cache[str((folder / "model.safetensors").resolve())]
    assert weights["size"] == (folder / "model.safetensors").stat().st_size and len(weights["sha256"]) == 64

    def no_hashing(path):
        raise AssertionError(f"{path} was hashed again")

    monkeypatch.setattr(fingerprint, "file_sha256", no_hashing)
    assert fingerprint.folder_fingerprint(tmp_path / "." / "w") == first
    (folder / "config.json").touch()  # a new modification time: hashed again
    with pytest.raises(AssertionError, match="config.json was hashed again"):
        fingerprint.folder_fingerprint(folder)


def test_the_spec_names_hub_models_by_id_and_revision(tmp_path):
    assert ModelSpec("whisper", "openai/whisper-tiny", device="cpu").fingerprint() == "openai/whisper-tiny@main"
    assert ModelSpec("whisper", "openai/whisper-tiny", "abc123", device="cpu").fingerprint() == "openai/whisper-tiny@abc123"
    folder = _save_whisper(tmp_path / "w")
    assert ModelSpec("whisper", str(folder), device="cpu").fingerprint() == fingerprint.folder_fingerprint(folder)


def _corpus(tmp_path, tone, count=4):
    utterances = [
        Utterance(id=f"u{i}", audio=str(tone(f"u{i}.wav", seconds=0.4 + 0.1 * i)), language="en", text="x", gender=("female", "male")[i % 2], speaker=f"s{i}")
        for i in range(count)
    ]
    manifest = tmp_path / "m.jsonl"
    write_manifest(manifest, utterances)
    return manifest


def _extract(checkpoint, manifest, out, capsys):
    argv = ["--family", "whisper", "--checkpoint", str(checkpoint), "--manifest", str(manifest), "--sites", SITE]
    code = extract_cli.main([*argv, "--utterances-per-part", "2", "--storage-dtype", "float32", "--device", "cpu", "--quiet", "--out", str(out)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err.strip()


def test_a_resumed_store_is_refused_on_changed_weights_and_accepted_through_another_path(tmp_path, tone, capsys, monkeypatch):
    """#132 and #88 for stores: weights redrawn at the same path refuse the resume, naming both
    fingerprints; the same folder through a symlink or a relative path resumes it."""
    folder = _save_whisper(tmp_path / "w")
    manifest, store = _corpus(tmp_path, tone), tmp_path / "store"
    assert _extract(folder, manifest, store, capsys)[0] == 0
    before = fingerprint.folder_fingerprint(folder)
    assert ShardReader(store).info.config["model_fingerprint"] == before
    second = store / "shard0000of0001-part00001.h5"
    second.unlink()  # as a run killed after its first part leaves it
    (tmp_path / "link").symlink_to(folder)
    code, printed, _ = _extract(tmp_path / "link", manifest, store, capsys)
    assert code == 0 and "wrote 2 utterances" in printed and "2 already done" in printed
    reader = ShardReader(store)  # parts written through two spellings are one configuration
    assert len(reader) == 4 and store_model_identity(reader, SITE)["model_fingerprint"] == before
    monkeypatch.chdir(tmp_path)
    for spelling in ("w", "./w/"):
        code, printed, _ = _extract(spelling, manifest, store, capsys)
        assert code == 0 and "wrote 0 utterances" in printed and "4 already done" in printed
    second.unlink()
    _save_whisper(folder, seed=123)
    after = fingerprint.folder_fingerprint(folder)
    code, _, error = _extract(folder, manifest, store, capsys)
    assert code == 2 and len(error.splitlines()) == 1 and f"model_fingerprint: '{before}' vs '{after}'" in error, error
    assert not second.exists()


def _steer_file(tmp_path, extractor, name="s.safetensors"):
    identity = runtime_model_identity(extractor, SITE) | {"hidden_size": 16}
    steer = Intervention(
        "steer", SITE, identity, {"path": "s", "content_sha256": "x"}, {"direction": np.ones(16)}, alpha=0.5, target="female", fit={"method": "mean-diff"}
    )
    return steer.save(tmp_path / name)


def test_an_intervention_follows_the_weights_not_the_path(tmp_path, monkeypatch):
    """#88: the same folder through a symlink or a relative path is accepted; #87: its weights
    changed in place are refused, naming both fingerprints."""
    folder = _save_whisper(tmp_path / "w")
    loaded = load_extractor(ModelSpec("whisper", str(folder), device="cpu"))
    assert loaded.fingerprint == fingerprint.folder_fingerprint(folder)
    path = _steer_file(tmp_path, loaded)
    (tmp_path / "link").symlink_to(folder)
    monkeypatch.chdir(tmp_path)
    for spelling in ("link", "w", "./w/"):
        Intervener([path]).check(load_extractor(ModelSpec("whisper", spelling, device="cpu")))
    before = loaded.fingerprint
    _flip_a_weight_byte_keeping_size_and_mtime(folder)
    changed = load_extractor(ModelSpec("whisper", "w", device="cpu"))
    with pytest.raises(InterventionError, match=f"model_fingerprint: file '{before}' vs loaded '{changed.fingerprint}'"):
        Intervener([path]).check(changed)
    built_in_code = FAMILIES["whisper"].tiny_extractor()  # no fingerprint: refused, not compared by name
    with pytest.raises(InterventionError, match=f"model_fingerprint: file '{before}' vs loaded None"):
        Intervener([path]).check(built_in_code)


def test_transcription_settings_compare_the_fingerprint_not_the_spelling(tmp_path):
    out, path = tmp_path / "h.jsonl", tmp_path / "h.jsonl.settings.json"
    settings = {"model": "w", "checkpoint": "/models/w", "model_fingerprint": "0123456789abcdef", "decoding": {}}
    check_settings(path, settings, out)
    out.write_text('{"id": "a", "hypothesis": "x"}\n')
    check_settings(path, settings | {"checkpoint": "../models/w/"}, out)
    with pytest.raises(SettingsMismatchError, match=r"\(model_fingerprint: '0123456789abcdef' vs 'fedcba9876543210'\)"):
        check_settings(path, settings | {"model_fingerprint": "fedcba9876543210"}, out)
    without = {key: value for key, value in settings.items() if key != "model_fingerprint"}
    with pytest.raises(SettingsMismatchError, match="checkpoint: '/models/w' vs 'other'"):  # no fingerprint: the spelling is all there is
        check_settings(path, without | {"checkpoint": "other"}, out)


def test_settings_of_a_run_that_wrote_no_row_do_not_block_the_next(tmp_path):
    """#91: a run refused at its first forward pass leaves an empty output and its settings; the
    corrected rerun replaces them. Once a row is written, the settings bind."""
    out, path = tmp_path / "h.jsonl", tmp_path / "h.jsonl.settings.json"
    failed = {"model": "m", "interventions": [{"path": "/x.safetensors"}]}
    check_settings(path, failed, out)
    out.touch()
    corrected = {"model": "m"}
    check_settings(path, corrected, out)
    assert json.loads(path.read_text()) == corrected
    out.write_text('{"id": "a", "hypothesis": "x"}\n{"id": "b", "hypo')  # one row and a cut line
    with pytest.raises(SettingsMismatchError, match="interventions"):
        check_settings(path, failed, out)


def test_a_fine_tuning_run_records_the_base_model_and_refuses_changed_weights(tmp_path, monkeypatch):
    folder = _save_whisper(tmp_path / "w")
    config = FinetuneConfig(manifest="m.jsonl", female_share=0.5, total=4, checkpoint=str(folder))
    settings = _settings(config, ["a", "b"])
    before = settings["model_fingerprint"]
    assert before == fingerprint.folder_fingerprint(folder)
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text(json.dumps(settings))
    (out / "val_history.jsonl").write_text('{"step": 0}\n{"step": 8}\n')  # a run that trained, so it resumes rather than restarts
    (out / "checkpoints").mkdir()
    torch.save({"state_dict": {}, "loops": {}, "global_step": 8, "random_state": {}}, out / "checkpoints" / "last.ckpt")
    (tmp_path / "link").symlink_to(folder)
    _check_run_file(out, _settings(FinetuneConfig(manifest="m.jsonl", female_share=0.5, total=4, checkpoint=str(tmp_path / "link")), ["a", "b"]), True)
    _flip_a_weight_byte_keeping_size_and_mtime(folder)
    after = _settings(config, ["a", "b"])
    with pytest.raises(FinetuneError, match=f"model_fingerprint: '{before}' vs '{after['model_fingerprint']}' differ"):
        _check_run_file(out, after, True)
