"""The store owns its format: one typed record of a part's attributes (``StoreAttributes``), stores written
before it read the same, no library module outside ``extract/store.py`` touches HDF5, and the two frame
counts (stored frames, speech frames) are named and returned as their names say."""

import ast
import gzip
import json
import math
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
import soundfile

from extract.families import Extractor, tiny_extractor
from extract.manifest import Utterance
from extract.runner import run_extraction
from extract.store import (
    DamagedPartError,
    PartWriter,
    ShardReader,
    StoreAttributes,
    content_checksum,
    part_attributes,
    part_ids,
    recorded_checksum,
)
from tests.paths import CHECKOUT, FIXTURES

ROOT = CHECKOUT
FIXTURE = FIXTURES / "store-1c09a90.h5.gz"
PART = "shard0000of0001-part00000.h5"
SITES = ["encoder.layer.0", "encoder.final"]
FIXTURE_CONFIG = {
    "model": "whisper",
    "checkpoint": "tiny-random",
    "label": "whisper-tiny-random",
    "sites": SITES,
    "keep_padding": False,
    "random_init": False,
    "manifest": "fixture.jsonl",
    "manifest_sha256": "0" * 64,
}
WRITER_SET = {"complete", "utterances", "content_sha256", "data_digest"}


def _fixture_store(folder: Path) -> Path:
    """The committed store, written by the code at commit 1c09a90 (before ``StoreAttributes``): tiny random
    Whisper, sites ``encoder.layer.0`` and ``encoder.final``, float16; utterance ``a`` (0.5 s of noise, 25
    frames), ``b`` (0.3 s, 15 frames) and ``c`` (its audio missing: skipped), config :data:`FIXTURE_CONFIG`."""
    folder.mkdir(parents=True)
    with gzip.open(FIXTURE) as packed, open(folder / PART, "wb") as part:
        shutil.copyfileobj(packed, part)
    return folder


def _corpus(folder: Path, seconds: dict[str, float | None]) -> list[Utterance]:
    rng = np.random.default_rng(7)
    folder.mkdir(parents=True, exist_ok=True)
    utterances = []
    for name, length in seconds.items():
        path = folder / f"{name}.wav"
        if length is not None:
            soundfile.write(path, (0.1 * rng.standard_normal(round(length * 16_000))).astype(np.float32), 16_000)
        utterances.append(Utterance(id=name, audio=str(path), language="en", text="x", gender="female", speaker=f"s{name}", split="train", dataset="fixture"))
    return utterances


# --- the typed record -----------------------------------------------------------------------------


def test_a_store_written_before_the_record_reads_through_it(tmp_path):
    reader = ShardReader(_fixture_store(tmp_path / "old"))
    info = reader.info
    assert (info.family, info.model_id, info.revision, info.model_dtype, info.storage_dtype) == ("whisper", "tiny-random-whisper", "", "float32", "float16")
    assert info.site_modules == {"encoder.layer.0": "model.encoder.layers.0:output", "encoder.final": "model.encoder.layer_norm:output"}
    assert info.frame_rates == {"encoder.layer.0": 50.0, "encoder.final": 50.0}
    assert info.frame_rate("encoder.final") == 50.0 and math.isnan(info.frame_rate("nowhere"))
    assert info.config == FIXTURE_CONFIG
    assert (info.package_version, info.git_commit) == ("0.1.0", "1c09a902e3b87f2dbd1c2de48b84e66f1509c143")
    assert [entry["id"] for entry in reader.skipped()] == ["c"] and reader.skipped()[0]["error"] == "AudioMissingError"
    assert info.audio_notes == {} and info.extra == {}
    assert reader.sites == SITES and reader.ids == ["b", "a"]
    for site in SITES:
        assert list(reader.stored_lengths(site)) == [15, 25] and list(reader.speech_lengths(site)) == [15, 25]
        assert reader.get(site, "a").shape == (25, 16)


