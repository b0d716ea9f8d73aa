"""The attention kind: attention pooling over the frames, then a linear layer (Fucci et al. 2025),
trained with early stopping on the dev split; it can also predict another store (``apply_to``)."""

from __future__ import annotations

import numpy as np

from probing import features, metrics
from probing.data import ProbeError, applied_attribute, store_subject, task_attribute
from probing.kinds.base import ProbeKind
from probing.mdl import online_code


def run(config, reader, splits, labels):
    """Three classes or more: a K-class softmax head, each test utterance predicted as its most probable
    class (:func:`_scores`); the attention output's ``probabilities`` are then ``[N, K]`` (two classes:
    P(class 1), ``[N]``)."""
    from torch.utils.data import Subset

    from probing.train import fit_attention

    if not len(splits.dev):
        raise ProbeError(
            f"the attention probe stops early on a dev split, and the {splits.task} dev split is empty; give dev utterances of both classes in the manifest"
        )
    data, scaler = _sequence_data(config, reader, splits, labels)
    dim, classes, workers = reader.dim(config.site), len(splits.class_names), config.loader_workers

    def fit(indices):
        return fit_attention(
            Subset(data["train"], indices), data["dev"], dim, config.max_epochs, config.device, config.seed, lr=config.lr, workers=workers, classes=classes
        )

    def predict(model, indices):
        return model.predict(Subset(data["train"], indices), workers=workers)[0]

    model = fit(np.arange(len(data["train"])))
    probabilities, weights = (model.class_probabilities if classes > 2 else model.predict)(data["test"], workers=workers)
    row = _scores(labels["test"], probabilities, splits.class_names) | {"best_epoch": model.best_epoch, "epochs": model.epochs}
    arrays = {}
    if config.apply_to:
        applied_row, arrays = _apply(config, model, scaler, splits.class_names)
        row |= applied_row
    if config.mdl:
        code = online_code(
            labels["train"], np.ones((len(data["train"]), 1), bool), splits.train.speakers, fit, predict, seed=config.seed, order=config.mdl_order
        )
        row |= code.summary(slice(0, 1), "attention early stopping on the dev split")
    return row, arrays, {"ids": splits.test.ids, "weights": weights, "probabilities": probabilities}


def _scores(labels: np.ndarray, probabilities: np.ndarray, class_names: tuple[str, ...]) -> dict:
    """Macro F1, accuracy and recall per class of the predictions: the most probable class of ``[N, K]``
    probabilities (three classes or more), else class 1 where P(class 1) is over 0.5."""
    if len(class_names) > 2:
        return metrics.multiclass_summary(labels, probabilities.argmax(axis=1), class_names)
    return metrics.summary(labels, (probabilities > 0.5).astype(int), class_names)


def _sequence_data(config, reader, splits, labels):
    """The attention probe's (sequence, label) datasets per split, and the standardizer (None without).

    Held in memory when the speech frames (and their standardized copy) fit ``config.memory_gb``;
    otherwise read from the store batch by batch (statistics computed in one streaming pass), so a
    run's memory does not grow with the corpus."""
    from probing.train import SequenceDataset, StoreSequenceDataset

    ids = {n: getattr(splits, n).ids for n in ("train", "dev", "test")}
    held = sum(features.sequence_bytes(reader, config.site, ids[n]) for n in ids)
    if 2 * held <= (config.memory_gb - features.BASE_GB) * 2**30:
        seqs = {n: list(features.speech_states(reader, config.site, ids[n])) for n in ids}
        scaler = features.Standardizer.fit_sequences(seqs["train"]) if config.standardize else None
        return {n: SequenceDataset([scaler(s) for s in seqs[n]] if scaler else seqs[n], labels[n]) for n in ids}, scaler
    scaler = features.Standardizer.fit_stream(features.speech_states(reader, config.site, ids["train"])) if config.standardize else None
    return {n: StoreSequenceDataset(reader, config.site, ids[n], labels[n], scaler) for n in ids}, scaler


def _apply(config, model, scaler, class_names: tuple[str, ...]) -> tuple[dict, dict]:
    """Predict every utterance of the ``apply_to`` store; score those labelled with one of the task's classes.

    Labels are the other store's genders, or for an attribute task its values of the attribute, read
    from the manifest that store records (:func:`probing.data.applied_attribute`). Utterances of other
    genders (values) are predicted but not scored; ``applied_to`` counts both. Scores need every class
    of the probe among the labelled utterances (a macro F1 over one class means nothing, and a class
    absent there would count 0). Three classes or more: ``applied_probabilities`` are ``[N, K]`` and
    each utterance is predicted as its most probable class.
    """
    from extract.store import ShardReader
    from probing.train import StoreSequenceDataset

    other = ShardReader(config.apply_to, allow_partial=config.allow_partial)
    applied = StoreSequenceDataset(other, config.site, other.ids, np.zeros(len(other.ids), dtype=int), scaler)
    many = len(class_names) > 2
    probabilities, _ = (model.class_probabilities if many else model.predict)(applied)  # one pass over the store, read utterance by utterance
    arrays = {"applied_ids": np.array(other.ids), "applied_probabilities": probabilities, "applied_class_names": np.array(class_names)}
    summary = {"store": config.apply_to, "subject": store_subject(other), "utterances": len(other.ids), "scored": 0}
    if task_attribute(config.task) is None:
        values = np.array(other.metadata()["gender"], dtype=object)
        labelled = np.isin(values, class_names)
    else:
        values, record = applied_attribute(config, other)
        summary["labels"] = record
        labelled = np.array([value in class_names for value in values], dtype=bool)
    labels = np.array([class_names.index(value) for value in values[labelled]], dtype=int)
    if len(set(labels.tolist())) < len(class_names):
        if many:
            found = ", ".join(f"{int(np.sum(labels == k))} {name}" for k, name in enumerate(class_names))
            summary["not_scored"] = f"needs utterances of every class the probe tells apart ({', '.join(class_names)}); found {found}"
        else:
            found = f"{int(labels.sum())} {class_names[1]} and {int((1 - labels).sum())} {class_names[0]}"
            summary["not_scored"] = f"needs utterances labelled {class_names[0]} and {class_names[1]}; found {found}"
        return {"applied_to": summary}, arrays
    summary["scored"] = int(labelled.sum())
    scores = _scores(labels, probabilities[labelled], class_names)
    return {"applied_to": summary, **{f"applied_{key}": value for key, value in scores.items()}}, arrays


KINDS = (
    ProbeKind(
        "attention",
        run,
        "f1_macro",
        "attention pooling over the frames, then a linear layer (Fucci et al. 2025)",
        options=("max_epochs", "lr", "apply_to", "memory_gb", "loader_workers"),
        selects_on_dev="the epoch to stop at (early stopping)",
        multiclass=True,
    ),
)
