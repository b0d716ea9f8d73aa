"""Control runs: what a probe reads when the labels carry no gender (Hewitt & Liang 2019).

- ``shuffled``: control labels that agree with the true labels on exactly half of each class (and
  of each speaker, within one utterance), so they are independent of gender in the sample itself; a
  free permutation keeps more or less than chance agreement and its probe inherits part of the
  signal. Test labels stay true: the control reads chance unless the probe finds gender anyway.
- ``speaker``: a random label per speaker, balanced within each gender, trained and scored on a
  within-speaker split (every speaker's utterances divided between train, dev and test). It can only
  be learnt by recognising voices seen in training: it measures how much a probe can memorise about
  speakers, the analogue of Hewitt & Liang's word-type control.

Each control is run with several label seeds derived from the run seed (:func:`control_seeds`) and
reported as their mean.
"""

from __future__ import annotations

import numpy as np

from probing.data import ProbeError, ProbeSplits, SplitData

CONTROLS = ("none", "shuffled", "speaker")
CONTROL_SEED_COUNT = 3
WITHIN_SPEAKER_SHARES = {"test": 0.2, "dev": 0.1}


def control_seeds(seed: int, count: int = CONTROL_SEED_COUNT) -> list[int]:
    """The label seeds of a control run: distinct for distinct run seeds (``seed * count + k``)."""
    return [seed * count + k for k in range(count)]


