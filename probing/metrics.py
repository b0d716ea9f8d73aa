"""Probe metrics in percent: macro F1, accuracy, recall per class; per-position curves, EMA and F1_S."""

from __future__ import annotations

import numpy as np


def _binary_counts(y_true: np.ndarray, y_pred: np.ndarray, mask: np.ndarray):
    """True positives, false positives and false negatives for both classes, along the last axis."""
    out = {}
    for label in (0, 1):
        tp = ((y_pred == label) & (y_true == label) & mask).sum(axis=0)
        fp = ((y_pred == label) & (y_true != label) & mask).sum(axis=0)
        fn = ((y_pred != label) & (y_true == label) & mask).sum(axis=0)
        out[label] = (tp, fp, fn)
    return out


def _safe_ratio(numerator, denominator):
    numerator, denominator = np.asarray(numerator, float), np.asarray(denominator, float)
    return np.divide(numerator, denominator, out=np.zeros_like(numerator), where=denominator > 0)


def position_scores(y_true: np.ndarray, y_pred: np.ndarray, mask: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Scores per column of ``y_pred`` ([N] or [N, P]), counting only rows where ``mask`` is true.

    Returns arrays over positions: ``f1_macro``, ``accuracy``, ``recall_0``, ``recall_1`` (percent)
    and ``count``. Macro F1 always averages over both classes, as scikit-learn's
    ``f1_score(average="macro", labels=[0, 1], zero_division=0)`` does: a class absent from both the
    labels and the predictions contributes an F1 of 0, so such a column scores at most 50. Without
    ``labels=``, scikit-learn averages over the classes present only and would give 100 there.
    """
    y_pred = np.asarray(y_pred)
    squeeze = y_pred.ndim == 1
    if squeeze:
        y_pred = y_pred[:, None]
    y_true = np.asarray(y_true).reshape(-1, 1)
    mask = np.ones_like(y_pred, dtype=bool) if mask is None else np.asarray(mask, dtype=bool).reshape(y_pred.shape)
    counts = _binary_counts(y_true, y_pred, mask)
    f1 = []
    recall = {}
    for label, (tp, fp, fn) in counts.items():
        f1.append(_safe_ratio(2 * tp, 2 * tp + fp + fn))
        recall[label] = _safe_ratio(tp, tp + fn)
    n = mask.sum(axis=0)
    scores = {
        "f1_macro": 100 * (f1[0] + f1[1]) / 2,
        "accuracy": 100 * _safe_ratio(((y_pred == y_true) & mask).sum(axis=0), n),
        "recall_0": 100 * recall[0],
        "recall_1": 100 * recall[1],
        "count": n,
    }
    return {k: v[0] for k, v in scores.items()} if squeeze else scores


def summary(y_true: np.ndarray, y_pred: np.ndarray, class_names: tuple[str, str]) -> dict:
    """The metric keys of a result row: ``f1_macro``, ``accuracy``, ``recall`` per class name, in percent."""
    scores = position_scores(y_true, y_pred)
    return {
        "f1_macro": float(scores["f1_macro"]),
        "accuracy": float(scores["accuracy"]),
        "recall": {class_names[0]: float(scores["recall_0"]), class_names[1]: float(scores["recall_1"])},
    }


def ema(values: np.ndarray, n: int = 3) -> np.ndarray:
    """Exponential moving average with span ``n`` (alpha = 2 / (n + 1)), started at the first value."""
    alpha = 2.0 / (n + 1)
    out = np.empty(len(values), dtype=float)
    for index, value in enumerate(values):
        out[index] = value if index == 0 else alpha * value + (1 - alpha) * out[index - 1]
    return out


def f1_s(f1_curve: np.ndarray, mean_test_length: float) -> float:
    """Mean F1 over the positions before the average test length (the positions holding speech)."""
    count = int(np.ceil(mean_test_length))
    if count < 1:
        raise ValueError("mean test length must be positive")
    return float(np.mean(f1_curve[: min(count, len(f1_curve))]))
