"""The store's guarantees: speech lengths beside kept padding, exclusive writers, verified content,
finite values, one configuration per store, a clean end on a full disk."""

import errno
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import time
from unittest import mock

import h5py
import numpy as np
import pytest
import torch

from experiments import extract as cli
from extract.diskfull import is_disk_full
from extract.families import tiny_extractor
from extract.manifest import write_manifest
from extract.runner import run_extraction
from extract.stage_options import ExtractOptions
from extract.store import PartWriter, ShardReader, StoreError, content_checksum
from tests.corpus import write_corpus
from tests.paths import CHECKOUT
from tests.terminated import terminate_halfway

SITE = "encoder.final"
WHISPER_FRAMES_PER_SECOND = 50.0


def _padded_whisper_like_part(path, samples_per_utterance, frames=1500, dim=4, with_valid=True, keep_padding=True):
    """A part as a ``--keep-padding`` Whisper run writes it: every utterance stored with ``frames`` frames."""
    attributes = {"model_id": "synthetic", "skipped": "[]", "frame_rates": {SITE: WHISPER_FRAMES_PER_SECOND}, "config": {"keep_padding": keep_padding}}
    rng = np.random.default_rng(0)
    with PartWriter(path, {SITE: dim}, "float32", attributes) as writer:
        for index, samples in enumerate(samples_per_utterance):
            speech = math.ceil(samples / 320)
            valid = {SITE: speech} if with_valid else None
            writer.add(
                f"u{index}",
                {SITE: rng.standard_normal((frames, dim)).astype(np.float32)},
                {"gender": "female", "duration": samples / 16_000},
                speech_frames=valid,
            )
    if not with_valid:  # a part written before ``valid`` existed, and so before its checksum and part formats
        _made_old(path)
    return path


def _made_old(path):
    """The part as a writer before ``valid`` (and the content checksum, which covers it) wrote it."""
    with h5py.File(path, "a") as handle:
        del handle[f"sites/{SITE}/valid"]
        for key in ("content_sha256", "format_version", "data_digest"):
            del handle.attrs[key]


def test_a_padded_store_reports_speech_lengths_while_stored_lengths_stay_padded(tmp_path):
    samples = [16_000, 8_321, 480_000, 640]  # 50, ceil(26.003) = 27, the full 30 s window, 2
    reader = ShardReader(_padded_whisper_like_part(tmp_path / "part-00000.h5", samples))
    np.testing.assert_array_equal(reader.speech_lengths(SITE), [50, 27, 1500, 2])
    np.testing.assert_array_equal(reader.speech_lengths(SITE, ["u3", "u0"]), [2, 50])
    assert reader.speech_lengths(SITE).dtype == np.int64
    assert reader.length(SITE, "u0") == 1500
    assert list(reader.leading(SITE, 40)[1]) == [40, 40, 40, 40]


def test_an_old_part_without_valid_derives_speech_lengths_from_duration(tmp_path):
    samples = [16_000, 8_321, 480_000, 640, 16_000 * 31]  # the last one is longer than the window: capped
    path = _padded_whisper_like_part(tmp_path / "part-00000.h5", samples, with_valid=False)
    with h5py.File(path) as handle:
        assert "valid" not in handle[f"sites/{SITE}"]
    np.testing.assert_array_equal(ShardReader(path).speech_lengths(SITE), [50, 27, 1500, 2, 1500])


def test_an_old_part_without_kept_padding_reports_its_stored_lengths(tmp_path):
    path = tmp_path / "part-00000.h5"
    with PartWriter(path, {SITE: 2}, "float32", {"config": {"keep_padding": False}, "frame_rates": {SITE: 50.0}}) as writer:
        writer.add("a", {SITE: np.ones((7, 2), np.float32)}, {"duration": 100.0})
    _made_old(path)
    assert list(ShardReader(path).speech_lengths(SITE)) == [7]


def test_speech_frames_beyond_the_stored_frames_are_refused(tmp_path):
    with PartWriter(tmp_path / "p.h5", {SITE: 2}, "float32", {}) as writer:
        with pytest.raises(StoreError, match="utterance a: speech frames 8 at site encoder.final"):
            writer.add("a", {SITE: np.ones((7, 2), np.float32)}, {}, speech_frames={SITE: 8})
        writer.add("b", {SITE: np.ones((7, 2), np.float32)}, {})
    assert list(ShardReader(tmp_path / "p.h5").speech_lengths(SITE)) == [7]


