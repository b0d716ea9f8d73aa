"""Probe metrics in percent: macro F1, accuracy, recall per class (two classes; any number in
:func:`multiclass_summary`); per-position curves, EMA and F1_S."""

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
    scores = _scores_from_counts(_binary_counts(y_true, y_pred, mask))
    return {k: v[0] for k, v in scores.items()} if squeeze else scores


def _scores_from_counts(counts: dict) -> dict[str, np.ndarray]:
    """:func:`position_scores`' keys from (true positives, false positives, false negatives) per class."""
    f1 = []
    recall = {}
    for label, (tp, fp, fn) in counts.items():
        f1.append(_safe_ratio(2 * tp, 2 * tp + fp + fn))
        recall[label] = _safe_ratio(tp, tp + fn)
    n = counts[0][0] + counts[0][2] + counts[1][0] + counts[1][2]  # every scored example is a true example of one class
    return {
        "f1_macro": 100 * (f1[0] + f1[1]) / 2,
        "accuracy": 100 * _safe_ratio(counts[0][0] + counts[1][0], n),
        "recall_0": 100 * recall[0],
        "recall_1": 100 * recall[1],
        "count": n,
    }


def single_class_scores(classes: np.ndarray, correct: np.ndarray, count: np.ndarray) -> dict[str, np.ndarray]:
    """:func:`position_scores` of test sets that each hold one class, pooled (the folds of a
    leave-one-speaker-out run): set ``k`` holds ``count[k]`` examples of class ``classes[k]`` per
    position, ``correct[k]`` of them predicted right; each wrong one is a false positive of the
    other class. ``correct`` and ``count`` are ``[K]`` or ``[K, P]``."""
    classes = np.asarray(classes).reshape(-1, *([1] * (np.ndim(count) - 1)))
    correct, count = np.asarray(correct), np.asarray(count)
    wrong = count - correct
    own = {label: classes == label for label in (0, 1)}
    counts = {label: ((correct * own[label]).sum(axis=0), (wrong * ~own[label]).sum(axis=0), (wrong * own[label]).sum(axis=0)) for label in (0, 1)}
    return _scores_from_counts(counts)


def summary(y_true: np.ndarray, y_pred: np.ndarray, class_names: tuple[str, str]) -> dict:
    """The metric keys of a result row: ``f1_macro``, ``accuracy``, ``recall`` per class name, in percent."""
    return span_summary(position_scores(y_true, np.asarray(y_pred)[:, None]), slice(0, 1), class_names)


def span_summary(scores: dict, span: slice, class_names: tuple[str, str]) -> dict:
    """:func:`summary`'s keys from per-position scores (:func:`position_scores`), each the mean over the positions in ``span``."""
    return {
        "f1_macro": float(np.mean(scores["f1_macro"][span])),
        "accuracy": float(np.mean(scores["accuracy"][span])),
        "recall": {class_names[0]: float(np.mean(scores["recall_0"][span])), class_names[1]: float(np.mean(scores["recall_1"][span]))},
    }


def multiclass_summary(y_true: np.ndarray, y_pred: np.ndarray, class_names: tuple[str, ...]) -> dict:
    """:func:`summary` over any number of classes (class ``k`` named ``class_names[k]``): macro F1 over
    every class, as ``f1_score(average="macro", labels=range(K), zero_division=0)`` (a class never
    predicted nor present scores 0), accuracy, and recall per class name, in percent. For two
    classes it equals :func:`summary`."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    f1, recall = [], {}
    for label, name in enumerate(class_names):
        tp = int(np.sum((y_pred == label) & (y_true == label)))
        fp = int(np.sum((y_pred == label) & (y_true != label)))
        fn = int(np.sum((y_pred != label) & (y_true == label)))
        f1.append(float(_safe_ratio(2 * tp, 2 * tp + fp + fn)))
        recall[name] = 100 * float(_safe_ratio(tp, tp + fn))
    return {"f1_macro": 100 * float(np.mean(f1)), "accuracy": 100 * float(_safe_ratio(np.sum(y_pred == y_true), len(y_true))), "recall": recall}


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