def test_the_record_writes_back_the_attributes_it_read_byte_for_byte(tmp_path):
    part = _fixture_store(tmp_path / "old") / PART
    with h5py.File(part) as handle:
        raw = {key: handle.attrs[key] for key in handle.attrs if key not in WRITER_SET}
    written = part_attributes(part).to_attrs()
    assert set(written) == set(raw)
    for key, value in written.items():
        assert type(value) is type(raw[key]) and value == raw[key], key
    assert part_ids(part) == ["b", "a"]
    with h5py.File(part) as handle:
        assert recorded_checksum(part) == handle.attrs["content_sha256"] == content_checksum(handle)


def test_a_store_written_now_has_the_fixtures_attributes_and_encodings(tmp_path):
    utterances = _corpus(tmp_path / "audio", {"a": 0.5, "b": 0.3, "c": None})
    run_extraction(tiny_extractor("whisper"), utterances, SITES, tmp_path / "new", config=FIXTURE_CONFIG, show_progress=False)
    raw = {}
    for folder in (_fixture_store(tmp_path / "old"), tmp_path / "new"):
        with h5py.File(folder / PART) as handle:
            raw[folder.name] = {key: handle.attrs[key] for key in handle.attrs}
    old, new = raw["old"], raw["new"]
    assert set(new) == set(old) | {"data_digest", "format_version", "manifest_utterances"} and new["data_digest"] == "xxh3_128"  # sha256 when absent
    assert new["format_version"] == 2 and new["manifest_utterances"] == 3  # labels in the checksum; what a complete store holds
    for key in ("config", "site_modules", "frame_rates", "family", "model_id", "revision", "model_dtype", "storage_dtype", "audio_notes", "utterances"):
        assert new[key] == old[key], key
    assert [entry["id"] for entry in json.loads(new["skipped"])] == ["c"]
    assert all(isinstance(new[key], str) for key in ("config", "site_modules", "frame_rates", "skipped", "audio_notes"))


def test_attributes_round_trip_and_extra_ones_are_kept(tmp_path):
    attributes = StoreAttributes(
        model_id="m",
        family="praat",
        site_modules={"f0": "praat:To Pitch"},
        frame_rates={"f0": float("nan")},
        config={"label": "f0", "keep_padding": False},
        skipped=[{"id": "x", "reason": "unvoiced"}],
        extra={"pitch_ranges": {"s1": {"floor": 75.0}}},
    )
    with PartWriter(tmp_path / "p.h5", {"f0": 2}, "float32", attributes) as writer:
        writer.add("u", {"f0": np.ones((1, 2), np.float32)}, {})
    read = part_attributes(tmp_path / "p.h5")
    assert read.config == attributes.config and read.skipped == attributes.skipped and read.site_modules == attributes.site_modules
    assert math.isnan(read.frame_rate("f0"))
    assert json.loads(read.extra["pitch_ranges"]) == {"s1": {"floor": 75.0}}
    assert (read.revision, read.audio_notes, read.storage_dtype) == (None, None, None)  # not recorded, so not written either
    with h5py.File(tmp_path / "p.h5") as handle:
        assert not {"revision", "audio_notes", "storage_dtype"} & set(handle.attrs)


def test_a_raw_attribute_dict_is_decoded_before_it_is_written(tmp_path):
    with PartWriter(tmp_path / "p.h5", {"s": 2}, "float32", {"config": '{"keep_padding": true}', "frame_rates": {"s": 50.0}, "skipped": "[]"}) as writer:
        writer.add("u", {"s": np.ones((3, 2), np.float32)}, {})
    info = ShardReader(tmp_path / "p.h5").info
    assert info.config == {"keep_padding": True} and info.frame_rates == {"s": 50.0} and info.skipped == []


def test_a_config_attribute_that_is_not_json_is_a_damaged_part(tmp_path):
    with PartWriter(tmp_path / "p.h5", {"s": 2}, "float32", {}) as writer:
        writer.add("u", {"s": np.ones((3, 2), np.float32)}, {})
    with h5py.File(tmp_path / "p.h5", "a") as handle:
        handle.attrs["config"] = "{not json"
    with pytest.raises(DamagedPartError, match=r"p\.h5: damaged part \(attribute config is not JSON"):
        ShardReader(tmp_path / "p.h5")


# --- one home for HDF5 --------------------------------------------------------------------------------