def _corpus(tmp_path, seconds=(0.5, 1.13, 0.77, 1.5)):
    rng = np.random.default_rng(1)
    return write_corpus(tmp_path, [(0.1 * rng.standard_normal(int(length * 16_000))).astype(np.float32) for length in seconds])


def test_keep_padding_extraction_records_the_unpadded_lengths(tmp_path):
    utterances = _corpus(tmp_path)
    sites = ["encoder.embed", "encoder.layer.1", "encoder.final"]
    options = dict(show_progress=False, options=ExtractOptions(storage_dtype="float32", utterances_per_part=3))
    run_extraction(tiny_extractor("whisper"), utterances, sites, tmp_path / "plain", config={"keep_padding": False}, **options)
    padded_extractor = tiny_extractor("whisper", keep_padding=True)
    run_extraction(padded_extractor, utterances, sites, tmp_path / "padded", config={"keep_padding": True}, **options)
    plain, padded = ShardReader(tmp_path / "plain"), ShardReader(tmp_path / "padded")
    window = padded_extractor.encoder.config.max_source_positions
    for site in sites:
        unpadded = [plain.length(site, f"u{index}") for index in range(4)]
        assert unpadded == [math.ceil(u_seconds * 50) for u_seconds in (0.5, 1.13, 0.77, 1.5)]
        np.testing.assert_array_equal(padded.speech_lengths(site, [f"u{index}" for index in range(4)]), unpadded)
        np.testing.assert_array_equal(plain.speech_lengths(site), [plain.length(site, i) for i in plain.ids])
        assert {padded.length(site, i) for i in padded.ids} == {window}


# --- concurrent writers -------------------------------------------------------------------------

WRITER = r"""
import json, sys, time
from pathlib import Path
from extract.manifest import read_manifest
from extract.runner import run_extraction
from extract.stage_options import ExtractOptions
from extract.store import StoreError
from extract.families import tiny_extractor

manifest, out, started, ready, wait_for = sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]), sys.argv[5]
extractor = tiny_extractor("whisper")
real_extract, calls = extractor.extract, []

def extract_after_the_other_writer_is_ready(*args, **kwargs):
    calls.append(1)
    if len(calls) >= 2:  # the first batch is written: this writer's temporary file exists
        started.touch()
        while wait_for and not Path(wait_for).exists():
            time.sleep(0.05)
        time.sleep(0.5)
    return real_extract(*args, **kwargs)

extractor.extract = extract_after_the_other_writer_is_ready
ready.touch()
try:
    options = ExtractOptions(storage_dtype="float32", batch_seconds=1.0, utterances_per_part=10)
    report = run_extraction(extractor, read_manifest(manifest), ["encoder.layer.0", "encoder.final"], out, options, config={"test": 1}, show_progress=False)
except StoreError as error:
    print(f"error: {error}", file=sys.stderr)
    sys.exit(2)
print(json.dumps({"written": report.written, "resumed": report.resumed}))
"""


def _start_writer(tmp_path, manifest, out, name, wait_for=""):
    started, ready = tmp_path / f"{name}.started", tmp_path / f"{name}.ready"
    env = {**os.environ, "PYTHONPATH": str(CHECKOUT)}
    process = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(manifest), str(out), str(started), str(ready), str(wait_for)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    return process, started


def _wait_for(path, process, timeout=120.0):
    deadline = time.time() + timeout
    while not path.exists():
        assert process.poll() is None, process.communicate()
        assert time.time() < deadline, "the first writer never started"
        time.sleep(0.05)


