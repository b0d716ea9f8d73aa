"""Minimum description length by online code (Voita & Titov 2020), around any probe, in bits.

Examples are ordered by a seeded permutation of speakers (all of a speaker's utterances together)
and cut into blocks at the given fractions of the training set, each boundary moved forward to the
next speaker boundary so no block is predicted by a probe trained on its own speakers
(``order="speaker"``, the default). ``order="random"`` is Voita & Titov's and Attanasio et al.'s
(B.3): the examples in a seeded random order, blocks cut exactly at the fractions (108 examples:
1, 2, 3, 7, 14, 27, 54, 108), so later blocks hold speakers the probe was trained on; it suits a
split that shares speakers between train and test anyway (``split: stratified``). The first
block costs ``n1 * log2(K)`` bits; each later block costs the sum over its examples of
``-log2 p(true class)`` under a fresh probe trained on all earlier blocks. A block whose preceding
blocks hold one class only is coded uniformly (there is no classifier to train), and reported
(``uniform_blocks``; :func:`uniform_block_count` counts the first block too).

Guard against accidental overconfidence (logistic probes): a probe with a fixed L2 strength
(scikit-learn's C = 1) trained on the few voices of the early blocks is confidently wrong on the
next block's new voices, and a confidently wrong prediction costs many bits, so the online code can
exceed the uniform one although the probe generalises (measured on synthetic voices, D = 512, 60
speakers: compression 0.89 at C = 1 against 1.04 at C = 0.01 on a noisy signal the probe reads at
74 % on unseen voices; 0.44 at C = 1 on shuffled labels, where 1 is the honest value; the mixture
below gives 1.03 and 0.98: tests/probing/test_controls_mdl.py; 32 % of the C = 1 code's bits go to
predictions giving the true class less than 0.1). With a ``grid`` of candidate values, the labels
are coded by the Bayesian mixture of the candidates' online codes (uniform prior; Grünwald 2007, ch. 6): each
example's probability is the average of the candidates' predictions weighted by how well each coded
the examples transmitted before it, which multiplies out to ``-log2 mean_C 2^(-L_C)`` bits, where
``L_C`` is the online codelength with C fixed (the blocks coded uniformly cost the same under every C).
What the guard guarantees: ``min_C L_C <= mixture <= min_C L_C + log2(len(grid))`` at every position,
so the code is never more than log2 of the grid size (2.3 bits for the default five values) worse
than the best candidate in hindsight, and it is a valid code since every weight depends on earlier
examples only. The row records the candidate with the most weight entering each block
(:func:`prequential_choice`, from earlier blocks only).

What it does not guarantee: a code near the uniform one when the features carry nothing. The
intercept is unpenalised at every C, so even the most regularised probe, its weights near zero,
predicts a block with the class share of the prefix it was trained on, and a block whose share
differs (likely when blocks hold a few speakers each) costs more than ``log2(K)`` bits an example.
On pure noise in the demo's design (8 training speakers, blocks of 1, 1, 2 and 4 speakers), C = 1e-4
codes at 1.31 x uniform and the guarded compression is 0.75 (tests/probing/test_controls_mdl.py; other seeds
0.99 to 1.04). A compression below 1 therefore mixes this prior shift with overconfidence.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_FRACTIONS = (0.2, 0.4, 0.8, 1.6, 3.2, 6.25, 12.5, 25.0, 50.0, 100.0)  # percent
DEFAULT_C_GRID = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)  # L2 strengths for the logistic guard, most regularised first
CLASSES = 2
MIXTURE_GUARD = "Bayesian mixture over the C grid"
UNGUARDED = "none: every block at the fixed C"


@dataclass
class OnlineCode:
    online_bits: np.ndarray  # per position (shape [P]; P = 1 for sequence probes)
    uniform_bits: np.ndarray
    block_ends: list[int]
    uniform_blocks: list[int]  # 0-based numbers of the later blocks coded uniformly because earlier blocks had one class (block 0 always is)
    chosen: np.ndarray | None = None  # [blocks, P]: the grid value with most weight entering each block (nan: coded uniformly)
    grid: tuple = ()  # candidate values; empty without a guard
    order: str = "speaker"  # how examples were ordered into blocks (MDL_ORDERS)

    @property
    def uniform_block_count(self) -> int:
        return uniform_block_count(self.uniform_blocks)

    @property
    def compression(self) -> np.ndarray:
        return np.divide(self.uniform_bits, self.online_bits, out=np.full_like(self.uniform_bits, np.nan), where=self.online_bits > 0)

    def summary(self, span: slice, guard: str) -> dict:
        """A row's MDL keys: codelengths summed over ``span``; with a grid guard, the C with most weight entering
        each block (for several positions, the lower median over ``span``; every position's is in the arrays as ``mdl_c``)."""
        online, uniform = float(np.sum(self.online_bits[span])), float(np.sum(self.uniform_bits[span]))
        guarded = {}
        if self.grid:
            guarded = {
                "mdl_c_grid": list(self.grid),
                "mdl_c_per_block": [None if np.isnan(c).all() else float(np.percentile(c[~np.isnan(c)], 50, method="lower")) for c in self.chosen[:, span]],
            }
        return {
            "codelength_online_bits": online,
            "codelength_uniform_bits": uniform,
            "compression": uniform / online if online > 0 else float("nan"),
            "mdl_blocks": len(self.block_ends),
            "mdl_order": self.order,
            "mdl_uniform_blocks": self.uniform_blocks,
            "mdl_uniform_block_count": self.uniform_block_count,
            **({"mdl_positions": [span.start, span.stop]} if span.stop - span.start > 1 else {}),
            "mdl_guard": guard,
            **guarded,
        }


def uniform_block_count(uniform_blocks: Sequence[int]) -> int:
    """How many blocks are coded uniformly: the first, always, and the later ones listed in ``uniform_blocks``."""
    return 1 + len(uniform_blocks)


def speaker_order(speakers: np.ndarray, seed: int) -> np.ndarray:
    """Example indices grouped by speaker, speakers in a seeded random order, utterances in a seeded order."""
    rng = np.random.default_rng(seed)
    names = sorted(set(speakers.tolist()))
    order = []
    for name in (names[i] for i in rng.permutation(len(names))):
        members = np.flatnonzero(speakers == name)
        order.extend(members[rng.permutation(len(members))].tolist())
    return np.array(order, dtype=int)


MDL_ORDERS = ("speaker", "random")  # examples grouped by speaker, blocks snapped to speakers; or examples in random order


def example_order(speakers: np.ndarray, seed: int, order: str) -> np.ndarray:
    """The order examples are transmitted in: :func:`speaker_order`, or a seeded permutation of them all."""
    if order not in MDL_ORDERS:
        raise ValueError(f"MDL order must be one of {', '.join(MDL_ORDERS)}, got {order!r}")
    return speaker_order(speakers, seed) if order == "speaker" else np.random.default_rng(seed).permutation(len(speakers))


def block_ends(speakers_in_order: np.ndarray, fractions=DEFAULT_FRACTIONS, snap: bool = True) -> list[int]:
    """End index of each block, snapped forward to a speaker boundary (``snap``; else cut at the
    fraction itself, rounded, at least 1), strictly increasing."""
    n = len(speakers_in_order)
    boundaries = [i for i in range(1, n) if not snap or speakers_in_order[i] != speakers_in_order[i - 1]] + [n]
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
    fit: Callable | None,
    probabilities: Callable[[object, np.ndarray], np.ndarray],
    seed: int = 0,
    fractions=DEFAULT_FRACTIONS,
    fit_many: Callable | None = None,
    grid: Sequence | None = None,
    order: str = "speaker",
) -> OnlineCode:
    """``fit(indices) -> model`` trains a fresh probe; ``probabilities(model, indices) -> [n, P]`` gives P(class 1).

    ``fit_many(list of index arrays) -> models`` may replace ``fit`` to train every block's probe in
    one go (the batched logistic probes do). ``valid [N, P]`` marks the positions that exist for
    each example (all true for sequence probes). With ``grid`` (sorted, most regularised first),
    ``fit``/``fit_many`` take the candidate value as a second argument, and every position is coded
    by the Bayesian mixture of the candidates (:func:`mixture_bits`).
    """
    sequence = example_order(speakers, seed, order)
    ends = block_ends(speakers[sequence], fractions, snap=order == "speaker")
    valid = valid.reshape(len(labels), -1)
    online = np.zeros(valid.shape[1])
    starts = [0, *ends[:-1]]
    coded, coded_numbers, uniform_blocks = [], [], []
    for number, (start, end) in enumerate(zip(starts, ends)):
        block = sequence[start:end]
        if number == 0 or len(set(labels[sequence[:start]].tolist())) < 2:
            online += valid[block].sum(axis=0) * np.log2(CLASSES)
            if number > 0:
                uniform_blocks.append(number)
        else:
            coded.append((sequence[:start], block))
            coded_numbers.append(number)
    candidates = list(grid) if grid is not None else [None]
    if grid is not None and (not candidates or list(candidates) != sorted(candidates)):
        raise ValueError(f"the guard's grid must be non-empty and sorted, most regularised first; got {grid}")
    bits = np.zeros((len(candidates), len(coded), valid.shape[1]))
    prefixes = [seen for seen, _ in coded]
    for index, value in enumerate(candidates if coded else []):
        given = [] if grid is None else [value]
        models = fit_many(prefixes, *given) if fit_many else [fit(seen, *given) for seen in prefixes]
        for number, (model, (_, block)) in enumerate(zip(models, coded)):
            bits[index, number] = _block_bits(model, block, labels, valid, probabilities)
    online += mixture_bits(bits.sum(axis=1))
    chosen = None
    if grid is not None:
        chosen = np.full((len(ends), valid.shape[1]), np.nan)
        chosen[coded_numbers] = np.asarray(candidates, dtype=float)[prequential_choice(bits)]
    uniform = valid.sum(axis=0) * np.log2(CLASSES)
    return OnlineCode(online, uniform.astype(float), ends, uniform_blocks, chosen, tuple(candidates) if grid is not None else (), order)


