"""Writing one part: buffered, hashed on worker threads, verified from disk, then renamed.

A part is written under a temporary name opened in exclusive-create mode, under its claim.
On close what the closed file holds is compared with what was written (the index through the
content checksum, the data through each site's data digest); only then is ``complete`` set and the
file renamed, so a reader never sees half a part, nor a part another process overwrote. The part is
flushed to the disk (``fsync``) before its rename, and the rename itself after it, so a power cut
leaves either no part or a whole one under the final name.

Speed (``benchmarks/store_writer.py``): states are copied into per-site buffers of whole chunks;
a full buffer goes to a worker thread (one a site, at most one a core and 8), which hashes its
bytes and writes it straight to the file (a chunk written partly would be read back and rewritten,
since the writer keeps no chunk cache), so the calling thread only checks and copies. The writes
keep the order the buffers were handed over in: a part's bytes do not depend on the threads. HDF5
itself runs one call at a time (h5py holds one lock for the process), at the speed of a ``pwrite``
of the same chunk. The verification at close reads each chunk with ``pread`` at the offset the
file's chunk index gives (no copy through HDF5), on the worker threads, while the part is flushed to
the disk; that flush waits for the part's last bytes only (:class:`_Writeback`). Memory: two buffers
a site, ``flush_bytes`` in all (64 MiB by default; at least two chunks of 1 MiB a site).
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from pathlib import Path

import numpy as np

from extract.diskfull import is_disk_full
from extract.errors import first_line
from extract.store.format import CHUNK_BYTES, META_FIELDS, SITE_DIGEST, PartClaim, StoreAttributes, StoreError, _bytes_of, temporary_path
from extract.store.verify import DATA_DIGESTS, _ChunkLayout, _content_digest, _index_digest, _meta_columns, _recorded_site_digests, _stored_digests

FLUSH_BYTES = 64 << 20  # buffered states (all sites) before they are written in whole chunks
WRITEBACK_BYTES = 64 << 20  # bytes handed to the file between two syncs started while a part is written
FLOAT16_EXPONENT = 0x7C00  # all exponent bits set: infinity or NaN
DATA_DIGEST = "xxh3_128"  # what new parts record; "sha256" (the attribute absent) in parts written before it
FORMAT_VERSION = 2  # the part format new parts record (``format_version``); absent: 1, see :func:`part_format`


class PartWriter:
    """Writes one part file; use as a context manager. ``abort()`` deletes the temporary file.

    Takes its own :class:`PartClaim` unless given one the caller holds (the caller then releases it).
    A write that fails (a full disk, a file size limit) discards the part, releases the claim and
    raises :class:`StoreError` naming the part. Chunks are written through to the file (no chunk
    cache): HDF5 then reports a failed write from the call that made it, not later while it frees
    a dataset, where it could only print tracebacks and leave a broken file that crashes the process.
    """

    def __init__(
        self,
        path: Path,
        site_dims: dict[str, int],
        storage_dtype: str,
        attributes: StoreAttributes | dict,
        claim: PartClaim | None = None,
        flush_bytes: int = FLUSH_BYTES,
        max_rows: int | None = None,
    ):
        """``attributes``: the part's :class:`StoreAttributes` (a dict of raw attributes is decoded first);
        ``flush_bytes``: how many bytes of states are buffered (all sites, at least two chunks a site).
        ``max_rows``: the most rows a site will hold, when known: chunks are then no larger than that
        (a 1 MB chunk of a 3-value site would hold 87 000 rows, and HDF5 writes whole chunks)."""
        import h5py

        self.path = Path(path)
        if not isinstance(attributes, StoreAttributes):
            attributes = StoreAttributes.from_attrs(attributes, self.path)
        self.temporary = temporary_path(self.path)
        self.data_digest = DATA_DIGEST
        self.file = None
        self.writeback: _Writeback | None = None
        self.datasets: dict[str, object] = {}
        self.own_claim = claim is None
        self.claim = PartClaim(self.path) if claim is None else claim
        try:
            self.file = h5py.File(self.temporary, "x", rdcc_nbytes=0)
        except OSError as error:
            self._release_claim()
            if _file_exists(error):
                raise StoreError(
                    f"{self.temporary} already exists: left by a killed writer (delete it and rerun) or being written by a process that took no claim"
                ) from error
            self.temporary.unlink(missing_ok=True)  # created by this call (exclusive mode) before it failed
            raise StoreError(self._failure(error)) from error
        self.site_dims = dict(site_dims)
        self.dtype = np.dtype(storage_dtype)
        self.chunk_rows: dict[str, int] = {}
        self.buffers: dict[str, _SiteBuffer] = {}
        self.workers = ThreadPoolExecutor(max_workers=_worker_threads(len(self.site_dims)), thread_name_prefix="part-writer")
        with self._discarded_on_failure():
            self.writeback = _Writeback(self.temporary)
            for key, value in attributes.to_attrs().items():
                self.file.attrs[key] = value
            self.file.attrs["complete"] = False
            if self.data_digest != "sha256":  # absent means sha256, as in every part written before the attribute
                self.file.attrs["data_digest"] = self.data_digest
            chunks = max(1, flush_bytes // (2 * max(1, len(self.site_dims)) * CHUNK_BYTES))  # a buffer's chunks: two a site, flush_bytes in all
            for site, dim in self.site_dims.items():
                self.chunk_rows[site] = max(1, min(CHUNK_BYTES // (dim * self.dtype.itemsize), max_rows or CHUNK_BYTES))
                self.datasets[site] = self.file.create_dataset(
                    f"sites/{site}/data", shape=(0, dim), maxshape=(None, dim), dtype=self.dtype, chunks=(self.chunk_rows[site], dim)
                )
                self.buffers[site] = _SiteBuffer(chunks * self.chunk_rows[site], dim, self.dtype)
        self.ids: list[str] = []
        self.meta: dict[str, list] = {name: [] for name in (*META_FIELDS, "duration")}
        self.offsets: dict[str, list[int]] = {site: [0] for site in self.site_dims}
        self.speech: dict[str, list[int]] = {site: [] for site in self.site_dims}
        self.digests = {site: DATA_DIGESTS[self.data_digest]() for site in self.site_dims}
        self.pending: dict[str, Future] = {}  # each site's last buffer, being hashed and written
        self.last_written: threading.Event | None = None  # set once the buffer handed over last is written

    def add(self, utterance_id: str, states: dict[str, np.ndarray], meta: dict, speech_frames: dict[str, int] | None = None) -> None:
        """Append one utterance; ``speech_frames`` maps site -> its speech frames (default: all its stored frames).

        Values are checked for finiteness after the cast to the storage dtype (float16 turns
        magnitudes above 65504 into infinity); nothing of a refused utterance is written. The
        arrays are copied: the caller may change them afterwards.
        """
        if set(states) != set(self.site_dims):
            raise StoreError(f"utterance {utterance_id}: sites {sorted(states)} differ from the store's {sorted(self.site_dims)}")
        stored = {}
        for site, array in states.items():
            if array.ndim != 2 or array.shape[1] != self.site_dims[site]:
                raise StoreError(f"utterance {utterance_id}: site {site} has shape {array.shape}, expected (T, {self.site_dims[site]})")
            stored[site] = _finite_after_cast(array, self.dtype, site, utterance_id, copy=False)  # copied into the buffer
        speech = {site: array.shape[0] for site, array in stored.items()} | dict(speech_frames or {})
        for site, count in speech.items():
            if site not in stored:
                raise StoreError(f"utterance {utterance_id}: speech frames given for site {site}, which the store does not have")
            if not 0 <= int(count) <= stored[site].shape[0]:
                raise StoreError(f"utterance {utterance_id}: speech frames {count} at site {site} outside 0..{stored[site].shape[0]} (its stored frames)")
        with self._discarded_on_failure():
            for site, array in stored.items():
                self._buffer(site, array)
        for site, array in stored.items():
            self.offsets[site].append(self.offsets[site][-1] + array.shape[0])
            self.speech[site].append(int(speech[site]))
        self.ids.append(utterance_id)
        for name in self.meta:
            self.meta[name].append(meta.get(name, "" if name != "duration" else float("nan")))

    def _buffer(self, site: str, rows: np.ndarray) -> None:
        """Copy ``rows`` into the site's buffer, writing it out each time it fills."""
        buffer = self.buffers[site]
        while len(rows):
            taken = buffer.fill(rows)
            rows = rows[taken:]
            if buffer.full:
                self._write_buffer(site)

    def _write_buffer(self, site: str) -> None:
        """Hand the site's buffered rows to a worker thread, which hashes and writes them; the rows
        go on into the site's other buffer, once that one is written (a site's digest takes its
        bytes in order and its writes extend its data in order, so each waits for the one before)."""
        buffer = self.buffers[site]
        rows = buffer.rows()
        if not len(rows):
            return
        if site in self.pending:
            self.pending[site].result()
        written = threading.Event()
        self.pending[site] = self.workers.submit(self._hash_and_append, site, rows, self.last_written, written)
        self.last_written = written
        buffer.swap()

    def _hash_and_append(self, site: str, rows: np.ndarray, previous: threading.Event | None, written: threading.Event) -> None:
        """A worker's task: the rows' bytes into the site's digest, then into the file once the
        buffer handed over before this one is written, so the file's bytes do not depend on the
        threads' timing. Tasks start in the order they were submitted, so the one waited for is running or done."""
        try:
            self.digests[site].update(_bytes_of(rows))
            if previous is not None:
                previous.wait()
            self._append(site, rows)
            self.writeback.written(rows.nbytes)
        finally:
            written.set()

    def _append(self, site: str, rows: np.ndarray) -> None:
        """Write ``rows`` at the end of ``site``'s data (its only write to the file): whole chunks
        straight to the file (no conversion, no read-back), a last partial one (at close) through HDF5."""
        dataset, chunk = self.datasets[site], self.chunk_rows[site]
        start = dataset.shape[0]
        dataset.resize(start + rows.shape[0], axis=0)
        whole = rows.shape[0] - rows.shape[0] % chunk if start % chunk == 0 else 0
        for begin in range(0, whole, chunk):
            dataset.id.write_direct_chunk((start + begin, 0), _bytes_of(rows[begin : begin + chunk]))
        if whole < rows.shape[0]:
            dataset[start + whole :] = rows[whole:]

    def close(self) -> Path:
        """Write the index, verify the content read back from disk, mark complete, rename.

        Any failure on the way (a full disk, a checksum mismatch) discards the part and its claim."""
        with self._discarded_on_failure():
            for site in self.site_dims:
                self._write_buffer(site)
            for pending in self.pending.values():
                pending.result()
            self.writeback.close()
            expected = self._write_index()
            self.datasets = {}
            self.file.close()  # on failure abort() cuts the file and closes it again (a no-op when this got through)
            self.file = None
            self._verify_and_mark_complete(expected)
            _synced(self.temporary)  # the complete flag (the data was synced during the verification)
        os.replace(self.temporary, self.path)
        _synced(self.path.parent)  # the rename itself
        self.workers.shutdown()
        self._release_claim()
        return self.path

    @contextmanager
    def _discarded_on_failure(self) -> Iterator[None]:
        """Any failure in the block discards the part (:meth:`abort`); a failed write becomes
        :class:`StoreError` naming the part (HDF5 reports one as ``OSError`` or ``RuntimeError``)."""
        try:
            yield
        except BaseException as error:
            self.abort()
            if isinstance(error, (OSError, RuntimeError)) and not isinstance(error, StoreError):
                raise StoreError(self._failure(error)) from error
            raise

    def _failure(self, error: BaseException) -> str:
        """The one-line message for a failed write of this part."""
        where = f"{self.path.name} in {self.path.parent}"
        if is_disk_full(error):
            return (
                f"disk full while writing {where}: the part was discarded and no part was marked complete by it; "
                "free space and rerun (complete parts are kept and skipped)"
            )
        reason = os.strerror(error.errno) if isinstance(error, OSError) and error.errno else first_line(error)
        return f"cannot write {where} ({reason}): the part was discarded; fix that and rerun (complete parts are kept and skipped)"

    def _write_index(self) -> str:
        """Offsets, speech frames (``valid``), ids, metadata, each site's data digest and the content
        checksum (over the labels too: format 2); returns the checksum."""
        site_digests = {site: digest.hexdigest() for site, digest in self.digests.items()}
        for site in self.site_dims:
            self.file.create_dataset(f"sites/{site}/offsets", data=np.asarray(self.offsets[site], dtype=np.int64))
            self.file.create_dataset(f"sites/{site}/valid", data=np.asarray(self.speech[site], dtype=np.int64))
            self.file[f"sites/{site}/data"].attrs[SITE_DIGEST] = site_digests[site]
        self.file.create_dataset("ids", data=np.array(self.ids, dtype=object), dtype=_string_dtype())
        for name, values in self.meta.items():
            if name == "duration":
                self.file.create_dataset(f"meta/{name}", data=np.asarray(values, dtype=np.float64))
            else:
                self.file.create_dataset(f"meta/{name}", data=np.array(values, dtype=object), dtype=_string_dtype())
        self.file.attrs["utterances"] = len(self.ids)
        self.file.attrs["format_version"] = FORMAT_VERSION
        expected = _content_digest(site_digests, self.offsets, self.speech, self.ids, _meta_columns(self.meta))
        self.file.attrs["content_sha256"] = expected
        return expected

    def _verify_and_mark_complete(self, expected: str) -> None:
        """Read the closed part back and compare it with what was written, while the disk takes it (fsync):
        each site's data digest computed again from the chunks (:func:`_stored_digests`), the index
        through the content checksum recomputed from what the file holds."""
        import h5py

        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="part-sync") as syncer:
            syncing = syncer.submit(_synced, self.temporary)
            with h5py.File(self.temporary, "r") as handle:
                layouts = {site: _ChunkLayout.of(handle[f"sites/{site}/data"]) for site in (handle["sites"] if "sites" in handle else [])}
                written = {site: digest.hexdigest() for site, digest in self.digests.items()}
                index = _index_digest(handle, written)
                recorded = str(handle.attrs.get("content_sha256", ""))
                recorded_sites = _recorded_site_digests(handle)
            stored = _stored_digests(self.temporary, layouts, self.data_digest, self.workers)
            syncing.result()
        if stored != written or index != expected or recorded != expected or recorded_sites != written:
            found = "data" if stored != written else "index"
            raise StoreError(
                f"{self.path}: the content read back differs from what was written ({found} changed): another process changed "
                "the file; the part was discarded, rerun to write it again"
            )
        with h5py.File(self.temporary, "r+") as handle:
            handle.attrs["complete"] = True  # last: a file without it is never read as complete

    def abort(self) -> None:
        """Discard the temporary file and release the claim, even when closing the file fails.

        The file is first cut to nothing: on a full disk that gives its space back, so HDF5 can
        write out the little it still holds while it closes, instead of failing inside the library."""
        file, datasets = self.file, self.datasets
        self.file, self.datasets = None, {}
        self.buffers = {}
        self.workers.shutdown(cancel_futures=True)  # waits for the task running, then the file is closed
        try:
            if self.writeback is not None:
                with suppress(OSError):  # the part is discarded: a failed sync of it no longer matters
                    self.writeback.close()
            if file is not None:
                with suppress(OSError):
                    os.truncate(self.temporary, 0)
                datasets.clear()
                with suppress(Exception):  # the file is discarded anyway; the original error is what matters
                    file.close()
        finally:
            self.temporary.unlink(missing_ok=True)
            self._release_claim()

    def _release_claim(self) -> None:
        if self.own_claim:
            self.claim.release()

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        if kind is None:
            self.close()
        else:
            self.abort()