def test_two_processes_writing_one_store_lose_nothing(tmp_path):
    utterances = _corpus(tmp_path, seconds=(0.5, 0.6, 0.7, 0.8, 0.9, 1.0))
    manifest = write_manifest(tmp_path / "m.jsonl", utterances)
    out = tmp_path / "store"
    first, first_started = _start_writer(tmp_path, manifest, out, "first", wait_for=tmp_path / "second.ready")
    _wait_for(first_started, first)
    second, _ = _start_writer(tmp_path, manifest, out, "second")
    second_out, second_err = second.communicate(timeout=300)
    first_out, first_err = first.communicate(timeout=300)
    assert first.returncode == 0, first_err
    assert json.loads(first_out)["written"] == len(utterances)
    reader = ShardReader(out)
    assert sorted(reader.ids) == sorted(u.id for u in utterances)
    reference = run_extraction(
        tiny_extractor("whisper"),
        utterances,
        ["encoder.layer.0", "encoder.final"],
        tmp_path / "alone",
        config={"test": 1},
        show_progress=False,
        options=ExtractOptions(storage_dtype="float32", batch_seconds=1.0, utterances_per_part=10),
    )
    alone = ShardReader(tmp_path / "alone")
    assert reference.written == len(utterances)
    for site in reader.sites:
        for utterance_id in reader.ids:
            states = reader.get(site, utterance_id)
            assert np.abs(states).max(axis=1).min() > 0, f"all-zero frames at {site} {utterance_id}"
            np.testing.assert_allclose(states, alone.get(site, utterance_id), atol=1e-5)
    assert not list(out.glob("*.lock")) and not list(out.glob("*.tmp"))
    assert second.returncode == 2, second_err
    assert f"is being written by pid {first.pid} on host" in second_err and "another extraction writes to this --out" in second_err


def _dead_pid():
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_stale_claim_is_reported_and_left_alone(tmp_path):
    utterances = _corpus(tmp_path, seconds=(0.5, 0.6))
    out = tmp_path / "store"
    out.mkdir()
    lock = out / "shard0000of0001-part00000.h5.lock"
    lock.write_text(json.dumps({"host": socket.gethostname(), "pid": _dead_pid(), "since": "yesterday"}))
    with pytest.raises(StoreError, match=r"stale claim .*part00000.h5.lock by pid \d+ .*that process is gone.*--reclaim-stale"):
        run_extraction(tiny_extractor("whisper"), utterances, [SITE], out, config={}, show_progress=False)
    assert lock.exists() and not list(out.glob("*.h5"))
    lock.write_text(json.dumps({"host": "another-node", "pid": 12345, "since": "now"}))
    with pytest.raises(StoreError, match="being written by pid 12345 on host another-node"):
        run_extraction(tiny_extractor("whisper"), utterances, [SITE], out, config={}, show_progress=False, reclaim_stale=True)
    assert lock.exists() and not list(out.glob("*.h5"))  # a claim from another host is never reclaimed
    lock.unlink()
    report = run_extraction(tiny_extractor("whisper"), utterances, [SITE], out, config={}, show_progress=False)
    assert report.written == 2 and not list(out.glob("*.lock"))


def test_reclaim_stale_takes_over_a_dead_local_claim_and_says_so(tmp_path, capsys):
    utterances = _corpus(tmp_path, seconds=(0.5, 0.6))
    out = tmp_path / "store"
    out.mkdir()
    lock = out / "shard0000of0001-part00000.h5.lock"
    lock.write_text(json.dumps({"host": socket.gethostname(), "pid": _dead_pid(), "since": "yesterday"}))
    (out / "shard0000of0001-part00000.h5.tmp").write_bytes(b"half a part from the killed run")
    report = run_extraction(tiny_extractor("whisper"), utterances, [SITE], out, config={}, show_progress=False, reclaim_stale=True)
    assert report.written == 2 and not list(out.glob("*.lock")) and not list(out.glob("*.tmp"))
    assert "reclaimed the stale claim of pid" in capsys.readouterr().out


def test_a_leftover_temporary_file_is_never_truncated(tmp_path):
    path = tmp_path / "part-00000.h5"
    leftover = tmp_path / "part-00000.h5.tmp"
    leftover.write_bytes(b"another writer's bytes")
    with pytest.raises(StoreError, match="part-00000.h5.tmp already exists"):
        PartWriter(path, {SITE: 2}, "float32", {})
    assert leftover.read_bytes() == b"another writer's bytes"
    assert not (tmp_path / "part-00000.h5.lock").exists()  # the refused writer released its claim


def test_content_changed_on_disk_before_completion_is_caught(tmp_path, monkeypatch):
    path = tmp_path / "part-00000.h5"
    writer = PartWriter(path, {SITE: 4}, "float32", {})
    writer.add("a", {SITE: np.full((50, 4), 3.0, np.float32)}, {})
    write_index = PartWriter._write_index

    def overwritten_after_the_data(self):  # the states are written (at close, being buffered) before the index
        self.file.flush()
        chunk = self.file[f"sites/{SITE}/data"].id.get_chunk_info(0)
        with open(self.temporary, "r+b") as raw:  # what a second writer truncating the file does to the data
            raw.seek(chunk.byte_offset)
            raw.write(b"\0" * chunk.size)
        return write_index(self)

    monkeypatch.setattr(PartWriter, "_write_index", overwritten_after_the_data)
    with pytest.raises(StoreError, match="content read back differs from what was written"):
        writer.close()
    assert not path.exists() and not writer.temporary.exists() and not (tmp_path / "part-00000.h5.lock").exists()


