"""Probe inputs read from a store, and standardization with training-split statistics.

Random-init and layer-normed states have tiny per-dimension scales; an unscaled L2 logistic probe
then reads chance where a scaled one reads 100, so features are standardized by default.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

SAMPLED_FRACTIONS = (0.0, 0.25, 0.5, 0.75, 1.0)


FLOAT32 = 4
COPIES_PER_CHUNK = 3  # a chunk's features, their standardized copy, and the MDL blocks gathered from them
BASE_GB = 1.0  # the interpreter, torch, scikit-learn and the metadata: what a run holds before any features


class PositionMajorFile:
    """The first ``positions`` frames of ``utterances`` utterances on disk, position-major
    (``[P, N, D]``, raw, in the store's float dtype), so that a chunk of positions is one contiguous read.

    Why: a store keeps each utterance's frames together in HDF5 chunks of about 1 MB (some 400 frames
    at D = 1280 in float16); reading a few positions of every utterance straight from it reads whole
    chunks each time, and over all position chunks reads the store once per chunk. Writing this file
    takes one pass over the store; every later read takes exactly what it needs. Writes and reads go
    through ``pwrite``/``readinto``, not a memory map, so the page cache holds the pages, not the process."""

    def __init__(self, path: Path, positions: int, utterances: int, dim: int, dtype):
        self.path, self.shape, self.dtype = Path(path), (positions, utterances, dim), np.dtype(dtype)
        self.handle = open(self.path, "w+b")  # noqa: SIM115 - closed by close()
        self.handle.truncate(positions * utterances * dim * self.dtype.itemsize)

    def _offset(self, position: int, utterance: int) -> int:
        _, utterances, dim = self.shape
        return (position * utterances + utterance) * dim * self.dtype.itemsize

    def write(self, start: int, block: np.ndarray) -> None:
        """Utterances ``start:start + len(block)`` from ``block [B, P, D]``."""
        for position in range(self.shape[0]):
            os.pwrite(self.handle.fileno(), np.ascontiguousarray(block[:, position], dtype=self.dtype).data, self._offset(position, start))

    def read(self, begin: int, end: int) -> np.ndarray:
        """Positions ``begin:end`` as float32 ``[N, end - begin, D]`` (position-major in memory)."""
        _, utterances, dim = self.shape
        buffer = np.empty((end - begin, utterances, dim), dtype=self.dtype)
        self.handle.seek(self._offset(begin, 0))
        if self.handle.readinto(memoryview(buffer).cast("B")) != buffer.nbytes:
            raise OSError(f"{self.path}: short read of positions {begin}:{end}")
        return np.swapaxes(buffer, 0, 1).astype(np.float32)

    def close(self) -> None:
        self.handle.close()


def write_position_major(reader, site: str, ids: list[str], positions: int, folder: Path, block_bytes: int) -> PositionMajorFile:
    """:class:`PositionMajorFile` of ``ids`` in ``folder``, written from the store ``block_bytes`` of float32 at a time."""
    dim = reader.dim(site)
    dtype = np.float16 if reader.storage_dtype(site) == np.float16 else np.float32
    scratch = PositionMajorFile(Path(folder) / "positions.bin", positions, len(ids), dim, dtype)
    step = max(1, block_bytes // (positions * dim * FLOAT32))
    for start in range(0, len(ids), step):
        scratch.write(start, reader.frames(site, 0, positions, ids[start : start + step]))
    return scratch


def positions_per_chunk(memory_gb: float, utterances: int, dim: int, positions: int) -> int:
    """Positions read and probed at a time so that a run stays within ``memory_gb``: each position
    costs ``COPIES_PER_CHUNK x utterances x D x 4`` bytes, after ``BASE_GB`` for the process itself;
    rounded down to whole runs of :data:`probing.solver.SPAN` positions when it holds one. At least
    one position (``12 N D`` bytes: 123 MB for N = 8000 at D = 1280)."""
    if memory_gb <= 0:
        raise ValueError(f"the memory budget must be positive, got {memory_gb} GB")
    from probing.solver import SPAN

    per_position = COPIES_PER_CHUNK * utterances * dim * FLOAT32
    fitting = int(max(1, ((memory_gb - BASE_GB) * 2**30) // per_position))
    if fitting >= SPAN:  # whole runs of warm starts, so that results do not depend on the budget
        fitting -= fitting % SPAN
    return min(positions, fitting)


def in_memory_bytes(utterances: int, positions: int, dim: int) -> int:
    """What the whole-array path held for ``[N, P, D]``: the features, their standardized copy and the
    position-major copy the batched fit makes (for the memory table of docs/benchmarks.md)."""
    return COPIES_PER_CHUNK * utterances * positions * dim * FLOAT32


def speech_states(reader, site: str, ids: list[str]):
    """Yield each utterance's speech frames ``[T_speech, D]``: stored padding (``--keep-padding``) cut off."""
    for utterance_id, length in zip(ids, reader.speech_lengths(site, ids)):
        yield reader.get(site, utterance_id)[: int(length)]


