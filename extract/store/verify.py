"""Checksums of a part, and what is wrong with one.

Each site's bytes, in order, have a data digest, xxh3_128 (``xxhash``; the part's
``data_digest`` attribute names it; from part format 2 on, ``format_version``, each site's digest is
also an attribute of its ``data``). The part's content checksum, ``content_sha256``, is one
sha256 over the sites' data digests, offsets and speech frames and the ids, and from format 2 on
the per-utterance labels (``meta/*``) (:func:`content_checksum`):
what a part is verified against (by :class:`ShardReader`, and by a resumed extraction before it
skips a part: :func:`part_content_damage`) and what identities of a store are built from (an
intervention file's ``store``, the probe's fingerprint). Parts written before the attribute have sha256 data
digests and no ``data_digest``; they verify as they always did. xxh3_128 is a non-cryptographic
hash: it catches damage (a cut file, a changed byte, another writer), not a forgery, which
nothing here guards against (a forger would rewrite ``content_sha256`` as well); it costs about a
tenth of sha256's CPU, which made the writer CPU-bound on small machines.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import xxhash

from extract import __version__
from extract.store.format import CHUNK_BYTES, META_FIELDS, SITE_DIGEST, DamagedPartError, StoreError, _bytes_of, _opened, part_format

DATA_DIGESTS = {"sha256": hashlib.sha256, "xxh3_128": xxhash.xxh3_128}  # a site's data digest (over its bytes in order), by the name a part records


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
    digest, block = DATA_DIGESTS[algorithm](), bytearray(layout.chunk_rows * layout.row_bytes)
    for first, offset, _ in layout.chunks:
        wanted = memoryview(block)[: min(layout.chunk_rows, layout.rows - first) * layout.row_bytes]
        if os.preadv(descriptor, [wanted], offset) != len(wanted):
            return None  # the file ends before the chunk it indexes
        digest.update(wanted)
    return digest.hexdigest()


def _hdf5_digest(dataset, algorithm: str) -> str:
    """The data digest of a site's data read through HDF5, in order, in blocks of about 16 chunks."""
    digest, step = DATA_DIGESTS[algorithm](), max(1, CHUNK_BYTES * 16 // max(1, dataset.shape[1] * dataset.dtype.itemsize))
    for start in range(0, dataset.shape[0], step):
        digest.update(_bytes_of(dataset[start : start + step]))
    return digest.hexdigest()


def _sites(handle) -> list[str]:
    """The sites an open part stores."""
    return list(handle["sites"].keys()) if "sites" in handle else []


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


def _stored_meta(handle) -> dict[str, list]:
    return _meta_columns({name: handle[f"meta/{name}"].asstr()[:].tolist() for name in META_FIELDS} | {"duration": handle["meta/duration"][:]})


def _index_digest(handle, site_digests: dict[str, str]) -> str:
    """The content checksum of an open part from its index as stored (offsets, speech frames, ids and,
    from format 2 on, labels) and the given data digests of its sites."""
    sites = _sites(handle)
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
    return {site: str(handle[f"sites/{site}/data"].attrs.get(SITE_DIGEST, "")) for site in _sites(handle)}


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
    return _hdf5_digest(dataset, algorithm)


def content_checksum(handle) -> str:
    """The content checksum recomputed from an open part file (compare with ``attrs['content_sha256']``),
    with the data digest the part records (:func:`recorded_data_digest`)."""
    algorithm = recorded_data_digest(handle)
    return _index_digest(handle, {site: _hdf5_digest(handle[f"sites/{site}/data"], algorithm) for site in _sites(handle)})


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


def part_damage(path: Path) -> str | None:
    """What is wrong with the existing part file ``path`` (unreadable, or not marked complete), or None."""
    try:
        with _opened(path) as handle:
            complete = bool(handle.attrs.get("complete", False))
    except DamagedPartError as error:
        return error.problem
    return None if complete else "not marked complete"


def recorded_checksum(part: str | Path, recompute: bool = False) -> str:
    """The content checksum the writer recorded in ``part`` (``content_sha256``). A part written before
    it existed has none: "" then, or with ``recompute`` the checksum recomputed from its content."""
    with _opened(Path(part)) as handle:
        recorded = str(handle.attrs.get("content_sha256", ""))
        return recorded or (content_checksum(handle) if recompute else "")


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


def index_damage(handle) -> str | None:
    """What is wrong with an open part's index and labels (offsets, speech frames, ids, ``meta/*``)
    against its content checksum, or None. Only a format-2 part can say without reading its data
    (it records each site's digest); for an older one: None (:func:`site_damage` checks it whole)."""
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