def _string_dtype():
    import h5py

    return h5py.string_dtype(encoding="utf-8")


def _finite_after_cast(array: np.ndarray, dtype: np.dtype, site: str, utterance_id: str, copy: bool = True) -> np.ndarray:
    """``array`` in the storage dtype (the array itself when it is already, unless ``copy``),
    refused when a value is (or becomes) NaN or infinite."""
    with np.errstate(over="ignore"):  # an overflow is reported below, with where it happened
        stored = array.astype(dtype, copy=copy)
    if all_finite(stored):
        return stored
    where = f"site {site}, utterance {utterance_id}"
    if not np.isfinite(array).all():
        raise StoreError(f"non-finite values (NaN or infinity) at {where}")
    raise overflow_error(where, float(np.abs(array).max()), dtype)


def overflow_error(where: str, magnitude: float, dtype) -> StoreError:
    """The one message for states too large for the storage dtype (``where``: site and utterance)."""
    dtype = np.dtype(dtype)
    return StoreError(
        f"values at {where} overflow {dtype} (max |value| {magnitude:.6g}, {dtype} holds at most "
        f"{float(np.finfo(dtype).max):g}): rerun with --storage-dtype float32"
    )


class _SiteBuffer:
    """One site's rows waiting to be written: two arrays of whole chunks, one filling while the
    other's bytes are hashed (see :meth:`PartWriter._write_buffer`)."""

    def __init__(self, rows: int, dim: int, dtype: np.dtype):
        self.current = np.empty((rows, dim), dtype)
        self.other: np.ndarray | None = None  # made at the first swap: a small part never needs it
        self.filled = 0

    @property
    def full(self) -> bool:
        return self.filled == len(self.current)

    def fill(self, rows: np.ndarray) -> int:
        """Copy as many of ``rows`` as fit; returns how many."""
        taken = min(len(rows), len(self.current) - self.filled)
        self.current[self.filled : self.filled + taken] = rows[:taken]
        self.filled += taken
        return taken

    def rows(self) -> np.ndarray:
        return self.current[: self.filled]

    def swap(self) -> None:
        if self.other is None:
            self.other = np.empty_like(self.current)
        self.current, self.other, self.filled = self.other, self.current, 0