def test_a_complete_part_carries_a_verifiable_checksum(tmp_path):
    path = tmp_path / "part-00000.h5"
    with PartWriter(path, {SITE: 3}, "float16", {}) as writer:
        writer.add("a", {SITE: np.arange(12, dtype=np.float32).reshape(4, 3)}, {})
    with h5py.File(path) as handle:
        assert handle.attrs["complete"] and content_checksum(handle) == handle.attrs["content_sha256"]
    with h5py.File(path, "a") as handle:
        handle[f"sites/{SITE}/data"][0, 0] = 7
    with h5py.File(path) as handle:
        assert content_checksum(handle) != handle.attrs["content_sha256"]


# --- one configuration per store -------------------------------------------------------------------


def test_parts_of_another_configuration_are_refused_at_write_time_and_by_the_reader(tmp_path):
    utterances = _corpus(tmp_path, seconds=(0.5, 0.6, 0.7))
    extractor = tiny_extractor("whisper")
    trained = {"random_init": False, "num_shards": 3}

    def extract_into(out: str, config: dict, **shards) -> None:
        run_extraction(extractor, utterances, [SITE], tmp_path / out, config=config, show_progress=False, options=ExtractOptions(**shards))

    for index in range(3):
        extract_into("store", trained, num_shards=3, shard_index=index)
    with pytest.raises(StoreError, match=r"shard0000of0003-part00000.h5.*another configuration.*num_shards: 3 vs 1"):
        extract_into("store", {**trained, "num_shards": 1})
    with pytest.raises(StoreError, match="random_init: False vs True"):
        extract_into("store", {**trained, "random_init": True}, num_shards=3)
    assert len(list((tmp_path / "store").glob("*.h5"))) == 3
    extract_into("random", {**trained, "random_init": True}, num_shards=3, shard_index=1)
    stray = tmp_path / "store" / "shard0001of0003-part00000.h5"
    stray.unlink()
    shutil.copy(tmp_path / "random" / "shard0001of0003-part00000.h5", stray)
    with pytest.raises(StoreError, match=r"parts from different configurations: .*shard0001of0003-part00000.h5 \(differs in random_init"):
        ShardReader(tmp_path / "store")


# --- finiteness ------------------------------------------------------------------------------------


def test_float16_overflow_is_refused_after_the_cast(tmp_path):
    states = np.ones((5, 2), np.float32)
    states[3, 1] = 70_000.0  # finite in float32, infinite in float16
    with PartWriter(tmp_path / "p.h5", {SITE: 2}, "float16", {}) as writer:
        with pytest.raises(StoreError, match=r"site encoder.final, utterance loud overflow float16 \(max \|value\| 70000.*--storage-dtype float32"):
            writer.add("loud", {SITE: states}, {})
        writer.add("quiet", {SITE: states / 10}, {})
    reader = ShardReader(tmp_path / "p.h5")
    assert reader.ids == ["quiet"] and np.isfinite(reader.get(SITE, "quiet")).all()
    with PartWriter(tmp_path / "q.h5", {SITE: 2}, "float32", {}) as writer:
        writer.add("loud", {SITE: states}, {})
    assert ShardReader(tmp_path / "q.h5").get(SITE, "loud").max() == 70_000.0


def test_the_extraction_cli_stops_on_float16_overflow(tmp_path, monkeypatch, capsys):
    manifest = write_manifest(tmp_path / "m.jsonl", _corpus(tmp_path, seconds=(0.5, 0.6)))
    extractor = tiny_extractor("whisper")
    with torch.no_grad():
        extractor.encoder.layer_norm.bias.fill_(1e5)
    monkeypatch.setattr("extract.spec.load_extractor", lambda spec, **options: extractor)
    code = cli.main(["--family", "whisper", "--manifest", str(manifest), "--sites", SITE, "--out", str(tmp_path / "s"), "--quiet"])
    error = capsys.readouterr().err.strip()
    assert code == 2 and error.startswith("error: values at site encoder.final, utterance u") and "overflow float16" in error
    assert len(error.splitlines()) == 1 and "--storage-dtype float32" in error
    assert not list((tmp_path / "s").glob("*.h5")) and not list((tmp_path / "s").glob("*.tmp")) and not list((tmp_path / "s").glob("*.lock"))


