"""Probe inputs read from a store, and standardization with training-split statistics.

Random-init and layer-normed states have tiny per-dimension scales; an unscaled L2 logistic probe
then reads chance where a scaled one reads 100, so features are standardized by default.
"""

from __future__ import annotations

import numpy as np

SAMPLED_FRACTIONS = (0.0, 0.25, 0.5, 0.75, 1.0)


def positional(reader, site: str, ids: list[str], positions: int) -> tuple[np.ndarray, np.ndarray]:
    """The first ``positions`` frames (``[N, P, D]``, zero-padded) and each utterance's valid count."""
    return reader.leading(site, positions, ids)


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


def sequences(reader, site: str, ids: list[str]) -> list[np.ndarray]:
    """Each utterance's speech frames, the attention probe's input."""
    return list(speech_states(reader, site, ids))


class Standardizer:
    """Per position and dimension (``[P, D]``) statistics over the valid training rows."""

    def __init__(self, mean: np.ndarray, scale: np.ndarray):
        self.mean, self.scale = mean, scale

    @classmethod
    def fit(cls, x: np.ndarray, mask: np.ndarray) -> Standardizer:
        where = np.broadcast_to(np.asarray(mask, dtype=bool)[..., None], x.shape)
        count = np.maximum(where[..., :1].sum(axis=0), 1)
        mean = x.sum(axis=0, where=where, dtype=np.float64) / count
        variance = np.square(x - mean.astype(np.float32)).sum(axis=0, where=where, dtype=np.float64) / count
        scale = np.sqrt(variance)
        scale[scale < 1e-12] = 1.0  # a constant dimension carries nothing; leave it centred
        return cls(mean.astype(np.float32), scale.astype(np.float32))

    @classmethod
    def fit_sequences(cls, sequences: list[np.ndarray]) -> Standardizer:
        frames = np.concatenate(sequences)
        return cls.fit(frames[:, None, :], np.ones((len(frames), 1), dtype=bool))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return ((x - self.mean) / self.scale).astype(np.float32)

    def sequences(self, sequences: list[np.ndarray]) -> list[np.ndarray]:
        return [((s - self.mean[0]) / self.scale[0]).astype(np.float32) for s in sequences]


def mean_lengths(reader, site: str, ids: list[str]) -> tuple[float, float]:
    """(mean speech frames, mean stored frames) of ``ids``: they differ where the store kept padding.

    "Speech positions" (F1_S, the MDL span, the figure's test-length line) use the first.
    """
    speech = reader.speech_lengths(site, ids)
    stored = [reader.length(site, utterance_id) for utterance_id in ids]
    return float(np.mean(speech)), float(np.mean(stored))


def valid_mask(lengths: np.ndarray, positions: int) -> np.ndarray:
    return np.arange(positions)[None, :] < np.asarray(lengths)[:, None]
