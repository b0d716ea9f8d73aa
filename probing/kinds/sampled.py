"""The sampled kind: logistic probes on single frames at fixed fractions of the speech, one chosen on dev."""

from __future__ import annotations

import numpy as np

from probing import features, metrics
from probing.kinds import logistic
from probing.kinds.base import ProbeKind
from probing.kinds.pooled import fit_pooled


def run(config, reader, splits, labels):
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
    ProbeKind(
        "sampled",
        run,
        "f1_macro",
        "logistic probes on single frames at fixed fractions of the speech, one chosen on dev",
        options=logistic.OPTIONS,
        selects_on_dev="the sampled position",
    ),
)
