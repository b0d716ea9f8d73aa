"""The writer's worker threads (each site's buffers hashed and written beside the others), its
read-back of the chunks at the offsets the file's index gives, and the disk's writeback started
while a part is written (issue 34)."""

import errno
import hashlib
import os
import threading
import time

import h5py
import numpy as np
import pytest

from extract.store import CHUNK_BYTES, PartWriter, ShardReader, StoreError, content_checksum, writer

SITES = {f"s{index}": 512 for index in range(6)}  # 1024 rows a chunk of float16


def _arrays(count, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((int(rng.integers(1, 500)), 512)).astype(np.float16) for _ in range(count)]


def _written(path, arrays, **options):
    with PartWriter(path, SITES, "float16", {}, flush_bytes=2 * len(SITES) * CHUNK_BYTES, **options) as writer:
        for index, array in enumerate(arrays):
            writer.add(f"u{index}", {site: array * (number + 1) for number, site in enumerate(SITES)}, {})
    return path


def test_sites_hashed_and_written_on_worker_threads_keep_every_site_in_order(tmp_path, monkeypatch):
    threads = set()
    append = PartWriter._append

    def recorded(self, site, rows):
        threads.add(threading.current_thread().name)
        return append(self, site, rows)

    monkeypatch.setattr(PartWriter, "_append", recorded)
    arrays = _arrays(40)
    path = _written(tmp_path / "p.h5", arrays)
    assert threads and all(name.startswith("part-writer") for name in threads)
    reader = ShardReader(path)
    for number, site in enumerate(SITES):
        expected = [array * (number + 1) for array in arrays]
        for index, array in enumerate(expected):
            np.testing.assert_array_equal(reader.get(site, f"u{index}"), array.astype(np.float32))
        with h5py.File(path) as handle:
            stored = handle[f"sites/{site}/data"][:].tobytes()
            assert handle.attrs["content_sha256"] == content_checksum(handle)
        assert hashlib.sha256(stored).hexdigest() == hashlib.sha256(b"".join(a.tobytes() for a in expected)).hexdigest()


def _damaging(offset_of):
    """A ``_write_index`` that first overwrites one byte of the data where ``offset_of(dataset)`` says
    (what another process writing into the file does), then writes the index."""
    write_index = PartWriter._write_index

    def damaged(self):
        self.file.flush()
        offset = offset_of(self.file["sites/s3/data"])
        with open(self.temporary, "r+b") as raw:
            raw.seek(offset)
            value = raw.read(1)
            raw.seek(offset)
            raw.write(bytes([value[0] ^ 0xFF]))
        return write_index(self)

    return damaged


def _last_chunk(dataset):
    return max((dataset.id.get_chunk_info(index) for index in range(dataset.id.get_num_chunks())), key=lambda info: info.chunk_offset[0])


@pytest.mark.parametrize(
    "offset_of",
    [
        lambda dataset: dataset.id.get_chunk_info(1).byte_offset + 77,  # a whole chunk in the middle
        lambda dataset: _last_chunk(dataset).byte_offset,  # the last, partial chunk (written at close)
    ],
    ids=["middle", "last"],
)
def test_one_byte_changed_in_any_chunk_before_completion_is_caught(tmp_path, monkeypatch, offset_of):
    monkeypatch.setattr(PartWriter, "_write_index", _damaging(offset_of))
    path = tmp_path / "p.h5"
    with pytest.raises(StoreError, match=r"content read back differs from what was written \(data changed\)"):
        _written(path, _arrays(12))
    assert not list(tmp_path.iterdir())  # no part, no temporary file, no claim


def test_a_full_disk_on_a_worker_thread_ends_in_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    calls = []
    append = PartWriter._append

    def full_at_the_fifth(self, site, rows):
        calls.append(site)
        if len(calls) == 5:
            raise OSError(errno.ENOSPC, "No space left on device")
        return append(self, site, rows)

    monkeypatch.setattr(PartWriter, "_append", full_at_the_fifth)
    with pytest.raises(StoreError, match="^disk full while writing p.h5 in .*: the part was discarded") as caught:
        _written(tmp_path / "p.h5", _arrays(60))
    assert "\n" not in str(caught.value)
    assert not list(tmp_path.iterdir())


def test_the_parts_bytes_do_not_depend_on_the_threads_timing(tmp_path, monkeypatch):
    from extract.store.verify import DATA_DIGESTS

    arrays = _arrays(30, seed=4)
    digest = DATA_DIGESTS["xxh3_128"]
    parts = []
    for seed in (0, 1):
        delays = np.random.default_rng(seed)

        class Slowed:  # one site's hashing late, then another's
            def __init__(self):
                self.digest = digest()

            def update(self, data, delays=delays):
                time.sleep(float(delays.uniform(0, 0.004)))
                self.digest.update(data)

            def hexdigest(self):
                return self.digest.hexdigest()

        monkeypatch.setitem(DATA_DIGESTS, "xxh3_128", Slowed)
        parts.append(_written(tmp_path / f"p{seed}.h5", arrays).read_bytes())
    assert parts[0] == parts[1]


def test_the_disk_starts_writing_a_part_back_while_it_is_written_and_it_is_whole(tmp_path, monkeypatch):
    syncs = []
    fdatasync = os.fdatasync

    def recorded(descriptor):
        syncs.append(os.fstat(descriptor).st_size)
        return fdatasync(descriptor)

    monkeypatch.setattr(writer, "WRITEBACK_BYTES", 2 * CHUNK_BYTES)
    monkeypatch.setattr(os, "fdatasync", recorded)
    arrays = _arrays(40, seed=5)
    path = _written(tmp_path / "p.h5", arrays)
    assert len(syncs) >= 3 and syncs == sorted(syncs)  # while the part grew, not only at its end
    assert syncs[0] < path.stat().st_size / 2
    reader = ShardReader(path)
    for index, array in enumerate(arrays):
        np.testing.assert_array_equal(reader.get("s2", f"u{index}"), (array * 3).astype(np.float32))


def test_a_failed_early_sync_discards_the_part_in_one_line(tmp_path, monkeypatch):
    def full(descriptor):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(writer, "WRITEBACK_BYTES", 2 * CHUNK_BYTES)
    monkeypatch.setattr(os, "fdatasync", full)
    with pytest.raises(StoreError, match="^disk full while writing p.h5 in .*: the part was discarded") as caught:
        _written(tmp_path / "p.h5", _arrays(40))
    assert "\n" not in str(caught.value)
    assert not list(tmp_path.iterdir())  # no part, no temporary file, no claim


def test_a_small_part_starts_no_early_sync(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "fdatasync", lambda descriptor: pytest.fail("an early sync of a part smaller than WRITEBACK_BYTES"))
    _written(tmp_path / "p.h5", _arrays(5))
