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
    fit: Callable[[np.ndarray], object] | None,
    probabilities: Callable[[object, np.ndarray], np.ndarray],
    seed: int = 0,
    fractions=DEFAULT_FRACTIONS,
    fit_many: Callable[[list[np.ndarray]], list] | None = None,
) -> OnlineCode:
    """``fit(indices) -> model`` trains a fresh probe; ``probabilities(model, indices) -> [n, P]`` gives P(class 1).

    ``fit_many(list of index arrays) -> models`` may replace ``fit`` to train every block's probe in
    one go (the batched logistic probes do). ``valid [N, P]`` marks the positions that exist for
    each example (all true for sequence probes).
    """
    order = speaker_order(speakers, seed)
    ends = block_ends(speakers[order], fractions)
    valid = valid.reshape(len(labels), -1)
    online = np.zeros(valid.shape[1])
    starts = [0, *ends[:-1]]
    coded, uniform_blocks = [], []
    for number, (start, end) in enumerate(zip(starts, ends)):
        block = order[start:end]
        if number == 0 or len(set(labels[order[:start]].tolist())) < 2:
            online += valid[block].sum(axis=0) * np.log2(CLASSES)
            if number > 0:
                uniform_blocks.append(number)
        else:
            coded.append((order[:start], block))
    if not coded:  # every block after the first saw one class only: nothing to train
        models = []
    else:
        models = fit_many([seen for seen, _ in coded]) if fit_many else [fit(seen) for seen, _ in coded]
    for model, (_, block) in zip(models, coded):
        p1 = np.asarray(probabilities(model, block)).reshape(len(block), -1)
        p_true = np.where(labels[block][:, None] == 1, p1, 1.0 - p1)
        online += (-np.log2(np.clip(p_true, 1e-12, 1.0)) * valid[block]).sum(axis=0)
    uniform = valid.sum(axis=0) * np.log2(CLASSES)
    return OnlineCode(online, uniform.astype(float), ends, uniform_blocks)


def online_code_logistic(x: np.ndarray, labels: np.ndarray, valid: np.ndarray, speakers: np.ndarray, seed: int = 0,
                         fractions=DEFAULT_FRACTIONS, **fit_options) -> OnlineCode:
    """Online code of per-position logistic probes, every block's probe trained in one batched fit
    (one head per training prefix): ``x [N, P, D]``, ``valid [N, P]``."""
    from probing.train import fit_logistic_heads

    def fit_blocks(prefixes):
        heads = np.zeros((len(prefixes), *valid.shape), dtype=bool)
        for head, prefix in enumerate(prefixes):
            heads[head, prefix] = valid[prefix]
        return fit_logistic_heads(x, np.broadcast_to(labels, (len(prefixes), len(labels))), heads, seed=seed, **fit_options)

    return online_code(labels, valid, speakers, None, lambda model, idx: model.probabilities(x[idx]), seed=seed, fractions=fractions, fit_many=fit_blocks)