class _Writeback:
    """Starts the disk's writeback of a part while it is being written: once :data:`WRITEBACK_BYTES`
    more have been handed to the file, an ``fdatasync`` on a thread of its own (one at a time; a
    descriptor of its own, the file's data being the inode's). The sync before the rename then
    waits for the last of the part only; without it the kernel would start writing the part back
    at its background dirty limit (by default a tenth of the memory), after the whole part. A failed sync is raised by
    the next :meth:`written` or by :meth:`close` (the sync before the rename might not see it again)."""

    def __init__(self, path: Path):
        self.descriptor = os.open(path, os.O_RDONLY)
        self.syncer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="part-writeback")
        self.unsynced, self.running = 0, None

    def written(self, nbytes: int) -> None:
        """Count bytes just written; start a sync when enough are and none runs (a failed one raises here)."""
        self.unsynced += nbytes
        if self.running is not None and self.running.done():
            self.running, done = None, self.running
            done.result()
        if self.unsynced >= WRITEBACK_BYTES and self.running is None:
            self.running, self.unsynced = self.syncer.submit(os.fdatasync, self.descriptor), 0

    def close(self) -> None:
        """Wait for the sync running (raising its error) and close the descriptor; again: nothing."""
        try:
            if self.running is not None:
                self.running, running = None, self.running
                running.result()
        finally:
            self.syncer.shutdown()
            if self.descriptor >= 0:
                self.descriptor, descriptor = -1, self.descriptor
                os.close(descriptor)


def _worker_threads(sites: int) -> int:
    """Threads that hash and write the sites' buffers: one per site, at most one per core (and 8)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(sites, cores, 8))


def _synced(path: Path) -> None:
    """``fsync`` of a file, or of a folder (which makes a rename in it durable)."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def all_finite(values: np.ndarray) -> bool:
    """``np.isfinite(values).all()``; for float16 through the exponent bits, 10x faster than numpy's float16 path."""
    if values.dtype == np.float16:
        return not ((values.view(np.uint16) & FLOAT16_EXPONENT) == FLOAT16_EXPONENT).any()
    return bool(np.isfinite(values).all())


def _file_exists(error: OSError) -> bool:
    """Whether HDF5 refused to create a file because it exists (exclusive mode)."""
    return error.errno == errno.EEXIST or "errno = 17" in str(error)
