"""The writer at the disk's speed: whole-chunk writes, checksums beside the writes, a durable
rename; and the extraction pipeline around it (a loader thread, a writer thread, the cast and
finite checks on the model's device)."""

import hashlib
import os
import threading
import time

import h5py
import numpy as np
import pytest
import torch

from extract.families import tiny_extractor
from extract.families.base import NonFiniteError
from extract.pipeline import BackgroundWriter, prefetched
from extract.runner import AudioLog, audio_batches
from extract.stage_options import ExtractOptions
from extract.store import CHUNK_BYTES, PartWriter, ShardReader, StoreError, content_checksum
from tests.extract.test_extract import _corpus

SITE = "encoder.final"


def _states(count, dim, seed=0, lo=1, hi=300):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((int(rng.integers(lo, hi)), dim)).astype(np.float32) for _ in range(count)]


def _write(path, arrays, dim, dtype="float16", **options):
    with PartWriter(path, {SITE: dim, "other": dim}, dtype, {}, **options) as writer:
        for index, array in enumerate(arrays):
            writer.add(f"u{index}", {SITE: array, "other": array[::-1].copy()}, {})
    return path


def test_buffered_writes_store_every_utterance_exactly_across_many_buffer_swaps(tmp_path):
    arrays = _states(60, 64, lo=1, hi=700)  # 8 KiB rows: 128 rows a chunk, a buffer of 2 chunks swapped many times
    reader = ShardReader(_write(tmp_path / "p.h5", arrays, 64, flush_bytes=4 * CHUNK_BYTES))
    for index, array in enumerate(arrays):
        np.testing.assert_array_equal(reader.get(SITE, f"u{index}"), array.astype(np.float16))
        np.testing.assert_array_equal(reader.get("other", f"u{index}"), array[::-1].astype(np.float16))


def test_the_recorded_checksum_is_the_sha256_of_the_bytes_given_whatever_the_buffering(tmp_path):
    arrays = _states(25, 32, seed=1)
    small = _write(tmp_path / "small.h5", arrays, 32, flush_bytes=0)
    large = _write(tmp_path / "large.h5", arrays, 32)
    expected = hashlib.sha256(b"".join(a.astype(np.float16).tobytes() for a in arrays)).hexdigest()
    for path in (small, large):
        with h5py.File(path) as handle:
            assert handle.attrs["content_sha256"] == content_checksum(handle)
            recomputed = hashlib.sha256(handle[f"sites/{SITE}/data"][:].tobytes()).hexdigest()
        assert recomputed == expected


def test_every_write_but_the_last_is_whole_chunks_at_chunk_boundaries(tmp_path, monkeypatch):
    writes = []
    append = PartWriter._append

    def recorded(self, site, rows):
        writes.append((site, self.datasets[site].shape[0], rows.shape[0], self.chunk_rows[site]))
        return append(self, site, rows)

    monkeypatch.setattr(PartWriter, "_append", recorded)
    _write(tmp_path / "p.h5", _states(40, 512, seed=2, lo=50, hi=400), 512, flush_bytes=4 * CHUNK_BYTES)
    for site in (SITE, "other"):
        mine = [write for write in writes if write[0] == site]
        assert len(mine) > 2
        for _, start, rows, chunk in mine[:-1]:
            assert start % chunk == 0 and rows % chunk == 0
        assert mine[-1][1] % mine[-1][3] == 0  # the last starts on a boundary and may end anywhere


def test_an_array_changed_after_add_is_stored_as_it_was(tmp_path):
    path = tmp_path / "p.h5"
    array = np.ones((10, 4), np.float16)
    with PartWriter(path, {SITE: 4}, "float16", {}) as writer:
        writer.add("a", {SITE: array}, {})
        array[:] = 7
    np.testing.assert_array_equal(ShardReader(path).get(SITE, "a"), np.ones((10, 4), np.float16))


def test_the_buffers_hold_at_most_flush_bytes(tmp_path):
    path = tmp_path / "p.h5"
    sites = {f"s{index}": 256 for index in range(8)}
    with PartWriter(path, sites, "float16", {}, flush_bytes=32 * CHUNK_BYTES) as writer:
        for index, array in enumerate(_states(30, 256, seed=3, lo=100, hi=3000)):
            writer.add(f"u{index}", dict.fromkeys(sites, array), {})
            held = sum(b.current.nbytes + (b.other.nbytes if b.other is not None else 0) for b in writer.buffers.values())
            assert held <= 32 * CHUNK_BYTES


def test_the_part_is_synced_before_its_rename_and_the_folder_after(tmp_path, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}"))), real_fsync(fd))[1])
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append(("rename", str(b))), real_replace(a, b))[1])
    path = _write(tmp_path / "p.h5", _states(3, 8), 8)
    renamed = events.index(("rename", str(path)))
    assert ("fsync", str(path) + ".tmp") in events[:renamed] or ("fsync", str(path.with_suffix(".h5.tmp"))) in events[:renamed]
    assert ("fsync", str(tmp_path)) in events[renamed:]


def test_a_refused_utterance_leaves_nothing_and_the_writer_goes_on(tmp_path):
    path = tmp_path / "p.h5"
    with PartWriter(path, {SITE: 4}, "float16", {}) as writer:
        writer.add("a", {SITE: np.ones((5, 4), np.float32)}, {})
        with pytest.raises(StoreError, match="overflow float16"):
            writer.add("b", {SITE: np.full((5, 4), 1e6, np.float32)}, {})
        writer.add("c", {SITE: np.full((3, 4), 2, np.float32)}, {})
    reader = ShardReader(path)
    assert reader.ids == ["a", "c"] and reader.get(SITE, "c").shape == (3, 4)


