"""Control labels: shuffled training labels, and a random label per speaker (Hewitt & Liang 2019)."""

from __future__ import annotations

import numpy as np

CONTROLS = ("none", "shuffled", "speaker")


def shuffled(labels: np.ndarray, seed: int) -> np.ndarray:
    """Training labels permuted (test labels stay true): what a probe learns from chance alone."""
    return labels[np.random.default_rng(seed).permutation(len(labels))]


def speaker_labels(speakers: np.ndarray, seed: int) -> dict[str, int]:
    """A random, balanced class per speaker: half the speakers (rounded) get 1, in a seeded order."""
    names = sorted(set(speakers.tolist()))
    order = np.random.default_rng(seed).permutation(len(names))
    return {names[i]: int(rank < len(names) // 2) for rank, i in enumerate(order)}


def selectivity(f1_real: float, f1_control: float) -> float:
    return f1_real - f1_control
