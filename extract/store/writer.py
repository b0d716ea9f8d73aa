"""HDF5 shard store: ragged hidden states per site, CSR style, with metadata and provenance.

This module owns the on-disk format: no other module opens a part file (``h5py`` is imported
here only). A store is a folder of part files ``{prefix}-part{k:05d}.h5``. Each part holds, per site, a
``sites/{site}/data`` array (total_frames x D), ``sites/{site}/offsets`` (N + 1) and
``sites/{site}/valid`` (N, each utterance's speech frames), the utterance ids, per-utterance
metadata, and attributes, decoded in one place: :class:`StoreAttributes` (model, site table, frame
rates, dtypes, the run's config, provenance, skipped utterances, audio notes).

Two frame counts, named the same everywhere:

- **stored frames**: the rows an utterance has in ``data`` (``offsets[i + 1] - offsets[i]``;
  :meth:`ShardReader.stored_frames`, :meth:`ShardReader.stored_lengths`, ``Extractor.stored_lengths``).
- **speech frames**: how many of those hold speech (the ``valid`` dataset;
  :meth:`ShardReader.speech_lengths`, ``Extractor.speech_frames``). They equal the stored frames
  unless padding was kept on purpose (``--keep-padding``: Whisper stores its whole 30 s window,
  1500 frames, whatever the utterance's duration). F1_S and every "speech positions" quantity count these.

Writing is guarded three ways. A writer first claims the part (``extract.claims``): ``{part}.lock`` is created
atomically (``O_CREAT | O_EXCL``) and names the holder's host and pid, so a second writer of the
same part stops with a message naming the first; a claim whose process is gone is reported,
never broken. The part is then written under a temporary name opened in exclusive-create mode.
On close what the closed file holds is compared with what was written (the index through the
content checksum, the data through each site's data digest); only then is ``complete`` set and the file renamed, so
a reader never sees half a part, nor a part another process overwrote. The part is then flushed
to the disk (``fsync``) before its rename, and the rename itself after it, so a power cut leaves
either no part or a whole one under the final name.

Checksums: each site's bytes, in order, have a data digest, xxh3_128 (``xxhash``; the part's
``data_digest`` attribute names it; from part format 2 on, ``format_version``, each site's digest is
also an attribute of its ``data``). The part's content checksum, ``content_sha256``, is one
sha256 over the sites' data digests, offsets and speech frames and the ids, and from format 2 on
the per-utterance labels (``meta/*``) (:func:`content_checksum`):
what a part is verified against and what identities of a store are built from (an intervention
file's ``store``, the probe's fingerprint). :class:`ShardReader` compares them when it reads (the
index and labels when a store is opened, a site's data the first time a process reads it) and
refuses a store that lacks parts (:func:`store_incompleteness`); a resumed extraction checks a
complete part before it skips it (:func:`part_content_damage`). Parts written before the attribute have sha256 data
digests and no ``data_digest``; they verify as they always did. xxh3_128 is a non-cryptographic
hash: it catches damage (a cut file, a changed byte, another writer), not a forgery, which
nothing here guards against (a forger would rewrite ``content_sha256`` as well); it costs about a
tenth of sha256's CPU, which made the writer CPU-bound on small machines.

Speed (``benchmarks/store_writer.py``): states are copied into per-site buffers of whole chunks;
a full buffer goes to a worker thread (one a site, at most one a core and 8), which hashes its
bytes and writes it straight to the file (a chunk
written partly would be read back and rewritten, since the writer keeps no chunk cache), so that
sites are hashed beside the writes and the calling thread only checks and copies. The
writes keep the order the buffers were handed over in: a part's bytes do not depend on the threads.
HDF5 itself runs one call at a time (h5py holds one lock for the process), at the speed of a
``pwrite`` of the same chunk. The read-back verification at close reads each chunk with ``pread``
at the offset the file's chunk index gives (no copy through HDF5) and compares each site's data
digest, on the worker threads, while the part is flushed to the disk. That flush waits for the
part's last bytes only: the disk's writeback starts while the part is written (an ``fdatasync``
once :data:`WRITEBACK_BYTES` more were written, on a thread of its own: :class:`_Writeback`),
where the kernel would start it at its dirty limit, after the whole part. Memory: two buffers a
site, ``flush_bytes`` in all (64 MiB by default; at least two chunks of 1 MiB a site).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np
import xxhash

from extract import __version__, claims
from extract.diskfull import is_disk_full
from extract.fingerprint import compared

META_FIELDS = ("gender", "speaker", "language", "split", "dataset")
CHUNK_BYTES = 1 << 20
FLUSH_BYTES = 64 << 20  # buffered states (all sites) before they are written in whole chunks
WRITEBACK_BYTES = 64 << 20  # bytes handed to the file between two syncs started while a part is written
TEMPORARY_SUFFIX = ".h5.tmp"
FLOAT16_EXPONENT = 0x7C00  # all exponent bits set: infinity or NaN
DATA_DIGESTS = {"sha256": hashlib.sha256, "xxh3_128": xxhash.xxh3_128}  # a site's data digest, by the name a part records
DATA_DIGEST = "xxh3_128"  # what new parts record; "sha256" (the attribute absent) in parts written before it
FORMAT_VERSION = 2  # the part format new parts record (``format_version``); absent: 1, see :func:`part_format`
SITE_DIGEST = "digest"  # format 2: the attribute of ``sites/{site}/data`` holding that site's data digest


class StoreError(RuntimeError):
    pass


WRITER_ATTRIBUTES = ("complete", "utterances", "content_sha256", "data_digest", "format_version")  # set by PartWriter itself, never given to it


@dataclass(frozen=True)
class StoreAttributes:
    """A part's attributes, decoded: the one home of their on-disk encoding.

    On disk every attribute that is not a string, number or bool is a JSON string (``site_modules``,
    ``frame_rates``, ``config``, ``skipped``, ``audio_notes``, an F0 store's ``pitch_ranges``).
    ``None`` means the part does not record it (a store written by hand, or before it existed); it
    is then not written either, so a record read from a part writes back the same attributes.
    ``extra`` holds any other attribute as stored. What the writer records itself (``complete``,
    ``utterances``, ``content_sha256``, ``data_digest``) is not part of the record: see :func:`part_damage` and
    :func:`recorded_checksum`.
    """

    model_id: str | None = None
    revision: str | None = None
    family: str | None = None
    site_modules: dict[str, str] | None = None  # site -> "module:take", in the site table's forward order
    frame_rates: dict[str, float] | None = None  # site -> frames per second (NaN: not timed)
    model_dtype: str | None = None
    storage_dtype: str | None = None
    config: dict = field(default_factory=dict)  # what determines the stored values (ExtractionJob.store_config)
    package_version: str | None = None
    git_commit: str | None = None
    skipped: list[dict] | None = None  # utterances of the part that were skipped, with why
    audio_notes: dict[str, dict] | None = None  # utterance id -> what extraction changed in or noticed about its audio
    manifest_utterances: int | None = None  # the utterances the whole store holds when complete (all shards, skipped ones included)
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_attrs(cls, attrs, where: str | Path = "store") -> StoreAttributes:
        """The record of a part's raw attributes (an h5py ``AttributeManager`` or a dict); a JSON
        attribute that does not parse is :class:`DamagedPartError` naming ``where``."""
        known = {item.name for item in fields(cls)} - {"extra"}
        values, extra = {}, {}
        for key in attrs:
            if key in WRITER_ATTRIBUTES:
                continue
            value = attrs[key]
            if key not in known:
                extra[key] = value
            elif key in _JSON_FIELDS:
                values[key] = _decoded(value, key, where)
            else:
                values[key] = _plain(value)
        if values.get("config") is None:
            values["config"] = {}
        return cls(**values, extra=extra)

    def to_attrs(self) -> dict:
        """The attributes as written: scalars as they are, everything else as JSON text; unrecorded (None) left out."""
        recorded = {item.name: getattr(self, item.name) for item in fields(self) if item.name != "extra"}
        recorded |= self.extra
        return {key: _encoded(value) for key, value in recorded.items() if value is not None}

    def frame_rate(self, site: str) -> float:
        """Frames per second the extraction recorded for ``site`` (NaN when it recorded none)."""
        return float((self.frame_rates or {}).get(site, float("nan")))

    def site_module(self, site: str) -> str:
        """The ``module:take`` of ``site`` in the recorded site table ("" when it recorded none)."""
        return (self.site_modules or {}).get(site, "")


_JSON_FIELDS = ("site_modules", "frame_rates", "config", "skipped", "audio_notes")


def _encoded(value):
    return value if isinstance(value, (str, int, float, bool)) else json.dumps(value)


def _plain(value):
    """A scalar attribute as Python: h5py gives numpy scalars for numbers and bools."""
    return value.item() if isinstance(value, np.generic) else value


def _decoded(value, key: str, where):
    if not isinstance(value, str):
        return value
    if not value:
        return None
    try:
        return json.loads(value)
    except ValueError as error:
        raise DamagedPartError(Path(where), f"attribute {key} is not JSON: {error}") from None


class ClaimError(StoreError, claims.ClaimError):
    """Another writer (alive, or a dead one whose claim was left behind) holds the part."""


class DamagedPartError(StoreError):
    """A part with its final name that cannot be read, or is not marked complete.

    A part gets its final name only once it is complete and verified, so this is damage done
    afterwards (a cut copy, a full disk while copying, a failing drive, a hand edit): readers refuse
    it rather than leave its utterances out; the extraction rerun writes it again."""

    def __init__(self, part: Path, problem: str, command: str = "experiments.extract"):
        super().__init__(f"{part}: damaged part ({problem}); rerun the {command} command that wrote it (same --out) to re-extract it")
        self.part, self.problem = Path(part), problem


def writer_command(config: dict) -> str:
    """The command that writes a store of ``config`` (what a refusal tells the user to rerun)."""
    return "experiments.decoder_states" if config.get("kind") == "decoder_states" else "experiments.extract"


def part_name(shard_index: int, num_shards: int, part: int) -> str:
    """The file name of part ``part`` of shard ``shard_index`` of ``num_shards``."""
    return f"shard{shard_index:04d}of{num_shards:04d}-part{part:05d}.h5"


def _string_dtype():
    import h5py

    return h5py.string_dtype(encoding="utf-8")


def temporary_path(path: Path) -> Path:
    return path.with_name(path.name.removesuffix(".h5") + TEMPORARY_SUFFIX)


class PartClaim(claims.Claim):
    """An exclusive claim on one part file (:class:`extract.claims.Claim`): ``{part}.lock``, naming host and pid.

    Taking it fails with :class:`ClaimError` when the lock exists. The message says whether its
    holder still runs (wait for it, or write elsewhere) or is gone (a killed run: check, delete the
    lock and the temporary file, rerun); a claim is never taken over silently. With
    ``reclaim_stale`` a claim whose holder ran on this host and is gone (a job killed with SIGKILL
    and requeued) is taken over, its temporary file deleted, and ``on_reclaim`` is told which one.
    """

    def __init__(self, part: Path, reclaim_stale: bool = False, on_reclaim=None):
        self.part = Path(part)
        super().__init__(self.part, reclaim_stale, on_reclaim)

    def discard_leftovers(self) -> None:
        temporary_path(self.part).unlink(missing_ok=True)

    def unwritable(self) -> StoreError:
        return StoreError(f"disk full while writing the claim {self.lock}: nothing was written; free space and rerun (complete parts are kept and skipped)")

    def refusal(self) -> ClaimError:
        return _claim_refused(self.part, self.lock)


def _claim_refused(part: Path, lock: Path) -> ClaimError:
    holder = claims.read_holder(lock)
    if holder is None:
        return ClaimError(
            f"{part} is claimed by another writer ({lock} is being created or unreadable); "
            f"if no other extraction writes to {part.parent}, delete {lock} and rerun"
        )
    who = claims.describe_holder(holder)
    if claims.stale_holder(lock):
        return ClaimError(
            f"{part}: stale claim {lock} by {who}: that process is gone (a killed run); check that no other job "
            f"writes to {part.parent}, then rerun with --reclaim-stale (or delete {lock} and "
            f"{temporary_path(part).name} if present)"
        )
    return ClaimError(
        f"{part} is being written by {who} (claim {lock}): another extraction writes to this --out; "
        "let it finish and rerun to resume, or use another --out folder"
    )


class PartWriter:
    """Writes one part file; use as a context manager. ``abort()`` deletes the temporary file.

    Takes its own :class:`PartClaim` unless given one the caller holds (the caller then releases it).
    A write that fails (a full disk, a file size limit) discards the part, releases the claim and
    raises :class:`StoreError` naming the part. Chunks are written through to the file (no chunk
    cache): HDF5 then reports a failed write from the call that made it, not later while it frees
    a dataset, where it could only print tracebacks and leave a broken file that crashes the process.
    Added states are copied into buffers of whole chunks and written when one fills (see the
    module's notes on speed).
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
        self.digests = {site: _SiteDigest(self.data_digest) for site in self.site_dims}
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
        buffer handed over before this one is written (and counted towards the next early sync,
        :class:`_Writeback`). The hashing runs beside other sites' tasks; the writes keep the order
        the buffers were handed over in, so the file's bytes do not depend on the threads' timing
        (HDF5 takes one call at a time anyway). Tasks start in the order they were submitted, so
        the one waited for is running or done."""
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
        reason = os.strerror(error.errno) if isinstance(error, OSError) and error.errno else _first_line(error)
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
        """Read the closed part back and compare it with what was written, while the disk takes it (fsync).

        The data is compared through each site's data digest (the one recorded), computed again from
        the bytes read straight from the chunks the file's index points to, on the worker threads
        (see :func:`_stored_digests`); the index (offsets, speech frames, ids) through the content
        checksum recomputed from what the file holds with the sites' digests as written."""
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


class _SiteDigest:
    """A site's data digest over its bytes in order (``algorithm``: a name in :data:`DATA_DIGESTS`):
    recorded through the content checksum, and compared with the same digest of the bytes read back."""

    def __init__(self, algorithm: str):
        self.digest = DATA_DIGESTS[algorithm]()

    def update(self, data: memoryview) -> None:
        self.digest.update(data)

    def hexdigest(self) -> str:
        return self.digest.hexdigest()


@dataclass(frozen=True)
class _ChunkLayout:
    """Where a site's data lies in its part file: its rows, the bytes of a row, and each chunk's
    first row, file offset and stored size, in row order (from the file's chunk index)."""

    rows: int
    row_bytes: int
    chunks: list[tuple[int, int, int]]  # (first row, byte offset, stored bytes)
    chunk_rows: int
    unfiltered: bool

    @classmethod
    def of(cls, dataset) -> _ChunkLayout:
        found = []
        dataset.id.chunk_iter(found.append)
        return cls(
            rows=int(dataset.shape[0]),
            row_bytes=int(dataset.shape[1]) * dataset.dtype.itemsize,
            chunks=sorted((int(info.chunk_offset[0]), int(info.byte_offset), int(info.size)) for info in found),
            chunk_rows=int(dataset.chunks[0]),
            unfiltered=all(info.filter_mask == 0 for info in found),
        )

    def complete(self) -> bool:
        """Whether every chunk of the rows is stored, whole and unfiltered (what the writer writes)."""
        starts = list(range(0, self.rows, self.chunk_rows))
        sizes = {self.chunk_rows * self.row_bytes}
        return self.unfiltered and [chunk[0] for chunk in self.chunks] == starts and {chunk[2] for chunk in self.chunks} <= sizes


def _stored_digests(path: Path, layouts: dict[str, _ChunkLayout], algorithm: str, workers: ThreadPoolExecutor) -> dict[str, str | None]:
    """The data digest (``algorithm``) of each site's data as ``path`` holds it, read with ``pread`` from
    the offsets its chunk index gives (no copy through HDF5), one site per task on ``workers``.
    A site whose chunks are not all there, whole and unfiltered, is None (never a written digest)."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        tasks = {site: workers.submit(_chunks_digest, descriptor, layout, algorithm) for site, layout in layouts.items()}
        return {site: task.result() for site, task in tasks.items()}
    finally:
        os.close(descriptor)


def _chunks_digest(descriptor: int, layout: _ChunkLayout, algorithm: str) -> str | None:
    if not layout.complete():
        return None
    digest, block = _SiteDigest(algorithm), bytearray(layout.chunk_rows * layout.row_bytes)
    for first, offset, _ in layout.chunks:
        wanted = memoryview(block)[: min(layout.chunk_rows, layout.rows - first) * layout.row_bytes]
        if os.preadv(descriptor, [wanted], offset) != len(wanted):
            return None  # the file ends before the chunk it indexes
        digest.update(wanted)
    return digest.hexdigest()


def _data_blocks(dataset) -> Iterator[memoryview]:
    """A site's data as stored, in order, in blocks of about 16 chunks (what the checksums read)."""
    step = max(1, CHUNK_BYTES * 16 // max(1, dataset.shape[1] * dataset.dtype.itemsize))
    for start in range(0, dataset.shape[0], step):
        yield _bytes_of(dataset[start : start + step])


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


def _bytes_of(array: np.ndarray) -> memoryview:
    """The array's bytes without a copy (C order, as stored)."""
    return memoryview(np.ascontiguousarray(array)).cast("B")


def _content_digest(
    site_digests: dict[str, str],
    offsets: dict[str, Sequence[int]],
    valid: dict[str, Sequence[int]],
    ids: Sequence[str],
    meta: dict[str, list] | None = None,
) -> str:
    """One sha256 over every site's data digest, offsets and speech frames (``valid``), and the ids;
    from format 2 on also over the per-utterance labels ``meta`` (:func:`_meta_columns`), so that a
    part whose genders, speakers or splits were edited no longer matches its checksum."""
    total = hashlib.sha256()
    for site in sorted(site_digests):
        total.update(site.encode() + b"\0" + site_digests[site].encode())
        total.update(np.asarray(offsets[site], dtype=np.int64).tobytes() + np.asarray(valid[site], dtype=np.int64).tobytes())
    total.update("\n".join(ids).encode())
    if meta is not None:
        for name in META_FIELDS:
            total.update(b"\0" + name.encode() + b"\0" + json.dumps(meta[name], ensure_ascii=False).encode())
        total.update(b"\0duration\0" + np.asarray(meta["duration"], dtype=np.float64).tobytes())
    return total.hexdigest()


def _meta_columns(meta: dict[str, list]) -> dict[str, list]:
    """The labels as the content checksum takes them: each text column as strings, durations as float64."""
    return {name: [str(value) for value in meta[name]] for name in META_FIELDS} | {"duration": np.asarray(meta["duration"], dtype=np.float64)}


def part_format(handle) -> int:
    """The format of an open part: its ``format_version`` (1 where absent: parts written before the
    attribute, whose checksum leaves the labels out and which record no per-site digest)."""
    return int(handle.attrs.get("format_version", 1))


def _stored_meta(handle) -> dict[str, list]:
    return _meta_columns({name: handle[f"meta/{name}"].asstr()[:].tolist() for name in META_FIELDS} | {"duration": handle["meta/duration"][:]})


def _index_digest(handle, site_digests: dict[str, str]) -> str:
    """The content checksum of an open part from its index as stored (offsets, speech frames, ids and,
    from format 2 on, labels) and the given data digests of its sites."""
    sites = list(handle["sites"].keys()) if "sites" in handle else []
    ids = handle["ids"].asstr()[:].tolist() if "ids" in handle else []
    return _content_digest(
        site_digests,
        {site: handle[f"sites/{site}/offsets"][:] for site in sites},
        {site: handle[f"sites/{site}/valid"][:] for site in sites},
        ids,
        _stored_meta(handle) if part_format(handle) >= 2 else None,
    )


def _recorded_site_digests(handle) -> dict[str, str]:
    """Each site's data digest as a format-2 part records it (``""`` where its attribute is missing)."""
    sites = list(handle["sites"].keys()) if "sites" in handle else []
    return {site: str(handle[f"sites/{site}/data"].attrs.get(SITE_DIGEST, "")) for site in sites}


def site_data_digest(handle, site: str) -> str | None:
    """The data digest of ``site``'s data as an open part holds it, in the algorithm it records: read
    with ``pread`` from the chunks its index gives where the writer's layout is whole (the fast path),
    else through HDF5. None when the file ends before a chunk it indexes."""
    algorithm = recorded_data_digest(handle)
    dataset = handle[f"sites/{site}/data"]
    if dataset.chunks is not None:
        layout = _ChunkLayout.of(dataset)
        if layout.complete():
            descriptor = os.open(handle.filename, os.O_RDONLY)
            try:
                return _chunks_digest(descriptor, layout, algorithm)
            finally:
                os.close(descriptor)
    digest = _SiteDigest(algorithm)
    for block in _data_blocks(dataset):
        digest.update(block)
    return digest.hexdigest()


def content_checksum(handle) -> str:
    """The content checksum recomputed from an open part file (compare with ``attrs['content_sha256']``),
    with the data digest the part records (:func:`recorded_data_digest`)."""
    algorithm = recorded_data_digest(handle)
    sites = list(handle["sites"].keys()) if "sites" in handle else []
    site_digests = {}
    for site in sites:
        digest = _SiteDigest(algorithm)
        for block in _data_blocks(handle[f"sites/{site}/data"]):
            digest.update(block)
        site_digests[site] = digest.hexdigest()
    return _index_digest(handle, site_digests)


def recorded_data_digest(handle) -> str:
    """The algorithm of an open part's data digests: its ``data_digest`` attribute, or sha256 where it
    has none (every part written before the attribute). One this version does not know is refused
    in one line naming it and the version that wrote the part."""
    name = str(handle.attrs.get("data_digest", "sha256"))
    if name in DATA_DIGESTS:
        return name
    writer = handle.attrs.get("package_version")
    written_by = f"speech-gender-probing {writer}" if writer else "a version of speech-gender-probing that it does not record"
    raise StoreError(
        f"{handle.filename}: its data digests are {name!r} (attribute data_digest), written by {written_by}; "
        f"speech-gender-probing {__version__} knows {', '.join(sorted(DATA_DIGESTS))}: verify the part with the version that wrote it or a newer one"
    )


def _file_exists(error: OSError) -> bool:
    """Whether HDF5 refused to create a file because it exists (exclusive mode)."""
    return error.errno == errno.EEXIST or "errno = 17" in str(error)


def part_damage(path: Path) -> str | None:
    """What is wrong with the existing part file ``path`` (unreadable, or not marked complete), or None."""
    import h5py

    try:
        with h5py.File(path, "r") as handle:
            complete = bool(handle.attrs.get("complete", False))
    except OSError as error:
        return f"cannot be read as HDF5: {_first_line(error)}"
    return None if complete else "not marked complete"


@contextmanager
def _opened(part: Path):
    """``part`` open for reading; one that cannot be read is :class:`DamagedPartError`."""
    import h5py

    try:
        handle = h5py.File(part, "r")
    except OSError as error:
        raise DamagedPartError(part, f"cannot be read as HDF5: {_first_line(error)}") from error
    with handle:
        yield handle


def part_attributes(part: str | Path) -> StoreAttributes:
    """The decoded attributes of one part file."""
    with _opened(Path(part)) as handle:
        return StoreAttributes.from_attrs(handle.attrs, part)


def part_ids(part: str | Path) -> list[str]:
    """The ids of the utterances one part file stores, in its order (its skipped ones are in :attr:`StoreAttributes.skipped`)."""
    with _opened(Path(part)) as handle:
        return handle["ids"].asstr()[:].tolist()


def part_labels(part: str | Path) -> dict[str, dict[str, str]]:
    """Each stored utterance's labels in one part file (``meta/*`` but the duration), by id."""
    with _opened(Path(part)) as handle:
        columns = {name: handle[f"meta/{name}"].asstr()[:].tolist() for name in META_FIELDS}
        return {utterance_id: {name: columns[name][row] for name in META_FIELDS} for row, utterance_id in enumerate(handle["ids"].asstr()[:])}


def recorded_checksum(part: str | Path, recompute: bool = False) -> str:
    """The content checksum the writer recorded in ``part`` (``content_sha256``). A part written before
    it existed has none: "" then, or with ``recompute`` the checksum recomputed from its content."""
    with _opened(Path(part)) as handle:
        recorded = str(handle.attrs.get("content_sha256", ""))
        return recorded or (content_checksum(handle) if recompute else "")


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def check_part(path: Path) -> Path:
    """``path`` when it is a complete, readable part; else :class:`DamagedPartError`."""
    problem = part_damage(path)
    if problem is not None:
        raise DamagedPartError(path, problem)
    return Path(path)


def is_complete(path: Path) -> bool:
    """Whether ``path`` is a finished part: it exists, reads and is marked complete. The writer's
    view: a damaged part is not finished, so the extraction rerun writes it again."""
    return Path(path).is_file() and part_damage(path) is None


def complete_parts(folder: Path) -> list[Path]:
    """The parts of a store folder, in name order; the readers' view: every final-named part
    (``*.h5``) must be complete and readable, and a damaged one is refused
    (:class:`DamagedPartError`), never left out. A part still being written, or abandoned by a
    killed writer, has its temporary name (``*.h5.tmp``) and is not a part."""
    return [check_part(path) for path in sorted(Path(folder).glob("*.h5"))]


def store_parts(path: str | Path) -> list[Path]:
    """The parts of a store: :func:`complete_parts` of a folder, or the one part file ``path`` names, checked."""
    path = Path(path)
    return [check_part(path)] if path.is_file() else complete_parts(path)


def index_damage(handle) -> str | None:
    """What is wrong with an open part's index and labels (offsets, speech frames, ids, ``meta/*``)
    against its content checksum, or None. Only a format-2 part can say without reading its data
    (it records each site's digest); for an older one this is None and :func:`site_damage` checks
    the whole part, its index included, with its data."""
    recorded = str(handle.attrs.get("content_sha256", ""))
    if part_format(handle) < 2:
        return None
    if not recorded:
        return "no content checksum (content_sha256), which every part of its format records"
    digests = _recorded_site_digests(handle)
    missing = [site for site, digest in digests.items() if not digest]
    if missing:
        return f"no recorded data digest for site {', '.join(missing)}"
    if _index_digest(handle, digests) != recorded:
        return (
            "its index or labels (ids, offsets, meta/gender, speaker, language, split, dataset, duration) differ from its content checksum: "
            "edited after it was written"
        )
    return None


def site_damage(handle, site: str | None = None) -> str | None:
    """What is wrong with the data of ``site`` (None: every site) of an open part against the
    digests it records, or None. A format-2 part compares the site's own digest; an older part
    has none, so its whole content (every site, and the index) is compared with its checksum
    (a part so old that it records no checksum cannot be checked: None)."""
    recorded = str(handle.attrs.get("content_sha256", ""))
    if part_format(handle) < 2:
        if recorded and content_checksum(handle) != recorded:
            return f"its content differs from its recorded checksum ({recorded_data_digest(handle)} data digests): damaged bytes"
        return None
    digests = _recorded_site_digests(handle)
    for name in digests if site is None else [site]:
        if site_data_digest(handle, name) != digests[name]:
            return f"the data of site {name} differs from its recorded {recorded_data_digest(handle)} digest: damaged bytes"
    return None


def part_content_damage(path: Path) -> str | None:
    """Everything about a complete part checked against what it records, or None: its index and labels,
    every site's data and (a decoder-state part) its generated tokens. What a resumed extraction
    checks before it skips a part."""
    with _opened(Path(path)) as handle:
        problem = index_damage(handle) or site_damage(handle)
        if problem is None and TOKENS_GROUP in handle:
            if not _read_tokens(handle[TOKENS_GROUP])[4]:
                problem = TOKENS_DAMAGED
        return problem


@dataclass(frozen=True)
class Incompleteness:
    """What a store lacks: ``expected`` utterances when complete (None: not known), ``used`` (those
    its parts hold), the expected parts that are ``missing`` with their utterances
    (``missing_utterances``), and the ``claims`` (``*.lock``, ``*.h5.tmp``) beside its parts."""

    store: Path
    expected: int | None
    used: int
    missing: tuple[str, ...]
    missing_utterances: int | None
    claims: tuple[str, ...]
    command: str

    def message(self) -> str:
        what = []
        if self.missing:
            count = f"{self.missing_utterances} of its {self.expected} utterances" if self.expected is not None else "utterances"
            what.append(f"{count} are missing (part(s) {_listed(self.missing)} absent)")
        if self.claims:
            what.append(f"claim(s) or unfinished part(s) {_listed(self.claims)} sit beside its parts (a writer still runs, or was killed)")
        return (
            f"{self.store}: incomplete store: {'; '.join(what)}; complete it by rerunning the {self.command} command that wrote it "
            f"(same --out; --reclaim-stale for a killed run's claims), or pass --allow-partial to use the {self.used} utterances it holds"
        )

    def record(self) -> dict:
        """The ``partial`` record of a result built from this store on purpose (``--allow-partial``)."""
        return {"used": self.used, "expected": self.expected}


def _listed(names: Sequence[str], most: int = 3) -> str:
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def expected_parts(utterances: int, num_shards: int, utterances_per_part: int) -> dict[str, int]:
    """Every part a complete store of ``utterances`` holds, by name, with its utterances (shard ``s``
    takes every ``num_shards``-th utterance from ``s`` on, cut into parts of ``utterances_per_part``)."""
    parts = {}
    for shard in range(num_shards):
        mine = len(range(shard, utterances, num_shards))
        for number, start in enumerate(range(0, mine, utterances_per_part)):
            parts[part_name(shard, num_shards, number)] = min(utterances_per_part, mine - start)
    return parts


def _expected_utterances(attributes: StoreAttributes) -> int | None:
    """The utterances a complete store holds: recorded by its writer (``manifest_utterances``), else, for
    a part written before that, counted in the manifest its config names when that file still has
    the content the store recorded (its sha256); None when neither is there."""
    if attributes.manifest_utterances is not None:
        return int(attributes.manifest_utterances)
    config = attributes.config
    manifest, sha256 = config.get("manifest"), config.get("manifest_sha256")
    if not manifest or not sha256 or not Path(manifest).is_file():
        return None
    from extract.manifest import read_manifest
    from extract.provenance import file_sha256

    if file_sha256(manifest) != sha256:
        return None
    return len(read_manifest(manifest)[: config.get("limit")])


def store_incompleteness(store: Path, parts: Sequence[Path], attributes: Sequence[StoreAttributes], used: int) -> Incompleteness | None:
    """What the store of ``parts`` (their decoded ``attributes``; ``used``: the utterances they hold)
    lacks, or None when it is whole: every part its writer's config (``num_shards``,
    ``utterances_per_part``) and utterance count expect is there, and no claim or temporary part sits
    beside them. A store without that config (written by hand, an F0 or embedding store) is checked
    for claims only; one whose utterance count is not known (a part older than
    ``manifest_utterances`` whose manifest moved or changed) for gaps in each shard's parts."""
    folder = Path(store) if Path(store).is_dir() else Path(store).parent
    claims_beside = tuple(sorted(path.name for pattern in ("*.h5.lock", f"*{TEMPORARY_SUFFIX}") for path in folder.glob(pattern)))
    config = attributes[0].config if attributes else {}
    command = writer_command(config)
    present = {Path(part).name for part in parts}
    shards, per_part = config.get("num_shards"), config.get("utterances_per_part")
    missing, missing_utterances, expected = (), None, None
    if isinstance(shards, int) and isinstance(per_part, int) and shards >= 1 and per_part >= 1:
        expected = _expected_utterances(attributes[0])
        if expected is not None:
            wanted = expected_parts(expected, shards, per_part)
            missing = tuple(name for name in wanted if name not in present)
            missing_utterances = sum(wanted[name] for name in missing)
        else:
            missing = _gaps(present, shards)
    if not missing and not claims_beside:
        return None
    return Incompleteness(Path(store), expected, used, missing, missing_utterances, claims_beside, command)


def _gaps(present: set[str], num_shards: int) -> tuple[str, ...]:
    """Parts missing before the last present part of each shard (the tail cannot be known)."""
    gaps = []
    for shard in range(num_shards):
        prefix = part_name(shard, num_shards, 0).removesuffix("00000.h5")
        numbers = {int(name[len(prefix) : -3]) for name in present if name.startswith(prefix) and name[len(prefix) : -3].isdigit()}
        gaps.extend(part_name(shard, num_shards, n) for n in range(max(numbers, default=0)) if n not in numbers)
    return tuple(gaps)


class IncompleteStoreError(StoreError):
    """A store that lacks parts or sits beside claims, read without ``allow_partial``."""

    def __init__(self, incompleteness: Incompleteness):
        super().__init__(incompleteness.message())
        self.incompleteness = incompleteness


class ShardReader:
    """Read a store folder (or one part file) lazily; safe to open inside DataLoader workers.

    h5py handles are opened on first use in each process and never pickled. :attr:`info` holds the
    store's decoded attributes (:class:`StoreAttributes`, from its first part that stores utterances);
    :meth:`skipped` lists every part's skipped utterances.

    The store is checked as a whole before a number is read from it: a store missing parts, or beside
    a writer's claims, is :class:`IncompleteStoreError` unless ``allow_partial`` (then
    :attr:`partial` says what it lacks: :class:`Incompleteness`, None when whole); each part's index
    and labels are compared with its content checksum when it is opened, and a site's data with its
    recorded digest the first time this process reads that site of that part (:class:`DamagedPartError`).
    """

    def __init__(self, path: str | Path, allow_partial: bool = False):
        path = Path(path)
        self.parts = store_parts(path)
        if not self.parts:
            raise StoreError(f"{path}: no complete shard files")
        self._verified: set[tuple[int, str | None]] = set()  # (part, site) whose data matched its digest in this process
        self._index: dict[str, tuple[int, int]] = {}
        self._position: dict[str, int] = {}
        self._ids: list[str] = []
        self._meta: dict[str, list] = {name: [] for name in (*META_FIELDS, "duration")}
        sites = None
        configurations: list[tuple[dict, list[Path]]] = []
        self._audio_notes: dict[str, dict] = {}
        self._attributes: list[StoreAttributes] = []
        for part_number, part in enumerate(self.parts):
            with _opened(part) as handle:
                if "config" not in handle.attrs:  # every writer records it (an empty one included): removed afterwards
                    raise DamagedPartError(part, "no config attribute: the part does not say which model, settings and manifest it holds")
                attributes = StoreAttributes.from_attrs(handle.attrs, part)
                problem = index_damage(handle)
                if problem is not None:
                    raise DamagedPartError(part, problem, writer_command(attributes.config))
                self._attributes.append(attributes)
                _group_by_configuration(configurations, attributes.config, part)
                self._audio_notes.update(attributes.audio_notes or {})
                part_sites = list(handle["sites"].keys()) if "sites" in handle else []
                if not handle["ids"].shape[0]:
                    continue  # every utterance of this part was skipped: nothing to read
                if sites is None:
                    sites, self.info = part_sites, attributes
                    self._dims = {site: int(handle[f"sites/{site}/data"].shape[1]) for site in part_sites}
                elif set(part_sites) != set(sites):
                    raise StoreError(f"{part}: sites {part_sites} differ from {sites}")
                for row, utterance_id in enumerate(handle["ids"].asstr()[:]):
                    if utterance_id in self._index:
                        raise StoreError(f"{part}: duplicate utterance {utterance_id}")
                    self._index[utterance_id] = (part_number, row)
                    self._position[utterance_id] = len(self._ids)
                    self._ids.append(utterance_id)
                for name in self._meta:
                    dataset = handle[f"meta/{name}"]
                    self._meta[name].extend(dataset[:].tolist() if name == "duration" else dataset.asstr()[:].tolist())
        refuse_mixed_configurations(configurations, path)
        self.partial = store_incompleteness(path, self.parts, self._attributes, len(self._ids))
        if self.partial is not None and not allow_partial:
            raise IncompleteStoreError(self.partial)
        if sites is None:
            raise StoreError(f"{path}: the store holds no utterances")
        self.sites = _site_order(sites, self.info, path)
        self._handles: dict[int, object] = {}
        self._pid = None
        self._token_tables: dict[int, list[GeneratedTokens]] = {}  # part -> its generated tokens, read and checked once

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_handles"], state["_pid"] = {}, None
        return state

    @property
    def attrs(self) -> dict:
        """Deprecated: the attributes as stored (JSON text for everything but scalars); read :attr:`info`, decoded, instead."""
        return self.info.to_attrs()

    def _handle(self, part_number: int):
        """The part's h5py file, opened once per process (never pickled)."""
        import h5py

        if self._pid != os.getpid():
            self._handles, self._pid = {}, os.getpid()
        if part_number not in self._handles:
            part = self.parts[part_number]
            try:
                self._handles[part_number] = h5py.File(part, "r")
            except OSError as error:  # damaged since this reader listed the store
                raise DamagedPartError(part, f"cannot be read as HDF5: {_first_line(error)}") from error
        return self._handles[part_number]

    @property
    def ids(self) -> list[str]:
        return list(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    def dim(self, site: str) -> int:
        self._check_site(site)
        return self._dims[site]

    def meta(self, utterance_id: str) -> dict:
        if utterance_id not in self._position:
            raise KeyError(f"no utterance {utterance_id!r} in the store")
        position = self._position[utterance_id]
        return {name: values[position] for name, values in self._meta.items()}

    def metadata(self) -> dict[str, list]:
        """All metadata columns, aligned with :attr:`ids`."""
        return {name: list(values) for name, values in self._meta.items()}

    def audio_notes(self) -> dict[str, dict]:
        """What extraction changed in or noticed about each utterance's audio (trimmed, a header
        promising more samples than the file holds, float samples outside [-1, 1]); only utterances with notes."""
        return dict(self._audio_notes)

    def _check_site(self, site: str) -> None:
        if site not in self.sites:
            raise KeyError(f"no site {site!r}; the store has {', '.join(self.sites)}")

    def _site(self, part: int, site: str):
        """The h5py group of ``site`` in part ``part``, its data compared with its recorded digest the
        first time this process reads it (a part older than format 2: the whole part, once)."""
        handle = self._handle(part)
        key = (part, site if part_format(handle) >= 2 else None)
        if key not in self._verified:
            problem = site_damage(handle, key[1])
            if problem is not None:
                raise DamagedPartError(self.parts[part], problem, writer_command(self._attributes[part].config))
            self._verified.add(key)
        return handle[f"sites/{site}"]

    def skipped(self) -> list[dict]:
        """The utterances every part skipped at extraction (missing, corrupt, silent audio), with why."""
        return [entry for attributes in self._attributes for entry in attributes.skipped or []]

    def stored_frames(self, site: str, utterance_id: str) -> int:
        """The stored frames of one utterance at ``site`` (speech, and padding where it was kept)."""
        part, row = self._index[utterance_id]
        offsets = self._handle(part)[f"sites/{site}/offsets"]
        return int(offsets[row + 1] - offsets[row])

    def length(self, site: str, utterance_id: str) -> int:
        """Deprecated name of :meth:`stored_frames` (kept for callers of the documented ``length()``)."""
        return self.stored_frames(site, utterance_id)

    def speech_lengths(self, site: str, ids: Sequence[str] | None = None) -> np.ndarray:
        """Speech frames per utterance at ``site`` (int64), aligned with ``ids`` (default: :attr:`ids`).

        From each part's ``sites/{site}/valid``; a part written before that existed derives them:
        ``ceil(duration x frame rate)`` capped at the stored frames when it kept padding, else the
        stored frames (without kept padding every stored frame is speech).
        """
        self._check_site(site)
        ids = self._ids if ids is None else list(ids)
        lengths = np.zeros(len(ids), dtype=np.int64)
        for part, rows in self._by_part(ids).items():
            handle = self._handle(part)
            group = handle[f"sites/{site}"]
            if "valid" in group:
                valid = group["valid"][:]
            else:
                valid = _derived_speech_lengths(handle, site, self.parts[part], self._attributes[part])
            for position, row in rows:
                lengths[position] = valid[row]
        return lengths

    def get(self, site: str, utterance_id: str) -> np.ndarray:
        self._check_site(site)
        if utterance_id not in self._index:
            raise KeyError(f"no utterance {utterance_id!r} in the store")
        part, row = self._index[utterance_id]
        group = self._site(part, site)
        start, end = group["offsets"][row : row + 2]
        return self._finite(group["data"][start:end].astype(np.float32), part, site, utterance_id)

    def _finite(self, values: np.ndarray, part: int, site: str, utterance_id: str) -> np.ndarray:
        if not np.isfinite(values).all():
            raise StoreError(
                f"{self.parts[part]}: non-finite values at site {site} for utterance {utterance_id}; "
                "re-extract it (with --storage-dtype float32 if float16 overflowed)"
            )
        return values

    def _by_part(self, ids: Sequence[str]) -> dict[int, list[tuple[int, int]]]:
        grouped: dict[int, list[tuple[int, int]]] = {}
        for position, utterance_id in enumerate(ids):
            part, row = self._index[utterance_id]
            grouped.setdefault(part, []).append((position, row))
        return grouped

    def leading(self, site: str, positions: int, ids: Sequence[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The first ``positions`` frames of each utterance, zero-padded: ``([N, P, D] float32, lengths [N])``.

        ``lengths`` are the stored frames (capped at P): rows beyond them are zeros this call added,
        never data. Where padding was kept, stored frames past the speech frames are the model's
        states of that padding (:meth:`speech_lengths` says where speech ends).
        """
        ids = self._ids if ids is None else list(ids)
        return self.frames(site, 0, positions, ids), np.minimum(self.stored_lengths(site, ids), positions)

    def frames(self, site: str, begin: int, end: int, ids: Sequence[str] | None = None) -> np.ndarray:
        """Frames ``begin:end`` of each utterance, ``[N, end - begin, D]`` float32, zero past its stored
        frames. Reads those rows only, so that positions can be probed a chunk at a time in bounded memory."""
        self._check_site(site)
        ids = self._ids if ids is None else list(ids)
        out = np.zeros((len(ids), end - begin, self.dim(site)), dtype=np.float32)
        for part, rows in self._by_part(ids).items():
            group = self._site(part, site)
            offsets, data = group["offsets"][:], group["data"]
            for position, row in rows:
                first, stop = int(offsets[row]) + begin, min(int(offsets[row]) + end, int(offsets[row + 1]))
                if stop > first:
                    out[position, : stop - first] = self._finite(data[first:stop].astype(np.float32), part, site, ids[position])
        return out

    def stored_lengths(self, site: str, ids: Sequence[str] | None = None) -> np.ndarray:
        """Stored frames per utterance at ``site`` (speech, and padding where it was kept), aligned with ``ids``."""
        self._check_site(site)
        ids = self._ids if ids is None else list(ids)
        lengths = np.zeros(len(ids), dtype=np.int64)
        for part, rows in self._by_part(ids).items():
            offsets = self._handle(part)[f"sites/{site}/offsets"][:]
            for position, row in rows:
                lengths[position] = offsets[row + 1] - offsets[row]
        return lengths

    def storage_dtype(self, site: str) -> np.dtype:
        """The float dtype the site's frames are stored in (float16 or float32)."""
        self._check_site(site)
        return self._handle(0)[f"sites/{site}/data"].dtype

    def means(self, site: str, ids: Sequence[str] | None = None) -> np.ndarray:
        """Mean over speech frames per utterance (kept padding left out): ``[N, D]`` float32, read one utterance at a time."""
        self._check_site(site)
        ids = self._ids if ids is None else list(ids)
        speech = self.speech_lengths(site, ids)
        out = np.zeros((len(ids), self.dim(site)), dtype=np.float32)
        for part, rows in self._by_part(ids).items():
            group = self._site(part, site)
            offsets = group["offsets"][:]
            data = group["data"]
            for position, row in rows:
                first = int(offsets[row])
                states = self._finite(data[first : first + int(speech[position])].astype(np.float32), part, site, ids[position])
                out[position] = states.mean(axis=0)
        return out

    def iter_utterances(self, site: str, ids: Iterable[str] | None = None):
        for utterance_id in self._ids if ids is None else ids:
            yield utterance_id, self.get(site, utterance_id)

    def tokens(self, utterance_id: str) -> GeneratedTokens:
        """The generated tokens a decoder-state store (``experiments.decoder_states``) aligns with each
        site's rows for ``utterance_id``; a store of encoder sites has none (:class:`StoreError`)."""
        if utterance_id not in self._index:
            raise KeyError(f"no utterance {utterance_id!r} in the store")
        part, row = self._index[utterance_id]
        if part not in self._token_tables:
            self._token_tables[part] = _part_tokens(self._handle(part), self.parts[part])
        return self._token_tables[part][row]

    def close(self) -> None:
        for handle in self._handles.values():
            handle.close()
        self._handles = {}


def _group_by_configuration(groups: list[tuple[dict, list[Path]]], config: dict, part: Path) -> None:
    """Adds ``part`` to the group of its configuration (:func:`same_configuration`), or starts one."""
    for known, parts in groups:
        if same_configuration(known, config):
            parts.append(part)
            return
    groups.append((config, [part]))


def refuse_mixed_configurations(configurations: list[tuple[dict, list[Path]]], where) -> None:
    """One store, one configuration: parts written with different ones (a random-init shard beside
    a trained one, a 1-shard run beside a 3-shard one) are refused, naming parts and differing keys;
    parts written through two spellings of one checkpoint folder are one (:func:`same_configuration`)."""
    if len(configurations) <= 1:
        return
    (first, first_parts), *others = configurations
    described = []
    for config, parts in others:
        keys = differing_keys(first, config)
        described.append(f"{', '.join(p.name for p in parts[:3])}{' ...' if len(parts) > 3 else ''} (differs in {keys})")
    raise StoreError(
        f"{where}: parts from different configurations: {', '.join(p.name for p in first_parts[:3])}"
        f"{' ...' if len(first_parts) > 3 else ''} vs {'; '.join(described)}; keep each configuration in its own folder"
    )


RECORDED_NOT_COMPARED = ("manifest",)  # the manifest's path as given: runs compare its content, manifest_sha256


def comparable_config(config: dict) -> dict:
    """A store config or transcription settings as two runs are compared: without what records only
    how a path was spelled (``manifest``; its content is ``manifest_sha256``)."""
    return {key: value for key, value in config.items() if key not in RECORDED_NOT_COMPARED}


def changed_manifest(stored: dict, current: dict, what: str, instead: str) -> str | None:
    """The refusal of a resume whose manifest changed since ``stored`` was written (None if it did
    not, or ``stored`` predates ``manifest_sha256``): corrected labels mean a new output, never one
    mixing rows of the old manifest with rows of the new. ``what`` was started; ``instead``: use a new one."""
    before, now = stored.get("manifest_sha256"), current.get("manifest_sha256")
    if before is None or now is None or before == now:
        return None
    return f"--manifest {current.get('manifest')} changed since this {what} was started (sha256 {before[:12]}… then, {now[:12]}… now): use a new {instead}"


def same_configuration(first: dict, second: dict) -> bool:
    """Whether two stores' configs (:attr:`StoreAttributes.config`) describe one configuration: compared
    without what records only how a path was spelled (:func:`comparable_config`: one manifest content is
    one manifest) and by :func:`extract.fingerprint.compared` (two spellings of one checkpoint folder are one model)."""
    a, b = compared(comparable_config(first), comparable_config(second))
    return a == b


def differing_keys(first: dict, second: dict) -> str:
    """``key: first value vs second value`` for every key two configs disagree on (the manifest by
    its content); where both values are dicts, their differing leaves by dotted key
    (``decoding.overrides.num_beams: None vs 2``), not the whole of a nested setting such as a
    generation config."""
    return ", ".join(_differences(comparable_config(first), comparable_config(second), ""))


def _differences(a: dict, b: dict, prefix: str) -> list[str]:
    found = []
    for key in sorted(set(a) | set(b), key=str):
        x, y = a.get(key), b.get(key)
        if x == y:
            continue
        if isinstance(x, dict) and isinstance(y, dict):
            found.extend(_differences(x, y, f"{prefix}{key}."))
        else:
            found.append(f"{prefix}{key}: {x!r} vs {y!r}")
    return found


def _derived_speech_lengths(handle, site: str, part: Path, attributes: StoreAttributes) -> np.ndarray:
    """Speech frames of a part written before ``valid`` existed (see :meth:`ShardReader.speech_lengths`)."""
    stored = np.diff(handle[f"sites/{site}/offsets"][:]).astype(np.int64)
    if not attributes.config.get("keep_padding"):
        return stored
    rate = attributes.frame_rate(site)
    durations = handle["meta/duration"][:]
    if not np.isfinite(rate) or not np.isfinite(durations).all():
        raise StoreError(f"{part}: site {site} kept padding but has no frame rate or durations to derive speech lengths from")
    speech = np.ceil(np.round(durations * rate, 6)).astype(np.int64)  # rounding: duration is samples / 16 kHz in float
    return np.minimum(speech, stored)


def _site_order(sites: list[str], attributes: StoreAttributes, path: Path) -> list[str]:
    """``sites`` in the forward order of the site table the extraction recorded (the keys of the
    ``site_modules`` attribute, written in table order). A store written without a site table (built
    by hand, as in tests) keeps the order of its file."""
    if attributes.site_modules is None:
        return list(sites)
    order = list(attributes.site_modules)
    unrecorded = [site for site in sites if site not in order]
    if unrecorded:
        raise StoreError(f"{path}: site(s) {', '.join(unrecorded)} are stored but missing from its site table (site_modules); the store is damaged")
    return [site for site in order if site in sites]


TOKENS_GROUP = "tokens"  # a decoder-state part's generated tokens, one row per stored row of every site


@dataclass(frozen=True)
class GeneratedTokens:
    """One utterance's generated tokens, aligned with its rows at every decoder site: ``ids`` (token
    ids), ``pieces`` (each token's surface string: ``"".join(pieces)`` is ``hypothesis``, the
    decoded output with special tokens left out, so a token's characters are found by adding up the
    pieces' lengths; a special token's piece is empty). A character whose bytes are split over
    tokens is in the piece of the token that completes it; ``holds_next`` marks the tokens before
    that hold its leading bytes (their piece may be empty), so that they count for its word too."""

    ids: tuple[int, ...]
    pieces: tuple[str, ...]
    holds_next: tuple[bool, ...] | None = (
        None  # token k holds leading bytes of the character after its piece (extract.decoder.token_surface); None: a store written before
    )

    def __post_init__(self):
        if len(self.ids) != len(self.pieces):
            raise StoreError(f"{len(self.ids)} token ids but {len(self.pieces)} token pieces")
        if self.holds_next is not None and len(self.holds_next) != len(self.ids):
            raise StoreError(f"{len(self.ids)} token ids but {len(self.holds_next)} holds_next flags")

    @property
    def hypothesis(self) -> str:
        return "".join(self.pieces)

    def __len__(self) -> int:
        return len(self.ids)


class TokenPartWriter(PartWriter):
    """A :class:`PartWriter` whose rows are generated tokens (a decoder-state store): each utterance
    is added with its :class:`GeneratedTokens`, one per row of every site, written beside the
    index as ``tokens/ids`` (int64), ``tokens/pieces`` (UTF-8), ``tokens/offsets`` (N + 1) and, for
    tokens that carry them, ``tokens/holds_next`` (uint8), with a sha256 of them (the group's
    ``sha256`` attribute) that :meth:`ShardReader.tokens` checks.
    Everything else, the part's content checksum included, is :class:`PartWriter`'s."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.token_ids: list[int] = []
        self.token_pieces: list[str] = []
        self.token_holds_next: list[bool] | None = None  # set by the first utterance added with flags; then every one needs them
        self.token_offsets: list[int] = [0]

    def add(
        self, utterance_id: str, states: dict[str, np.ndarray], meta: dict, speech_frames: dict[str, int] | None = None, *, tokens: GeneratedTokens
    ) -> None:
        for site, array in states.items():
            if array.shape[0] != len(tokens):
                raise StoreError(f"utterance {utterance_id}: site {site} has {array.shape[0]} rows for {len(tokens)} generated tokens")
        flagged = tokens.holds_next is not None
        if len(self.token_offsets) > 1 and flagged != (self.token_holds_next is not None):
            raise StoreError(f"utterance {utterance_id}: its tokens {'have' if flagged else 'lack'} holds_next flags and the part's earlier ones do not")
        super().add(utterance_id, states, meta, speech_frames)
        self.token_ids.extend(int(token) for token in tokens.ids)
        self.token_pieces.extend(tokens.pieces)
        if flagged:
            self.token_holds_next = (self.token_holds_next or []) + [bool(flag) for flag in tokens.holds_next]
        self.token_offsets.append(len(self.token_ids))

    def _write_index(self) -> str:
        expected = super()._write_index()
        ids, offsets = np.asarray(self.token_ids, dtype=np.int64), np.asarray(self.token_offsets, dtype=np.int64)
        group = self.file.create_group(TOKENS_GROUP)
        group.create_dataset("ids", data=ids)
        group.create_dataset("offsets", data=offsets)
        group.create_dataset("pieces", data=np.array(self.token_pieces, dtype=object), dtype=_string_dtype())
        holds_next = None if self.token_holds_next is None else np.asarray(self.token_holds_next, dtype=np.uint8)
        if holds_next is not None:
            group.create_dataset("holds_next", data=holds_next)
        group.attrs["sha256"] = _tokens_digest(ids, offsets, self.token_pieces, holds_next)
        return expected


def _tokens_digest(ids: np.ndarray, offsets: np.ndarray, pieces: Sequence[str], holds_next: np.ndarray | None = None) -> str:
    """The sha256 of a part's tokens (``holds_next`` where the part has it: parts written before keep their digest)."""
    total = hashlib.sha256(ids.astype(np.int64).tobytes() + offsets.astype(np.int64).tobytes())
    total.update("\0".join(pieces).encode())
    if holds_next is not None:
        total.update(b"\0holds_next" + holds_next.astype(np.uint8).tobytes())
    return total.hexdigest()


TOKENS_DAMAGED = "its generated tokens differ from their recorded sha256"


def _read_tokens(group) -> tuple[np.ndarray, np.ndarray, list[str], np.ndarray | None, bool]:
    """A part's token ids, offsets, pieces and ``holds_next`` flags (None in parts written before
    them), and whether they match the recorded sha256: the one reading both the reader and the
    resume's verification use."""
    ids, offsets, pieces = group["ids"][:], group["offsets"][:], group["pieces"].asstr()[:].tolist()
    holds_next = group["holds_next"][:] if "holds_next" in group else None
    return ids, offsets, pieces, holds_next, str(group.attrs.get("sha256", "")) == _tokens_digest(ids, offsets, pieces, holds_next)


def _part_tokens(handle, part: Path) -> list[GeneratedTokens]:
    """Every utterance's :class:`GeneratedTokens` in an open part, checked against the part's recorded sha256."""
    if TOKENS_GROUP not in handle:
        raise StoreError(f"{part}: no generated tokens: not a decoder-state store (python -m experiments.decoder_states writes those)")
    ids, offsets, pieces, holds_next, intact = _read_tokens(handle[TOKENS_GROUP])
    if not intact:
        config = StoreAttributes.from_attrs(handle.attrs, part).config
        raise DamagedPartError(part, TOKENS_DAMAGED, writer_command(config))
    bounds = zip(offsets[:-1].tolist(), offsets[1:].tolist())
    flags = (lambda start, end: None) if holds_next is None else (lambda start, end: tuple(bool(flag) for flag in holds_next[start:end]))
    return [GeneratedTokens(tuple(ids[start:end].tolist()), tuple(pieces[start:end]), flags(start, end)) for start, end in bounds]
