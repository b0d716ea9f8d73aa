"""Probe modules; training lives in :mod:`probing.train`."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn


def length_mask(lengths: torch.Tensor, width: int) -> torch.Tensor:
    return torch.arange(width, device=lengths.device)[None, :] < lengths[:, None]


class PositionalLogistic(nn.Module):
    """One binary logistic classifier per position, all positions in one batched linear map.

    Weights ``[H, P, D]``, biases ``[H, P]``: ``H`` independent heads share one pass over ``x`` (the
    MDL blocks, or a probe and its controls), which turns the per-position matrix-vector products into
    matrix products. Positions beyond an utterance's length produce logits that the loss masks out.
    """

    def __init__(self, positions: int, dim: int, heads: int = 1):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(heads, positions, dim))
        self.bias = nn.Parameter(torch.zeros(heads, positions))

    def position_major(self, x_by_position: torch.Tensor) -> torch.Tensor:
        """Logits ``[P, B, H]`` of ``x`` laid out ``[P, B, D]``: one contiguous matrix product per position,
        no copy of ``x`` (training evaluates it many times)."""
        return torch.bmm(x_by_position, self.weight.permute(1, 2, 0)) + self.bias.T[:, None, :]


class AttentionProbe(nn.Module):
    """Fucci et al. 2025: one learnable query attends over W_K x and W_V x; a linear layer gives class logits.

    ``x [B, T, D], lengths [B] -> (logits [B, classes], attention [B, T])``; padded positions get zero
    weight. Two classes as in the paper; K for an attribute of K classes (the same softmax head).
    """

    def __init__(self, dim: int, classes: int = 2):
        super().__init__()
        self.query = nn.Parameter(torch.randn(dim) / math.sqrt(dim))
        self.keys = nn.Linear(dim, dim, bias=False)
        self.values = nn.Linear(dim, dim, bias=False)
        self.classifier = nn.Linear(dim, classes)
        nn.init.xavier_uniform_(self.classifier.weight)
        nn.init.zeros_(self.classifier.bias)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        scores = self.keys(x) @ self.query / math.sqrt(x.shape[-1])
        scores = scores.masked_fill(~length_mask(lengths, x.shape[1]), float("-inf"))
        attention = torch.softmax(scores, dim=-1)
        pooled = torch.einsum("bt,btd->bd", attention, self.values(x))
        return self.classifier(pooled), attention


def interpolate_weights(weights: list, points: int = 100):
    """Resample each utterance's attention weights (its valid length) to ``points`` values, for mean ± std curves."""
    grid = np.linspace(0.0, 1.0, points)
    out = np.empty((len(weights), points))
    for row, w in enumerate(weights):
        w = np.asarray(w, dtype=float)
        out[row] = np.interp(grid, np.linspace(0.0, 1.0, len(w)), w) if len(w) > 1 else np.full(points, w[0] if len(w) else np.nan)
    return out
