"""The on-disk format of an HDF5 shard store: ragged hidden states per site, CSR style, with metadata and provenance.

The store package owns the format: no other module opens a part file (``h5py`` is imported in
``extract/store/`` only). A store is a folder of part files ``{prefix}-part{k:05d}.h5``. Each part holds, per site, a
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

A writer first claims the part (:class:`PartClaim`): ``{part}.lock``, created atomically, names its holder.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np

from extract import claims
from extract.errors import UserError, first_line
from extract.manifest import Utterance

META_FIELDS = ("gender", "speaker", "language", "split", "dataset")
CHUNK_BYTES = 1 << 20
TEMPORARY_SUFFIX = ".h5.tmp"
SITE_DIGEST = "digest"  # format 2: the attribute of ``sites/{site}/data`` holding that site's data digest


class StoreError(UserError, RuntimeError):
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


def temporary_path(path: Path) -> Path:
    return path.with_name(path.name.removesuffix(".h5") + TEMPORARY_SUFFIX)


class PartClaim(claims.Claim):
    """An exclusive claim on one part file (:class:`extract.claims.Claim`): ``{part}.lock``, naming host and pid.
    A killed holder leaves its temporary file too: reclaiming the claim (``reclaim_stale``) deletes it."""

    def discard_leftovers(self) -> None:
        temporary_path(self.target).unlink(missing_ok=True)

    def unwritable(self) -> StoreError:
        return StoreError(f"disk full while writing the claim {self.lock}: nothing was written; free space and rerun (complete parts are kept and skipped)")

    def refusal(self) -> ClaimError:
        part, lock = self.target, self.lock
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


def _bytes_of(array: np.ndarray) -> memoryview:
    """The array's bytes without a copy (C order, as stored)."""
    return memoryview(np.ascontiguousarray(array)).cast("B")


def part_format(handle) -> int:
    """The format of an open part: its ``format_version`` (1 where absent: parts written before the
    attribute, whose checksum leaves the labels out and which record no per-site digest)."""
    return int(handle.attrs.get("format_version", 1))


def _opened(part: Path):
    """``part`` open for reading (an h5py file, to use in ``with``); one that cannot be read is :class:`DamagedPartError`."""
    import h5py

    try:
        return h5py.File(part, "r")
    except OSError as error:
        raise DamagedPartError(part, f"cannot be read as HDF5: {first_line(error)}") from error


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


def utterance_meta(utterance: Utterance, seconds: float) -> dict:
    """The per-utterance metadata a store keeps beside its states (its ``meta/*`` columns)."""
    return {name: getattr(utterance, name) for name in META_FIELDS} | {"duration": seconds}
