"""A store as an activation cache: its frames at one site as shuffled ``[batch, D]`` tensors.

Sparse-autoencoder trainers take activations as an iterable of ``[batch, D]`` float tensors, one
row a token (here: a speech frame), in an order mixed across inputs: ``dictionary_learning``'s
``trainSAE(data=...)`` iterates exactly that, and a plain PyTorch loop needs nothing else. A store
already holds those rows, so :class:`ActivationBatches` reads them instead of running the model
again. Frames of one utterance are alike, so it mixes them the way an activation buffer does: it
reads utterances in a shuffled order into a buffer of about ``buffer_frames`` rows, shuffles the
buffer, hands out whole batches and carries the rest over, so memory stays at one buffer whatever
the store's size. Only speech frames are given: padding a ``--keep-padding`` store kept is left out.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch

from extract.store import ShardReader, StoreError


class ActivationBatches:
    """The speech frames of ``store`` at ``site`` as ``[batch_size, D]`` tensors, shuffled.

    ``store``: a store folder (or part file), or an open :class:`~extract.store.ShardReader`.
    ``ids``: the utterances to read (default all; e.g. a split's, to keep held-out speakers out).
    ``epochs``: passes over the frames (``None``: without end, for trainers that count steps);
    each pass has its own order, drawn from ``seed`` and the pass's number, so a run is repeatable.
    ``drop_last``: leave out a pass's last, smaller batch (a trainer's batch statistics assume
    full batches). ``buffer_frames``: rows held to shuffle across utterances (the memory bound:
    ``buffer_frames x D`` float32 values besides one batch). The tensors are ``dtype`` on ``device``.
    """

    def __init__(
        self,
        store: str | Path | ShardReader,
        site: str,
        batch_size: int = 4096,
        *,
        ids: Sequence[str] | None = None,
        epochs: int | None = 1,
        seed: int = 0,
        shuffle: bool = True,
        drop_last: bool = True,
        buffer_frames: int = 262_144,
        device: str | torch.device = "cpu",
        dtype: torch.dtype = torch.float32,
        allow_partial: bool = False,
    ):
        self.reader = store if isinstance(store, ShardReader) else ShardReader(store, allow_partial=allow_partial)
        if site not in self.reader.sites:
            raise StoreError(f"{site!r}: not a site of this store (it has {', '.join(self.reader.sites)})")
        if not all(isinstance(value, int) and not isinstance(value, bool) and value >= 1 for value in (batch_size, buffer_frames)):
            raise ValueError(f"batch_size {batch_size!r} and buffer_frames {buffer_frames!r}: each must be a whole number, at least 1")
        if epochs is not None and epochs < 1:
            raise ValueError(f"epochs {epochs}: must be at least 1, or None for passes without end")
        self.site, self.batch_size, self.epochs, self.seed = site, batch_size, epochs, seed
        self.shuffle, self.drop_last, self.buffer_frames = shuffle, drop_last, max(buffer_frames, batch_size)
        self.device, self.dtype = torch.device(device), dtype
        if isinstance(ids, str):
            raise ValueError(f"ids {ids!r}: give a list of utterance ids, not one string")
        self.ids = list(self.reader.ids if ids is None else ids)
        if not self.ids:
            raise ValueError("ids is empty: no utterance to read (None reads them all)")
        if len(set(self.ids)) < len(self.ids):
            twice = next(utterance for position, utterance in enumerate(self.ids) if utterance in self.ids[:position])
            raise ValueError(f"ids names {twice!r} more than once: each utterance's frames would be given twice a pass")
        known = set(self.reader.ids)
        unknown = [utterance for utterance in self.ids if utterance not in known]
        if unknown:
            raise StoreError(f"{len(unknown)} utterance(s) not in the store, e.g. {unknown[0]!r}")
        speech = self.reader.speech_lengths(site, self.ids)
        self._frames = np.minimum(speech, self.reader.stored_lengths(site, self.ids))  # a --positions store holds fewer
        self.frames = int(self._frames.sum())
        if not self.frames:
            raise StoreError(f"site {site}: the {len(self.ids)} utterance(s) chosen hold no speech frames")
        if self.frames < batch_size and drop_last:
            raise StoreError(f"site {site}: {self.frames} speech frames, fewer than one batch of {batch_size}; lower batch_size")

    @property
    def dim(self) -> int:
        """The width ``D`` of each row (the site's hidden size)."""
        return self.reader.dim(self.site)

    @property
    def batches_per_epoch(self) -> int:
        whole, rest = divmod(self.frames, self.batch_size)
        return whole + (1 if rest and not self.drop_last else 0)

    def __iter__(self) -> Iterator[torch.Tensor]:
        epoch = 0
        while self.epochs is None or epoch < self.epochs:
            yield from self._epoch(np.random.default_rng([self.seed, epoch]))
            epoch += 1

    def _epoch(self, rng: np.random.Generator) -> Iterator[torch.Tensor]:
        order = rng.permutation(len(self.ids)) if self.shuffle else np.arange(len(self.ids))
        held: list[np.ndarray] = []
        count = 0
        for position in order:
            if not self._frames[position]:
                continue
            held.append(self.reader.get(self.site, self.ids[position])[: self._frames[position]])
            count += len(held[-1])
            if count >= self.buffer_frames:
                rest = yield from self._batches(np.concatenate(held), rng)
                held, count = [rest], len(rest)
        rows = np.concatenate(held) if held else np.zeros((0, self.dim), dtype=np.float32)
        rest = yield from self._batches(rows, rng)
        if len(rest) and not self.drop_last:
            yield self._tensor(rest)

    def _batches(self, rows: np.ndarray, rng: np.random.Generator):
        """Yields the whole batches of ``rows`` (shuffled) and returns what is left over."""
        if self.shuffle:
            rows = rows[rng.permutation(len(rows))]
        whole = len(rows) - len(rows) % self.batch_size
        for start in range(0, whole, self.batch_size):
            yield self._tensor(rows[start : start + self.batch_size])
        return rows[whole:]

    def _tensor(self, rows: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(rows)).to(device=self.device, dtype=self.dtype)
