"""A decoder-state store's generated tokens: one row of every site per token (``experiments.decoder_states``)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from extract.store.format import DamagedPartError, StoreAttributes, StoreError, writer_command
from extract.store.writer import PartWriter, _string_dtype

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
    # token k holds leading bytes of the character after its piece (extract.decoder.token_surface); None: a store written before
    holds_next: tuple[bool, ...] | None = None

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