def _block_bits(model, block: np.ndarray, labels: np.ndarray, valid: np.ndarray, probabilities) -> np.ndarray:
    """Bits per position to transmit ``block``'s labels under ``model``: sum of -log2 p(true class)."""
    p1 = np.asarray(probabilities(model, block)).reshape(len(block), -1)
    p_true = np.where(labels[block][:, None] == 1, p1, 1.0 - p1)
    return (-np.log2(np.clip(p_true, 1e-12, 1.0)) * valid[block]).sum(axis=0)


def mixture_bits(totals: np.ndarray) -> np.ndarray:
    """``totals [candidates, P]`` online codelengths -> bits of their uniform Bayesian mixture,
    ``-log2 mean_C 2^(-L_C)`` per position (one candidate: its own codelength)."""
    best = totals.min(axis=0)
    return best - np.log2(np.mean(np.exp2(best - totals), axis=0))


def prequential_choice(bits: np.ndarray) -> np.ndarray:
    """``bits [candidates, coded blocks, P]`` -> per block and position, the candidate with the most
    mixture weight entering the block: the smallest summed codelength over the coded blocks BEFORE it
    (ties, and the first coded block, which has no evidence, go to the first, most regularised one)."""
    earlier = np.cumsum(bits, axis=1) - bits
    return np.argmin(earlier, axis=0)