def test_readers_reject_non_finite_features_naming_part_site_and_utterance(tmp_path):
    path = tmp_path / "part-00000.h5"
    with PartWriter(path, {SITE: 2}, "float16", {}) as writer:
        writer.add("fine", {SITE: np.ones((3, 2), np.float32)}, {})
        writer.add("broken", {SITE: np.ones((4, 2), np.float32)}, {})
    with h5py.File(path, "a") as handle:  # as a store written before the check (and before its checksums) would hold it
        handle[f"sites/{SITE}/data"][5, 0] = np.inf
        for key in ("content_sha256", "format_version"):
            del handle.attrs[key]
    reader = ShardReader(path)
    assert reader.get(SITE, "fine").shape == (3, 2)
    message = r"part-00000.h5: non-finite values at site encoder.final for utterance broken"
    with pytest.raises(StoreError, match=message):
        reader.get(SITE, "broken")
    with pytest.raises(StoreError, match=message):
        reader.leading(SITE, 10)
    with pytest.raises(StoreError, match=message):
        reader.means(SITE)
    assert reader.means(SITE, ["fine"]).shape == (1, 2)


# --- a full disk -----------------------------------------------------------------------------------


def test_a_full_disk_ends_with_one_line_and_no_complete_part(tmp_path, monkeypatch, capsys):
    manifest = write_manifest(tmp_path / "m.jsonl", _corpus(tmp_path, seconds=(0.5, 0.6, 0.7)))
    monkeypatch.setattr("extract.spec.load_extractor", lambda spec, **options: tiny_extractor("whisper"))
    real_append, calls = PartWriter._append, {"n": 0}

    def append_until_full(self, site, array):  # one write per site and part here (states are buffered until close)
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_append(self, site, array)

    monkeypatch.setattr(PartWriter, "_append", append_until_full)
    out = tmp_path / "s"
    code = cli.main(["--family", "whisper", "--manifest", str(manifest), "--sites", SITE, "--out", str(out), "--quiet", "--utterances-per-part", "2"])
    error = capsys.readouterr().err.strip()
    assert code == 2 and len(error.splitlines()) == 1
    assert error.startswith("error: disk full while writing shard0000of0001-part00001.h5") and "free space and rerun" in error
    assert [p.name for p in out.glob("*.h5")] == ["shard0000of0001-part00000.h5"]  # the part finished before stays
    assert not list(out.glob("*.tmp")) and not list(out.glob("*.lock"))
    monkeypatch.setattr(PartWriter, "_append", real_append)
    assert cli.main(["--family", "whisper", "--manifest", str(manifest), "--sites", SITE, "--out", str(out), "--quiet", "--utterances-per-part", "2"]) == 0
    assert len(ShardReader(out)) == 3


def test_disk_full_is_recognised_as_python_and_hdf5_report_it():
    assert is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert is_disk_full(OSError("Can't write data (file write failed: ..., errno = 28, error message = 'No space left on device')"))
    assert not is_disk_full(OSError(errno.EACCES, "Permission denied"))
    assert not is_disk_full(ValueError("errno = 28"))


TERMINATED_CLI = r"""
import sys
from pathlib import Path
import extract.spec
from experiments import extract as cli
from extract.families import tiny_extractor
from tests.terminated import hanging_at_third_call

extractor = tiny_extractor("whisper")
extractor.extract = hanging_at_third_call(extractor.extract, Path(sys.argv[1]))
extract.spec.load_extractor = lambda spec, **options: extractor
sys.exit(cli.main(sys.argv[2:]))
"""


def test_sigterm_discards_the_open_part_and_releases_its_claim(tmp_path):
    manifest = write_manifest(tmp_path / "m.jsonl", _corpus(tmp_path, seconds=(0.5, 0.6, 0.7, 0.8)))
    out = tmp_path / "s"
    argv = [
        "--family",
        "whisper",
        "--manifest",
        str(manifest),
        "--sites",
        SITE,
        "--out",
        str(out),
        "--quiet",
        "--utterances-per-part",
        "2",
        "--batch-seconds",
        "1",
    ]
    terminate_halfway(TERMINATED_CLI, argv, tmp_path / "started", out)
    with mock.patch("extract.spec.load_extractor", lambda spec, **options: tiny_extractor("whisper")):
        assert cli.main(argv) == 0
    assert len(ShardReader(out)) == 4