# --- the extractor: cast and checks on the model's device ------------------------------------------


def _waves(seconds=(0.6, 0.9, 1.3)):
    rng = np.random.default_rng(0)
    return [rng.standard_normal(int(s * 16000)).astype(np.float32) * 0.1 for s in seconds]


def test_states_in_the_storage_dtype_are_the_float32_states_cast():
    extractor = tiny_extractor("whisper")
    audios = _waves()
    wide = extractor.extract(audios, [SITE, "encoder.layer.0"])
    narrow = extractor.extract(audios, [SITE, "encoder.layer.0"], dtype="float16")
    for a, b in zip(wide, narrow):
        for site in a:
            assert a[site].dtype == np.float32 and b[site].dtype == np.float16
            np.testing.assert_array_equal(a[site].astype(np.float16), b[site])


def test_a_float16_overflow_names_the_site_utterance_and_magnitude():
    extractor = tiny_extractor("whisper")
    with torch.no_grad():
        extractor.model.get_submodule(extractor.encoder_path).layer_norm.bias.fill_(1e6)
    with pytest.raises(StoreError, match=r"values at site encoder.final, utterance a overflow float16 \(max \|value\| 1e\+06"):
        extractor.extract(_waves((0.5, 0.7)), [SITE], ids=["a", "b"], dtype="float16")
    assert extractor.extract(_waves((0.5,)), [SITE], dtype="float32")[0][SITE].max() > 65504  # float32 holds it


def test_non_finite_states_are_refused_before_the_cast():
    extractor = tiny_extractor("whisper")
    with torch.no_grad():
        extractor.model.get_submodule(extractor.encoder_path).layer_norm.bias[0] = float("nan")
    with pytest.raises(NonFiniteError, match="non-finite values at site encoder.final for utterance x"):
        extractor.extract(_waves((0.5,)), [SITE], ids=["x"], dtype="float16")


# --- the pipeline's threads ------------------------------------------------------------------------


def test_prefetched_keeps_order_and_raises_the_producers_error_after_its_items():
    def items():
        yield from range(5)
        raise ValueError("bad audio")

    seen = []
    with pytest.raises(ValueError, match="bad audio"):
        for item in prefetched(items(), depth=2):
            seen.append(item)
    assert seen == [0, 1, 2, 3, 4]


def test_prefetched_runs_ahead_by_at_most_its_depth_and_stops_when_the_consumer_does():
    produced = []

    def items():
        for index in range(100):
            produced.append(index)
            yield index

    iterator = prefetched(items(), depth=2)
    assert next(iterator) == 0
    time.sleep(0.3)
    assert len(produced) <= 1 + 2 + 1  # the one consumed, the queue, the one waiting to be put
    iterator.close()
    assert not [t for t in threading.enumerate() if t.name == "extract-loader"]


def test_the_background_writer_runs_calls_in_order_and_raises_their_error():
    done = []
    writer = BackgroundWriter(depth=1)
    for index in range(20):
        writer.submit(lambda index=index: done.append(index))
    writer.finish()
    assert done == list(range(20))

    failing = BackgroundWriter(depth=1)
    failing.submit(lambda: (_ for _ in ()).throw(StoreError("disk full while writing p.h5")))
    with pytest.raises(StoreError, match="disk full"):
        for _ in range(50):  # raised at a later submit ...
            failing.submit(lambda: None)
            time.sleep(0.01)
    with pytest.raises(StoreError, match="disk full"):
        failing.finish()  # ... and at the end


def test_cancel_drops_queued_calls():
    gate, done = threading.Event(), []
    writer = BackgroundWriter(depth=3)
    writer.submit(gate.wait)  # running: the three below wait in the queue
    for index in range(3):
        writer.submit(lambda index=index: done.append(index))
    threading.Timer(0.2, gate.set).start()
    writer.cancel()
    assert done == [] and not writer.thread.is_alive()


def test_batches_by_count_hold_batch_size_utterances_sorted_by_length(tmp_path):
    utterances = _corpus(tmp_path, count=7)
    batches = list(audio_batches(utterances, max_seconds=30, batch_seconds=1e9, log=AudioLog(), batch_size=3))
    assert [len(b.utterances) for b in batches] == [3, 3, 1]
    lengths = [len(a) for b in batches for a in b.audios]
    assert lengths == sorted(lengths)


def test_bad_audio_after_the_first_batch_is_recorded_in_the_part_and_the_rerun_resumes(tmp_path):
    """Batches by count load the part's audio before its first batch too: the part's ``skipped``
    attribute is written when the part opens, and a resume checks it against the manifest."""
    from extract.manifest import Utterance
    from extract.runner import run_extraction

    utterances = _corpus(tmp_path, count=6)
    corrupt = tmp_path / "audio" / "corrupt.wav"
    corrupt.write_bytes(b"RIFF....WAVEjunk")
    utterances.append(Utterance(id="corrupt", audio=str(corrupt), language="en", text="x", gender="male", speaker="s9", split="train"))
    options = dict(config={}, show_progress=False, options=ExtractOptions(batch_size=1))
    report = run_extraction(tiny_extractor("whisper"), utterances, [SITE], tmp_path / "store", **options)
    assert report.written == 6 and [s["id"] for s in report.skipped] == ["corrupt"]
    assert [s["id"] for s in ShardReader(tmp_path / "store").skipped()] == ["corrupt"]
    again = run_extraction(tiny_extractor("whisper"), utterances, [SITE], tmp_path / "store", **options)
    assert again.written == 0 and again.resumed == 6
