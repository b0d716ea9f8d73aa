"""HDF5 shard store: ragged hidden states per site, CSR style, with metadata and provenance.

A store is a folder of part files ``{prefix}-part{k:05d}.h5``. Each part holds, per site, a
``sites/{site}/data`` array (total_frames x D) and ``sites/{site}/offsets`` (N + 1), the utterance
ids, and per-utterance metadata. A part is written under a temporary name, its ``complete``
attribute is set last, and it is renamed when closed, so a reader never sees half a part.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

META_FIELDS = ("gender", "speaker", "language", "split", "dataset")
CHUNK_BYTES = 1 << 20
TEMPORARY_SUFFIX = ".h5.tmp"


class StoreError(RuntimeError):
    pass


def _string_dtype():
    import h5py

    return h5py.string_dtype(encoding="utf-8")


class PartWriter:
    """Writes one part file; use as a context manager. ``abort()`` deletes the temporary file."""

    def __init__(self, path: Path, site_dims: dict[str, int], storage_dtype: str, attributes: dict):
        import h5py

        self.path = Path(path)
        self.temporary = self.path.with_name(self.path.name.removesuffix(".h5") + TEMPORARY_SUFFIX)
        self.file = h5py.File(self.temporary, "w")
        self.site_dims = dict(site_dims)
        self.dtype = np.dtype(storage_dtype)
        for key, value in attributes.items():
            self.file.attrs[key] = value if isinstance(value, (str, int, float, bool)) else json.dumps(value)
        self.file.attrs["complete"] = False
        for site, dim in self.site_dims.items():
            group = self.file.create_group(f"sites/{site}")
            rows = max(1, CHUNK_BYTES // (dim * self.dtype.itemsize))
            group.create_dataset("data", shape=(0, dim), maxshape=(None, dim), dtype=self.dtype, chunks=(rows, dim))
            self._offsets(site, [0])
        self.ids: list[str] = []
        self.meta: dict[str, list] = {name: [] for name in (*META_FIELDS, "duration")}
        self.offsets: dict[str, list[int]] = {site: [0] for site in self.site_dims}

    def _offsets(self, site: str, values: list[int]) -> None:
        group = self.file[f"sites/{site}"]
        if "offsets" in group:
            del group["offsets"]
        group.create_dataset("offsets", data=np.asarray(values, dtype=np.int64))

    def add(self, utterance_id: str, states: dict[str, np.ndarray], meta: dict) -> None:
        if set(states) != set(self.site_dims):
            raise StoreError(f"utterance {utterance_id}: sites {sorted(states)} differ from the store's {sorted(self.site_dims)}")
        for site, array in states.items():
            if array.ndim != 2 or array.shape[1] != self.site_dims[site]:
                raise StoreError(f"utterance {utterance_id}: site {site} has shape {array.shape}, expected (T, {self.site_dims[site]})")
            dataset = self.file[f"sites/{site}/data"]
            start = dataset.shape[0]
            dataset.resize(start + array.shape[0], axis=0)
            dataset[start:] = array.astype(self.dtype)
            self.offsets[site].append(start + array.shape[0])
        self.ids.append(utterance_id)
        for name in self.meta:
            self.meta[name].append(meta.get(name, "" if name != "duration" else float("nan")))

    def close(self) -> Path:
        for site in self.site_dims:
            self._offsets(site, self.offsets[site])
        self.file.create_dataset("ids", data=np.array(self.ids, dtype=object), dtype=_string_dtype())
        for name, values in self.meta.items():
            if name == "duration":
                self.file.create_dataset(f"meta/{name}", data=np.asarray(values, dtype=np.float64))
            else:
                self.file.create_dataset(f"meta/{name}", data=np.array(values, dtype=object), dtype=_string_dtype())
        self.file.attrs["utterances"] = len(self.ids)
        self.file.flush()
        self.file.attrs["complete"] = True  # last: a file without it is never read as complete
        self.file.close()
        os.replace(self.temporary, self.path)
        return self.path

    def abort(self) -> None:
        if self.file:
            self.file.close()
        self.temporary.unlink(missing_ok=True)

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        if kind is None:
            self.close()
        else:
            self.abort()


def complete_parts(folder: Path) -> list[Path]:
    """Part files whose ``complete`` flag is set, in name order."""
    import h5py

    parts = []
    for path in sorted(Path(folder).glob("*.h5")):
        try:
            with h5py.File(path, "r") as handle:
                if bool(handle.attrs.get("complete", False)):
                    parts.append(path)
        except OSError:
            continue  # unreadable: not complete
    return parts


class ShardReader:
    """Read a store folder (or one part file) lazily; safe to open inside DataLoader workers.

    h5py handles are opened on first use in each process and never pickled.
    """

    def __init__(self, path: str | Path):
        import h5py

        path = Path(path)
        self.parts = [path] if path.is_file() else complete_parts(path)
        if not self.parts:
            raise StoreError(f"{path}: no complete shard files")
        self._index: dict[str, tuple[int, int]] = {}
        self._position: dict[str, int] = {}
        self._ids: list[str] = []
        self._meta: dict[str, list] = {name: [] for name in (*META_FIELDS, "duration")}
        sites = None
        for part_number, part in enumerate(self.parts):
            with h5py.File(part, "r") as handle:
                if not bool(handle.attrs.get("complete", False)):
                    raise StoreError(f"{part}: not complete")
                part_sites = list(handle["sites"].keys()) if "sites" in handle else []
                if not handle["ids"].shape[0]:
                    continue  # every utterance of this part was skipped: nothing to read
                if sites is None:
                    sites, self.attrs = part_sites, {k: handle.attrs[k] for k in handle.attrs}
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
        if sites is None:
            raise StoreError(f"{path}: the store holds no utterances")
        self.sites = sorted(sites, key=_site_order)
        self._handles: dict[int, object] = {}
        self._pid = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_handles"], state["_pid"] = {}, None
        return state

    def _handle(self, part_number: int):
        import h5py

        if self._pid != os.getpid():
            self._handles, self._pid = {}, os.getpid()
        if part_number not in self._handles:
            self._handles[part_number] = h5py.File(self.parts[part_number], "r")
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

    def _check_site(self, site: str) -> None:
        if site not in self.sites:
            raise KeyError(f"no site {site!r}; the store has {', '.join(self.sites)}")

    def length(self, site: str, utterance_id: str) -> int:
        part, row = self._index[utterance_id]
        offsets = self._handle(part)[f"sites/{site}/offsets"]
        return int(offsets[row + 1] - offsets[row])

    def get(self, site: str, utterance_id: str) -> np.ndarray:
        self._check_site(site)
        if utterance_id not in self._index:
            raise KeyError(f"no utterance {utterance_id!r} in the store")
        part, row = self._index[utterance_id]
        group = self._handle(part)[f"sites/{site}"]
        start, end = group["offsets"][row : row + 2]
        return group["data"][start:end].astype(np.float32)

    def _by_part(self, ids: Sequence[str]) -> dict[int, list[tuple[int, int]]]:
        grouped: dict[int, list[tuple[int, int]]] = {}
        for position, utterance_id in enumerate(ids):
            part, row = self._index[utterance_id]
            grouped.setdefault(part, []).append((position, row))
        return grouped

    def leading(self, site: str, positions: int, ids: Sequence[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The first ``positions`` frames of each utterance, zero-padded: ``([N, P, D] float32, lengths [N])``.

        ``lengths`` are the valid frames (capped at P); rows beyond them are padding, never data.
        """
        self._check_site(site)
        ids = self._ids if ids is None else list(ids)
        out = np.zeros((len(ids), positions, self.dim(site)), dtype=np.float32)
        lengths = np.zeros(len(ids), dtype=np.int64)
        for part, rows in self._by_part(ids).items():
            group = self._handle(part)[f"sites/{site}"]
            offsets = group["offsets"][:]
            data = group["data"]
            for position, row in rows:
                start = int(offsets[row])
                count = min(positions, int(offsets[row + 1]) - start)
                out[position, :count] = data[start : start + count]
                lengths[position] = count
        return out, lengths

    def means(self, site: str, ids: Sequence[str] | None = None) -> np.ndarray:
        """Mean over valid frames per utterance: ``[N, D]`` float32, read one utterance at a time."""
        self._check_site(site)
        ids = self._ids if ids is None else list(ids)
        out = np.zeros((len(ids), self.dim(site)), dtype=np.float32)
        for part, rows in self._by_part(ids).items():
            group = self._handle(part)[f"sites/{site}"]
            offsets = group["offsets"][:]
            data = group["data"]
            for position, row in rows:
                out[position] = data[int(offsets[row]) : int(offsets[row + 1])].astype(np.float32).mean(axis=0)
        return out

    def iter_utterances(self, site: str, ids: Iterable[str] | None = None):
        for utterance_id in self._ids if ids is None else ids:
            yield utterance_id, self.get(site, utterance_id)

    def close(self) -> None:
        for handle in self._handles.values():
            handle.close()
        self._handles = {}


def _site_order(site: str):
    """embed, layers in numeric order, final/pre/post adapter: the forward order of the site tables."""
    if site == "encoder.embed":
        return (0, 0)
    if site.startswith("encoder.layer."):
        return (1, int(site.rsplit(".", 1)[1]))
    return (2, ["encoder.final", "pre_adapter", "post_adapter"].index(site) if site in ("encoder.final", "pre_adapter", "post_adapter") else 99)