def test_the_float16_finiteness_shortcut_agrees_with_numpy():
    from extract.store import all_finite

    values = np.array([0.0, -0.0, 1.0, -65504.0, 65504.0, 6e-8, np.inf, -np.inf, np.nan], dtype=np.float16)
    for index in range(len(values)):
        assert all_finite(values[index : index + 1]) == bool(np.isfinite(values[index])), values[index]
    assert all_finite(values[:6]) and not all_finite(values)
    assert not all_finite(np.array([1.0, np.nan], np.float32))


def test_a_writer_used_as_a_context_manager_cleans_up_when_its_close_fails(tmp_path, monkeypatch):
    def full_disk(self):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(PartWriter, "_write_index", full_disk)
    with pytest.raises(StoreError, match="disk full while writing part-00000.h5"):
        with PartWriter(tmp_path / "part-00000.h5", {SITE: 2}, "float32", {}) as writer:
            writer.add("a", {SITE: np.ones((3, 2), np.float32)}, {})
    assert not list(tmp_path.iterdir())


def test_the_synthetic_store_can_be_padded_like_a_keep_padding_whisper_store(tmp_path):
    from tests.synthetic_store import write_store

    plain = ShardReader(write_store(tmp_path / "plain", speakers_per_gender=2, utterances_per_speaker=2))
    padded = ShardReader(write_store(tmp_path / "padded", speakers_per_gender=2, utterances_per_speaker=2, pad_to=40))
    site = "encoder.layer.0"
    np.testing.assert_array_equal(padded.speech_lengths(site), plain.speech_lengths(site))
    assert {padded.length(site, i) for i in padded.ids} == {40}
    for utterance_id in plain.ids:
        speech = plain.length(site, utterance_id)
        np.testing.assert_array_equal(padded.get(site, utterance_id)[:speech], plain.get(site, utterance_id))


def test_a_part_finished_by_another_writer_after_the_scan_is_not_written_again(tmp_path, monkeypatch):
    from extract.store import Store

    utterances = _corpus(tmp_path, seconds=(0.5, 0.6, 0.7))
    options = dict(config={}, show_progress=False, options=ExtractOptions(utterances_per_part=2))
    run_extraction(tiny_extractor("whisper"), utterances, [SITE], tmp_path / "s", **options)
    stamps = {path.name: path.stat().st_mtime_ns for path in (tmp_path / "s").glob("*.h5")}
    monkeypatch.setattr(Store, "finished", lambda store: {})  # the scan ran before the other writer finished
    report = run_extraction(tiny_extractor("whisper"), utterances, [SITE], tmp_path / "s", **options)
    assert (report.written, report.resumed) == (0, 3)
    assert stamps == {path.name: path.stat().st_mtime_ns for path in (tmp_path / "s").glob("*.h5")}


def _part_with_sites(path, site_modules: dict | None, sites: list[str]):
    attributes = {"skipped": "[]"} | ({"site_modules": site_modules} if site_modules is not None else {})
    with PartWriter(path, {site: 2 for site in sites}, "float32", attributes) as writer:
        writer.add("a", {site: np.ones((3, 2), np.float32) for site in sites}, {})
    return path


def test_the_reader_lists_sites_in_the_order_of_the_recorded_site_table(tmp_path):
    """Not a hard-coded name order: a family's own site names come back in its table's forward order."""
    table = {"encoder.layer.10": "m.layers.10:output", "encoder.layer.2": "m.layers.2:output", "zeta": "m.z:output", "alpha": "m.a:output"}
    path = _part_with_sites(tmp_path / "p.h5", table, ["alpha", "zeta", "encoder.layer.2", "encoder.layer.10"])
    assert ShardReader(path).sites == ["encoder.layer.10", "encoder.layer.2", "zeta", "alpha"]


def test_a_store_without_a_site_table_keeps_its_file_order_and_a_damaged_table_is_refused(tmp_path):
    assert ShardReader(_part_with_sites(tmp_path / "p.h5", None, ["b", "a"])).sites == ["a", "b"]  # h5py lists names sorted
    damaged = _part_with_sites(tmp_path / "q.h5", {"a": "m.a:output"}, ["a", "b"])
    with pytest.raises(StoreError, match="site\\(s\\) b are stored but missing from its site table"):
        ShardReader(damaged)