def _flips_per_speaker(speakers: np.ndarray, flips: int, rng: np.random.Generator) -> dict:
    """``flips`` spread over speakers: each gets half its utterances rounded down, and the remaining
    flips go one each to randomly chosen speakers with an odd count (always enough of them when
    ``flips`` is at most half the utterances rounded up)."""
    names, counts = np.unique(speakers, return_counts=True)
    per_speaker = dict(zip(names.tolist(), (counts // 2).tolist()))
    odd = [name for name, count in zip(names.tolist(), counts.tolist()) if count % 2]
    for name in rng.permutation(np.array(odd, dtype=object))[: flips - sum(per_speaker.values())].tolist():
        per_speaker[name] += 1
    return per_speaker


def shuffled(labels: np.ndarray, seed, speakers: np.ndarray | None = None) -> np.ndarray:
    """Binary control labels agreeing with ``labels`` on exactly half of each class (within one for an
    odd class size), and on half of each speaker's utterances (within one), seeded.

    Half of each class is flipped to the other class, so with classes of equal size (the balanced
    splits) the control keeps the class counts, as a permutation would. For odd sizes the extra flip
    is drawn once for both classes, which keeps equal class sizes equal.
    """
    labels = np.asarray(labels)
    if not np.isin(labels, (0, 1)).all():
        raise ValueError("shuffled controls are for binary 0/1 labels")
    rng = np.random.default_rng(seed)
    speakers = np.zeros(len(labels), dtype=object) if speakers is None else np.asarray(speakers, dtype=object)
    extra = int(rng.integers(2))
    control = labels.copy()
    for label in (0, 1):
        members = np.flatnonzero(labels == label)
        flips = len(members) // 2 + (len(members) % 2) * extra
        for name, count in _flips_per_speaker(speakers[members], flips, rng).items():
            own = members[speakers[members] == name]
            control[rng.permutation(own)[:count]] = 1 - label
    return control


def speaker_labels(speakers: np.ndarray, seed: int, labels: np.ndarray | None = None) -> dict[str, int]:
    """A random class per speaker, seeded. With ``labels``, balanced within each true class (half of
    each gender's speakers get 1, odd counts rounded up for one class and down for the other, drawn),
    so the control labels carry no gender; without, half of all speakers (rounded, drawn) get 1."""
    rng = np.random.default_rng(seed)
    speakers = np.asarray(speakers, dtype=object)
    labels = np.zeros(len(speakers), dtype=int) if labels is None else np.asarray(labels)
    names = sorted(set(speakers.tolist()))
    majority = {name: int(round(labels[speakers == name].mean())) for name in names}
    extra = int(rng.integers(2))
    mapping = {}
    for label in (0, 1):
        group = [name for name in names if majority[name] == label]
        ones = (len(group) + (extra if label == 0 else 1 - extra)) // 2
        for rank, index in enumerate(rng.permutation(len(group))):
            mapping[group[index]] = int(rank < ones)
    return mapping


def within_speaker_assignment(speakers: np.ndarray, seed: int) -> np.ndarray:
    """``"train"``/``"dev"``/``"test"`` per utterance, dividing every speaker's utterances (seeded):
    ``round(share * count)`` to test and dev, at least one to test from 2 utterances and one to dev
    from 3, and always at least one to train; a speaker with one utterance goes to train."""
    rng = np.random.default_rng(seed)
    speakers = np.asarray(speakers, dtype=object)
    assignment = np.full(len(speakers), "train", dtype=object)
    for name in sorted(set(speakers.tolist())):
        members = rng.permutation(np.flatnonzero(speakers == name))
        count = len(members)
        n_test = min(max(1, round(WITHIN_SPEAKER_SHARES["test"] * count)), count - 1) if count >= 2 else 0
        n_dev = min(max(1, round(WITHIN_SPEAKER_SHARES["dev"] * count)), count - n_test - 1) if count >= 3 else 0
        assignment[members[:n_test]] = "test"
        assignment[members[n_test : n_test + n_dev]] = "dev"
    return assignment


def within_speaker_splits(splits: ProbeSplits, seed: int) -> ProbeSplits:
    """The utterances of all three splits pooled and re-split within speakers: the split on which the
    speaker control and its real probe are both trained and scored (every test voice is heard in training)."""
    parts = [getattr(splits, name) for name in ("train", "dev", "test")]
    ids = np.array([i for part in parts for i in part.ids], dtype=object)
    labels = np.concatenate([part.labels for part in parts])
    speakers = np.concatenate([part.speakers for part in parts])
    assignment = within_speaker_assignment(speakers, seed)
    within = {name: SplitData(ids[assignment == name].tolist(), labels[assignment == name], speakers[assignment == name]) for name in ("train", "dev", "test")}
    for name in ("train", "test"):
        if len(set(within[name].labels.tolist())) < 2:
            raise ProbeError(
                f"the speaker control's within-speaker {name} split lacks one of the classes {'/'.join(splits.class_names)}: "
                "it needs speakers of both genders with at least two utterances each"
            )
    return ProbeSplits(splits.task, within["train"], within["dev"], within["test"], "within-speaker", classes=splits.classes)


def selectivity(f1_real: float, f1_control: float) -> float:
    return f1_real - f1_control


def split_labels(splits: ProbeSplits, control: str, seed: int) -> dict[str, np.ndarray]:
    """Each split's labels, true or a control's (see the module's docstring): ``shuffled`` replaces train and
    dev labels (dev selects models: attention early stopping, the sampled position); ``speaker`` every split's."""
    labels = {name: getattr(splits, name).labels.copy() for name in ("train", "dev", "test")}
    if control == "shuffled":
        rng = np.random.default_rng(seed)
        for name in ("train", "dev"):
            labels[name] = shuffled(labels[name], rng, getattr(splits, name).speakers)
    elif control == "speaker":
        every = {n: getattr(splits, n) for n in labels}
        mapping = speaker_labels(np.concatenate([s.speakers for s in every.values()]), seed, np.concatenate([s.labels for s in every.values()]))
        labels = {n: np.array([mapping[s] for s in every[n].speakers], dtype=int) for n in labels}
    return labels


def mean_scores(rows: list[dict]) -> dict:
    """The mean over control seeds of the score keys (F1, F1_S, accuracy, recall per class)."""
    means = {key: float(np.mean([row[key] for row in rows])) for key in ("f1_macro", "f1_s", "accuracy") if key in rows[0]}
    means["recall"] = {name: float(np.mean([row["recall"][name] for row in rows])) for name in rows[0]["recall"]}
    return means
