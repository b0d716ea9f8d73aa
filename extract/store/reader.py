"""Reading a store: :class:`ShardReader`, lazy, checked as a whole before a number is read."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from extract.store.folder import IncompleteStoreError, refuse_mixed_configurations, store_incompleteness, store_parts
from extract.store.format import META_FIELDS, DamagedPartError, StoreAttributes, StoreError, _opened, part_format, writer_command
from extract.store.tokens import GeneratedTokens, _part_tokens
from extract.store.verify import _sites, index_damage, site_damage


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
                self._audio_notes.update(attributes.audio_notes or {})
                part_sites = _sites(handle)
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
        refuse_mixed_configurations(self.parts, self._attributes, path)
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
        """The part's h5py file, opened once per process (never pickled); damaged since this reader
        listed the store: :class:`DamagedPartError`."""
        if self._pid != os.getpid():
            self._handles, self._pid = {}, os.getpid()
        if part_number not in self._handles:
            self._handles[part_number] = _opened(self.parts[part_number])
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