def _hdf5_users(package: Path) -> list[Path]:
    """Modules of ``package`` that import h5py (at any depth in the module)."""
    users = []
    for module in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(name == "h5py" or name.startswith("h5py.") for name in names):
                users.append(module)
                break
    return users


def test_no_library_module_outside_the_store_opens_hdf5():
    users = [module.relative_to(ROOT).as_posix() for package in ("extract", "probing", "experiments", "benchmarks") for module in _hdf5_users(ROOT / package)]
    assert users and all(user.startswith("extract/store/") for user in users), users


def test_the_hdf5_scan_sees_an_import_inside_a_function(tmp_path):
    (tmp_path / "m.py").write_text("def f():\n    import h5py.h5f\n")
    (tmp_path / "n.py").write_text("from h5py import File\n")
    (tmp_path / "o.py").write_text("import numpy  # h5py in a comment\n")
    assert [module.name for module in _hdf5_users(tmp_path)] == ["m.py", "n.py"]


# --- stored frames and speech frames -------------------------------------------------------------------

SECONDS = {"a": 0.5, "b": 0.77, "c": 1.5}  # 8000, 12320 and 24000 samples
SPEECH = {"a": 25, "b": 39, "c": 75}  # ceil(samples / 320): 25, ceil(38.5) = 39, 75


@pytest.mark.parametrize("keep_padding", [False, True])
def test_stored_and_speech_frames_per_utterance(tmp_path, keep_padding):
    utterances = _corpus(tmp_path / "audio", SECONDS)
    extractor = tiny_extractor("whisper", keep_padding=keep_padding)
    run_extraction(extractor, utterances, SITES, tmp_path / "store", config={"keep_padding": keep_padding}, show_progress=False)
    reader = ShardReader(tmp_path / "store")
    ids = list(SECONDS)
    stored = {name: 1500 if keep_padding else SPEECH[name] for name in ids}  # Whisper's whole 30 s window when padding is kept
    for site in SITES:
        assert list(reader.speech_lengths(site, ids)) == [SPEECH[name] for name in ids]
        assert list(reader.stored_lengths(site, ids)) == [stored[name] for name in ids]
        assert [reader.stored_frames(site, name) for name in ids] == [stored[name] for name in ids]
        assert [reader.length(site, name) for name in ids] == [stored[name] for name in ids]  # the documented old name
        assert [len(reader.get(site, name)) for name in ids] == [stored[name] for name in ids]
        assert list(reader.leading(site, 60, ids)[1]) == [min(60, stored[name]) for name in ids]
        expected_means = np.stack([reader.get(site, name)[: SPEECH[name]].mean(axis=0) for name in ids])
        np.testing.assert_allclose(reader.means(site, ids), expected_means, rtol=1e-6)  # over speech frames, padding left out
    audios = [soundfile.read(u.audio, dtype="float32")[0] for u in utterances]
    prepared = extractor.prepare(audios)
    assert list(extractor.stored_lengths("encoder.final", prepared, {})) == [stored[name] for name in ids]
    assert [extractor.speech_frames("encoder.final", len(audio), 1500) for audio in audios] == [SPEECH[name] for name in ids]


def test_a_family_written_against_the_old_name_valid_lengths_still_extracts():
    """docs/contributing.md told family authors to implement ``valid_lengths``: such a family is not abstract and extracts."""
    whisper = tiny_extractor("whisper")
    borrowed = type(whisper)
    with pytest.warns(DeprecationWarning, match="OldStyle.valid_lengths is deprecated: name it stored_lengths"):

        class OldStyle(Extractor):
            family = "old-style"
            encoder_path = whisper.encoder_path
            encoder, site_table, prepare, encode, frame_rate = borrowed.encoder, borrowed.site_table, borrowed.prepare, borrowed.encode, borrowed.frame_rate

            def valid_lengths(self, site, prepared, captured):
                return np.full(len(prepared.samples), 3)

    states = OldStyle(whisper.model, whisper.processor).extract([np.full(8000, 0.05, np.float32)], ["encoder.final"])
    assert states[0]["encoder.final"].shape == (3, 16)