def pooled(reader, site: str, ids: list[str], how: str) -> np.ndarray:
    """``[N, P', D]`` over speech frames: their mean or max (P' = 1), or the frames at 0/25/50/75/100 %
    of the speech length (P' = 5)."""
    if how not in ("mean", "max", "sampled"):
        raise ValueError(f"unknown pooling {how!r}")
    rows = []
    for states in speech_states(reader, site, ids):
        if how == "mean":
            rows.append(states.mean(axis=0, keepdims=True))
        elif how == "max":
            rows.append(states.max(axis=0, keepdims=True))
        else:
            rows.append(states[[int(round(q * (len(states) - 1))) for q in SAMPLED_FRACTIONS]])
    return np.stack(rows)


class Standardizer:
    """Per position and dimension (``[P, D]``) statistics over the valid training rows, applied to
    features ``[N, P, D]``, or with one position's statistics (:meth:`fit_sequences`) to a sequence ``[T, D]``."""

    def __init__(self, mean: np.ndarray, scale: np.ndarray):
        self.mean, self.scale = mean, scale

    @classmethod
    def fit(cls, x: np.ndarray, mask: np.ndarray) -> Standardizer:
        """Two passes in float64, one position at a time as masked matrix-vector products (four times
        faster than masked reductions over ``[N, P, D]``, and no temporary of its size)."""
        weights = np.asarray(mask, dtype=np.float64).reshape(x.shape[0], x.shape[1])
        count = np.maximum(weights.sum(axis=0), 1)
        mean, variance = np.empty(x.shape[1:]), np.empty(x.shape[1:])
        for position in range(x.shape[1]):
            column = x[:, position, :].astype(np.float64)
            mean[position] = weights[:, position] @ column / count[position]
            variance[position] = weights[:, position] @ np.square(column - mean[position]) / count[position]
        return cls._from_variance(mean, variance)

    @classmethod
    def fit_sequences(cls, sequences: list[np.ndarray]) -> Standardizer:
        frames = np.concatenate(sequences)
        return cls.fit(frames[:, None, :], np.ones((len(frames), 1), dtype=bool))

    @classmethod
    def fit_stream(cls, sequences) -> Standardizer:
        """Statistics over every frame of an iterable of ``[T, D]`` arrays, read one at a time
        (Chan et al.'s pairwise update in float64, so nothing is held but the running sums)."""
        count, mean, squares = 0, None, None
        for states in sequences:
            if not len(states):
                continue
            block = np.asarray(states, dtype=np.float64)
            block_mean = block.mean(axis=0)
            block_squares = np.square(block - block_mean).sum(axis=0)
            if mean is None:
                count, mean, squares = len(block), block_mean, block_squares
                continue
            total = count + len(block)
            delta = block_mean - mean
            mean = mean + delta * len(block) / total
            squares = squares + block_squares + np.square(delta) * count * len(block) / total
            count = total
        if mean is None:
            raise ValueError("no frames to standardize with")
        return cls._from_variance(mean[None], (squares / count)[None])

    @classmethod
    def _from_variance(cls, mean: np.ndarray, variance: np.ndarray) -> Standardizer:
        scale = np.sqrt(variance)
        scale[scale < 1e-12] = 1.0  # a constant dimension carries nothing; leave it centred
        return cls(mean.astype(np.float32), scale.astype(np.float32))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return ((x - self.mean) / self.scale).astype(np.float32, copy=False)


def sequence_bytes(reader, site: str, ids: list[str]) -> int:
    """float32 bytes of the speech frames of ``ids``: what holding them as sequences costs."""
    return int(reader.speech_lengths(site, ids).sum()) * reader.dim(site) * FLOAT32


def mean_lengths(reader, site: str, ids: list[str]) -> tuple[float, float]:
    """(mean speech frames, mean stored frames) of ``ids``: they differ where the store kept padding.

    "Speech positions" (F1_S, the MDL span, the figure's test-length line) use the first.
    """
    speech = reader.speech_lengths(site, ids)
    return float(np.mean(speech)), float(np.mean(reader.stored_lengths(site, ids)))


def valid_mask(lengths: np.ndarray, positions: int) -> np.ndarray:
    return np.arange(positions)[None, :] < np.asarray(lengths)[:, None]
