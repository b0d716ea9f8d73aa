"""Minimum description length by online code (Voita & Titov 2020), around any probe, in bits.

Examples are ordered by a seeded permutation of speakers (all of a speaker's utterances together)
and cut into blocks at the given fractions of the training set, each boundary moved forward to the
next speaker boundary so no block is predicted by a probe trained on its own speakers. The first
block costs ``n1 * log2(K)`` bits; each later block costs the sum over its examples of
``-log2 p(true class)`` under a fresh probe trained on all earlier blocks. A block whose preceding
blocks hold one class only is coded uniformly (there is no classifier to train), and reported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

DEFAULT_FRACTIONS = (0.2, 0.4, 0.8, 1.6, 3.2, 6.25, 12.5, 25.0, 50.0, 100.0)  # percent
CLASSES = 2


@dataclass
class OnlineCode:
    online_bits: np.ndarray  # per position (shape [P]; P = 1 for sequence probes)
    uniform_bits: np.ndarray
    block_ends: list[int]
    uniform_blocks: list[int]  # block numbers coded uniformly because earlier blocks had one class

    @property
    def compression(self) -> np.ndarray:
        return np.divide(self.uniform_bits, self.online_bits, out=np.full_like(self.uniform_bits, np.nan), where=self.online_bits > 0)


def speaker_order(speakers: np.ndarray, seed: int) -> np.ndarray:
    """Example indices grouped by speaker, speakers in a seeded random order, utterances in a seeded order."""
    rng = np.random.default_rng(seed)
    names = sorted(set(speakers.tolist()))
    order = []
    for name in (names[i] for i in rng.permutation(len(names))):
        members = np.flatnonzero(speakers == name)
        order.extend(members[rng.permutation(len(members))].tolist())
    return np.array(order, dtype=int)


def block_ends(speakers_in_order: np.ndarray, fractions=DEFAULT_FRACTIONS) -> list[int]:
    """End index of each block, snapped forward to a speaker boundary, strictly increasing."""
    n = len(speakers_in_order)
    boundaries = [i for i in range(1, n) if speakers_in_order[i] != speakers_in_order[i - 1]] + [n]
    ends = []
    for fraction in fractions:
        target = max(1, int(round(n * fraction / 100.0)))
        end = next(b for b in boundaries if b >= target)
        if not ends or end > ends[-1]:
            ends.append(end)
    return ends


def online_code(
    labels: np.ndarray,
    valid: np.ndarray,
    speakers: np.ndarray,
    fit: Callable[[np.ndarray], object],
    probabilities: Callable[[object, np.ndarray], np.ndarray],
    seed: int = 0,
    fractions=DEFAULT_FRACTIONS,
) -> OnlineCode:
    """``fit(indices) -> model`` trains a fresh probe; ``probabilities(model, indices) -> [n, P]`` gives P(class 1).

    ``valid [N, P]`` marks the positions that exist for each example (all true for sequence probes).
    """
    order = speaker_order(speakers, seed)
    ends = block_ends(speakers[order], fractions)
    valid = valid.reshape(len(labels), -1)
    online = np.zeros(valid.shape[1])
    uniform_blocks = []
    start = 0
    for number, end in enumerate(ends):
        block = order[start:end]
        seen = order[:start]
        if number == 0 or len(set(labels[seen].tolist())) < 2:
            online += valid[block].sum(axis=0) * np.log2(CLASSES)
            if number > 0:
                uniform_blocks.append(number)
        else:
            p1 = np.asarray(probabilities(fit(seen), block)).reshape(len(block), -1)
            p_true = np.where(labels[block][:, None] == 1, p1, 1.0 - p1)
            bits = -np.log2(np.clip(p_true, 1e-12, 1.0))
            online += (bits * valid[block]).sum(axis=0)
        start = end
    uniform = valid.sum(axis=0) * np.log2(CLASSES)
    return OnlineCode(online, uniform.astype(float), ends, uniform_blocks)
