"""The kinds that probe one vector per utterance (:func:`probing.features.pooled`): mean and max, its
states pooled over its speech frames (multinomial for three classes or more), and sampled, single
frames at fixed fractions of its speech, one fraction chosen on dev."""

from __future__ import annotations

import numpy as np

import probing.kinds.logistic as logistic
from probing import features, metrics
from probing.kinds.base import ProbeKind


def fit_pooled(config, reader, splits, labels) -> logistic.Fit:
    """A logistic probe per pooled position (:func:`probing.features.pooled`, named by the kind)."""
    ids = {n: getattr(splits, n).ids for n in ("train", "dev", "test")}
    x = {n: features.pooled(reader, config.site, ids[n], config.probe) if ids[n] else None for n in ids}
    masks = {n: np.ones(x[n].shape[:2], dtype=bool) if x[n] is not None else None for n in x}
    return logistic.fit(config, x, masks, labels, splits.train.speakers)


def run(config, reader, splits, labels):
    if len(splits.class_names) > 2:
        return _multiclass(config, reader, splits, labels)
    fitted = fit_pooled(config, reader, splits, labels)
    lengths = logistic.lengths(reader, config.site, splits.test.ids)
    return logistic.row(fitted.scores, slice(0, 1), lengths, {"test_predicted": fitted.predictions[:, 0]}, fitted.code, splits.class_names)


def _multiclass(config, reader, splits, labels):
    """A multinomial logistic regression (:func:`probing.train.fit_multinomial`) on pooled states,
    scored on test by macro F1 over every class; ``test_predicted`` holds the class numbers."""
    from probing.train import fit_multinomial

    x = {n: features.pooled(reader, config.site, getattr(splits, n).ids, config.probe) for n in ("train", "test")}
    x = logistic.standardized(config, x, np.ones(x["train"].shape[:2], dtype=bool))
    model = fit_multinomial(x["train"][:, 0], labels["train"], c=config.c, max_iter=config.max_iter)
    predicted = model.predict(x["test"][:, 0])
    row = metrics.multiclass_summary(labels["test"], predicted, splits.class_names)
    return row | logistic.lengths(reader, config.site, splits.test.ids), {"test_predicted": predicted}, {}


def run_sampled(config, reader, splits, labels):
    """A logistic regression per frame at :data:`probing.features.SAMPLED_FRACTIONS` of the speech,
    the fraction reported chosen by its dev F1 (the first fraction without dev utterances)."""
    fitted = fit_pooled(config, reader, splits, labels)
    chosen = 0
    if len(splits.dev):
        dev_scores = metrics.position_scores(labels["dev"], (fitted.model.probabilities(fitted.x["dev"]) > 0.5).astype(int))
        chosen = int(np.argmax(dev_scores["f1_macro"]))
    extra = {"sampled_fraction": features.SAMPLED_FRACTIONS[chosen], "chosen_on": "dev" if len(splits.dev) else "first position"}
    extra |= logistic.lengths(reader, config.site, splits.test.ids)
    return logistic.row(fitted.scores, slice(chosen, chosen + 1), extra, {"test_predicted": fitted.predictions[:, chosen]}, fitted.code, splits.class_names)


KINDS = (
    ProbeKind("mean", run, "f1_macro", "logistic probe on the mean over speech frames", options=logistic.OPTIONS, reads="mean", multiclass=True),
    ProbeKind("max", run, "f1_macro", "logistic probe on the maximum over speech frames", options=logistic.OPTIONS, multiclass=True),
    ProbeKind(
        "sampled",
        run_sampled,
        "f1_macro",
        "logistic probes on single frames at fixed fractions of the speech, one chosen on dev",
        options=logistic.OPTIONS,
        selects_on_dev="the sampled position",
    ),
)