def online_code_logistic(
    x: np.ndarray,
    labels: np.ndarray,
    valid: np.ndarray,
    speakers: np.ndarray,
    seed: int = 0,
    c_grid: Sequence | None = DEFAULT_C_GRID,
    order: str = "speaker",
    **fit_options,
) -> OnlineCode:
    """Online code of per-position logistic probes: ``x [N, P, D]``, ``valid [N, P]``. On the CPU
    each block's probe is fitted on its training prefix only, starting from the previous prefix's
    solution (:func:`probing.solver.fit_prefixes`); elsewhere (a GPU) every block's probe is trained
    in one batched fit, one head per training prefix masked over the full set, one fit per candidate C.

    ``c_grid`` guards the code against overconfidence: every position is coded by the Bayesian
    mixture of the online codes at each C (see the module's docstring); ``c_grid=None`` codes every
    block at the fixed ``c`` of ``fit_options`` (scikit-learn's C = 1 by default), unguarded."""
    import torch

    from probing.train import fit_logistic_heads

    if c_grid is not None and "c" in fit_options:
        raise ValueError("give either a fixed c or a c_grid to choose from, not both")

    if fit_options.get("device", "cpu") == "cpu":
        from probing.solver import fit_prefixes
        from probing.train import FittedLogistic

        options = {key: value for key, value in fit_options.items() if key not in ("device", "seed")}

        def fit_blocks(prefixes, *c):
            solutions = fit_prefixes(x, labels, valid, prefixes, **(options | ({"c": c[0]} if c else {})))
            return [FittedLogistic(torch.from_numpy(s.weight), torch.from_numpy(s.bias)) for s in solutions]

    else:

        def fit_blocks(prefixes, *c):
            heads = np.zeros((len(prefixes), *valid.shape), dtype=bool)
            for head, prefix in enumerate(prefixes):
                heads[head, prefix] = valid[prefix]
            options = fit_options | ({"c": c[0]} if c else {})
            return fit_logistic_heads(x, np.broadcast_to(labels, (len(prefixes), len(labels))), heads, seed=seed, **options)

    return online_code(
        labels,
        valid,
        speakers,
        None,
        lambda model, idx: model.probabilities(x[idx]),
        seed=seed,
        fit_many=fit_blocks,
        grid=c_grid,
        order=order,
    )
