"""Labels and speaker-disjoint, class-balanced splits from shard metadata, and what a probe row
records of its stores (:func:`store_identity`, :func:`store_subject`, :func:`partial_record`).

A gender probe reads its labels from the store's metadata, so it can be trained from the shards
alone. An attribute probe (``attribute:NAME``: every class of a manifest's ``extra`` field, or
``attribute:NAME:A,B``: two of them, see :mod:`extract.attributes`) reads them from a metadata
column :func:`attribute_column` that :func:`probe_metadata` adds from the manifest; utterances without a
value are left out. Classes are numbered in the order of :attr:`ProbeSplits.class_names` (the
attribute's values sorted, or the two named with the first as class 1, as ``female-male``).

Splits (:func:`make_splits`) follow the manifest's train/dev/test when present, checked, not trusted;
otherwise they are speaker-disjoint (80/20 train/test by speaker, dev carved from the train speakers).
Each split is balanced by downsampling the larger classes (:func:`_balance`).

Leave one speaker out (:func:`leave_one_speaker_out`) is for corpora with too few voices for fixed
speaker-disjoint splits holding both genders (the real voices: 15 speakers).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from extract.attributes import LabelError, attribute_task, parse_attribute_task, read_attribute
from extract.errors import UserError
from extract.manifest import ManifestError
from extract.provenance import joined, model_label

TASKS = {"female-male": ("male", "female"), "other-male": ("male", "other")}  # class 0, class 1
# one train/dev/test split (:func:`make_splits`); leave one speaker out (:func:`leave_one_speaker_out`);
# each speaker's utterances spread over train/dev/test (:func:`speaker_stratified_splits`: Attanasio et al. 2024, B.3)
SPLITS = ("fixed", "loso", "stratified")
DEFAULT_SPLIT = "fixed"


class ProbeError(UserError, ValueError):
    """Data that cannot give an honest probe result (a missing class, too few speakers, shared speakers)."""


@dataclass
class SplitData:
    ids: list[str]
    labels: np.ndarray  # class numbers, in the order of ProbeSplits.class_names
    speakers: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)

    def describe(self, class_names: tuple[str, ...] = ()) -> dict:
        """Utterances, speakers and the share of class 1; with more than two ``class_names``, the
        utterances per class instead (``classes``)."""
        described = {"utterances": len(self.ids), "speakers": int(len(set(self.speakers.tolist())))}
        if len(class_names) > 2:
            return described | {"classes": {name: int(np.sum(self.labels == k)) for k, name in enumerate(class_names)}}
        return described | {"class_1_share": float(self.labels.mean()) if len(self) else 0.0}


@dataclass
class ProbeSplits:
    task: str
    train: SplitData
    dev: SplitData
    test: SplitData
    source: str  # "manifest", "speaker-disjoint", "speaker-stratified", "within-speaker" (the speaker control) or "leave-one-speaker-out"
    shared_speakers: dict[str, list[str]] = field(default_factory=dict)  # split -> speakers also in train (allowed explicitly)
    classes: tuple[str, ...] = ()  # the class names, class 0 first (a gender task's from TASKS when empty)

    @property
    def class_names(self) -> tuple[str, ...]:
        return self.classes or TASKS[self.task]

    def sizes(self) -> dict:
        return {"source": self.source, **{name: getattr(self, name).describe(self.class_names) for name in ("train", "dev", "test")}}


def _balance(indices: np.ndarray, labels: np.ndarray, speakers: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Downsample the larger classes to the smallest one's size, round robin over their speakers
    (seeded). ``labels`` are every labelled utterance's, so they hold every class (:func:`_labelled`)."""
    by_class = [indices[labels[indices] == c] for c in range(int(labels.max()) + 1 if len(labels) else 2)]
    target = min(len(group) for group in by_class)
    kept = []
    for group in by_class:
        if len(group) == target:
            kept.append(group)
            continue
        per_speaker = {}
        for index in rng.permutation(group):
            per_speaker.setdefault(speakers[index], []).append(index)
        queues = [per_speaker[s] for s in rng.permutation(sorted(per_speaker))]
        chosen, depth = [], 0
        while len(chosen) < target:
            for queue in queues:
                if depth < len(queue) and len(chosen) < target:
                    chosen.append(queue[depth])
            depth += 1
        kept.append(np.array(chosen, dtype=int))
    return np.sort(np.concatenate(kept))


LOSO_HINT = (
    "or leave one speaker out (--split loso; split: loso in a study or grid): 2 speakers per class, 3 for probes that select on a dev split, two classes only"
)


def _speaker_disjoint(labels, speakers, rng, class_names, test_share=0.2, dev_share=0.1, dev_needed=True, where="the store"):
    """Assign whole speakers to train/dev/test per class, so each split keeps both classes. Without
    ``dev_needed`` (a probe kind that selects nothing on dev), a class with one speaker too few for a
    dev split gets none rather than failing; with enough speakers the dev split is carved as always,
    so a run's training set never depends on the kind. ``where`` names the speakers counted in errors."""
    assignment = {}
    for c in range(len(class_names)):
        names = sorted(set(speakers[labels == c].tolist()))
        order = [names[i] for i in rng.permutation(len(names))]
        dev = dev_share
        if dev > 0 and not dev_needed and len(order) < 1 + (test_share > 0) + 1:
            dev = 0.0  # one speaker short of a dev split that this probe would not use
        needed = 1 + (test_share > 0) + (dev > 0)
        if len(order) < needed:
            roles = ", ".join(role for role, used in (("one to test", test_share > 0), ("one for the dev split", dev > 0), ("one to train", True)) if used)
            raise ProbeError(
                f"{where}: the fixed split needs at least {needed} {class_names[c]} speakers ({roles}), and has {len(order)} "
                f"({', '.join(order) or 'none'}); add {class_names[c]} speakers, give train/dev/test per speaker in the manifest, {LOSO_HINT}"
            )
        n_test = max(1, int(round(test_share * len(order)))) if test_share > 0 else 0
        n_dev = max(1, int(round(dev * len(order)))) if dev > 0 else 0
        for position, name in enumerate(order):
            assignment[name] = "test" if position < n_test else "dev" if position < n_test + n_dev else "train"
    return np.array([assignment[s] for s in speakers])


def attribute_column(attribute: str) -> str:
    """The metadata column :func:`probe_metadata` fills with ``attribute``'s labels (None where an utterance has none)."""
    return f"attribute:{attribute}"


def task_attribute(task: str) -> str | None:
    """The manifest attribute ``task`` probes (``attribute:age:young,old`` -> ``age``), None for a gender task."""
    column, _ = task_labels(task)
    return None if column == "gender" else column.split(":", 1)[1]


def task_labels(task: str) -> tuple[str, tuple[str, ...]]:
    """``(metadata column, class names)`` of ``task``: a gender task's two classes (:data:`TASKS`), an
    attribute task's two named classes (the second as class 0), or no names where every class of
    the attribute is probed (they are the values present). An unknown task is a :class:`ProbeError`."""
    if task in TASKS:
        return "gender", TASKS[task]
    try:
        attribute = parse_attribute_task(task)
    except LabelError as error:
        raise ProbeError(str(error)) from error
    if attribute is None:
        raise ProbeError(f"unknown task {task!r}; choose from {sorted(TASKS)}, attribute:NAME or attribute:NAME:A,B")
    name, named = attribute
    return attribute_column(name), named[::-1]


def _labelled(metadata: dict[str, list], ids: list[str], task: str, language: str | None) -> tuple:
    """(ids, class numbers, speakers, manifest splits, class names) of the utterances labelled with
    ``task``'s classes (in ``language`` when given); fewer than two classes is a :class:`ProbeError`."""
    column, named = task_labels(task)
    if column not in metadata:
        raise ProbeError(f"the {task} probe needs the {column} labels beside the store's metadata (probe_metadata reads them from the manifest)")
    values = np.array(metadata[column], dtype=object)
    keep = np.ones(len(values), dtype=bool) if language is None else np.array(metadata["language"]) == language
    classes = named or tuple(sorted({value for value in values[keep].tolist() if value is not None}))
    keep &= np.isin(values, np.array(classes, dtype=object))
    index = np.flatnonzero(keep)
    where = _in(language)
    if not classes:
        raise ProbeError(f"no utterance{where} has a value of extra.{column.split(':', 1)[1]}")
    if len(index) == 0:
        raise ProbeError(f"no utterances labelled {'/'.join(classes)}{where}")
    position = {name: number for number, name in enumerate(classes)}
    labels = np.array([position[value] for value in values[index].tolist()], dtype=int)
    if not named and len(classes) < 2:
        raise ProbeError(f"every utterance labelled with {column}{where} is {classes[0]}: a probe needs two classes at least")
    absent = [name for value, name in enumerate(classes) if value not in labels]
    if absent:
        raise ProbeError(f"no utterances labelled {absent[0]}{where}: a {task} probe needs both classes")
    speakers = np.array(metadata["speaker"], dtype=object)[index]
    given = np.array(metadata["split"], dtype=object)[index]
    return np.array(ids, dtype=object)[index], labels, speakers, given, classes


def make_splits(
    metadata: dict[str, list],
    ids: list[str],
    task: str = "female-male",
    seed: int = 0,
    language: str | None = None,
    allow_shared_speakers: bool = False,
    dev_needed: bool = True,
) -> ProbeSplits:
    """Splits for ``task`` from store metadata (``ShardReader.metadata()``), seeded. Manifest splits
    sharing a speaker with train raise :class:`ProbeError` unless ``allow_shared_speakers``; the shared
    speakers are then listed in ``ProbeSplits.shared_speakers``. ``dev_needed``: see :func:`_speaker_disjoint`.

    What the fixed split needs, per gender and language: without train/test in the manifest, 3
    speakers (one to test, one for dev, one to train; 2 without ``dev_needed``); with the manifest's
    train and test but no dev, 2 train speakers (1 without ``dev_needed``) and a test speaker.
    """
    all_ids, labels, speakers, given, classes = _labelled(metadata, ids, task, language)
    rng = np.random.default_rng(seed)
    shared = {}
    language_shown = _language_shown(metadata, language)
    if {"train", "test"} <= set(given.tolist()):
        split_of, source = given, "manifest"
        shared = speakers_shared_with_train(split_of, speakers)
        if shared and not allow_shared_speakers:
            raise ProbeError(shared_speakers_message({f"the manifest's {name} split": names for name, names in shared.items()}))
        if "dev" not in set(given.tolist()):
            train_only = split_of == "train"
            scope = f"the manifest's train split{_in(language_shown)} (its dev split is carved from it)"
            carved = _speaker_disjoint(
                labels[train_only], speakers[train_only], rng, classes, test_share=0.0, dev_share=0.1, dev_needed=dev_needed, where=scope
            )
            split_of = split_of.copy()
            split_of[train_only] = np.where(carved == "dev", "dev", "train")
    else:
        scope = f"the speakers{_in(language_shown)} (the manifest gives no train and test split)"
        split_of, source = _speaker_disjoint(labels, speakers, rng, classes, dev_needed=dev_needed, where=scope), "speaker-disjoint"
    parts = {}
    for name in ("train", "dev", "test"):
        members = np.flatnonzero(split_of == name)
        if name != "dev" and (len(members) == 0 or len(set(labels[members].tolist())) < len(classes)):
            given_here = sorted(set((speakers[members]).tolist()))
            raise ProbeError(
                f"the {name} split{_in(language_shown)} lacks one of the classes {'/'.join(classes)} (its speakers: {', '.join(given_here) or 'none'}); "
                f"give {'both genders' if task in TASKS else 'every class'} speakers in the manifest's {name} split, {LOSO_HINT}"
            )
        chosen = _balance(members, labels, speakers, rng) if len(members) else members
        parts[name] = SplitData(all_ids[chosen].tolist(), labels[chosen], speakers[chosen])
    return ProbeSplits(task, parts["train"], parts["dev"], parts["test"], source, shared, classes)


def speaker_stratified_splits(
    metadata: dict[str, list], ids: list[str], task: str = "female-male", seed: int = 0, language: str | None = None, test_share=0.2, dev_share=0.1
) -> ProbeSplits:
    """Attanasio et al. 2024's probe sampling (B.3: "We balanced the samples on gender, stratifying on
    the speaker distribution"): every speaker's utterances are shuffled (seeded) and divided over
    test, dev and train in these shares (rounded per speaker, so a speaker of one utterance is in
    train only), then each split is balanced by gender as :func:`make_splits` balances. The manifest's
    splits are not used (the paper samples from the concatenation of validation and test). Speakers
    are heard in training and scored in test: a probe can read who speaks as well as their gender,
    so F1 is higher than on speaker-disjoint splits. The shared speakers are listed in ``shared_speakers``."""
    all_ids, labels, speakers, _, classes = _labelled(metadata, ids, task, language)
    language = _language_shown(metadata, language)
    rng = np.random.default_rng(seed)
    split_of = np.full(len(all_ids), "train", dtype=object)
    for name in sorted(set(speakers.tolist())):
        members = rng.permutation(np.flatnonzero(speakers == name))
        n_test, n_dev = int(round(test_share * len(members))), int(round(dev_share * len(members)))
        split_of[members[:n_test]] = "test"
        split_of[members[n_test : n_test + n_dev]] = "dev"
    parts = {}
    for name in ("train", "dev", "test"):
        members = np.flatnonzero(split_of == name)
        if name != "dev" and len(set(labels[members].tolist())) < len(classes):
            counts = ", ".join(f"{int(np.sum(labels[members] == c))} {class_name}" for c, class_name in enumerate(classes))
            raise ProbeError(
                f"the speaker-stratified {name} split{_in(language)} lacks one of the classes {'/'.join(classes)} ({counts} utterances of "
                f"{len(all_ids)}; {test_share:.0%} of each speaker's utterances go to test): give each class speakers with several utterances"
            )
        chosen = _balance(members, labels, speakers, rng) if len(members) else members
        parts[name] = SplitData(all_ids[chosen].tolist(), labels[chosen], speakers[chosen])
    # counted on the balanced splits, the ones the probe reads (balancing can drop a speaker's every utterance)
    kept = np.concatenate([parts[name].speakers for name in ("train", "dev", "test")]).astype(object)
    split_names = np.array([name for name in ("train", "dev", "test") for _ in parts[name].speakers], dtype=object)
    return ProbeSplits(task, parts["train"], parts["dev"], parts["test"], "speaker-stratified", speakers_shared_with_train(split_names, kept), classes)


def speaker_disjoint_refusal(metadata: dict[str, list], ids: list[str], task: str, seed: int, language: str | None, dev_needed: bool) -> str | None:
    """Why neither speaker-disjoint split can take ``task`` here (the fixed split's and leave-one-speaker-out's
    refusals, in one line), or None when one of them can: a probe on the stratified split then runs
    only because it shares speakers between train and test."""
    refusals = []
    for name, attempt in (
        ("the fixed split", lambda: make_splits(metadata, ids, task, seed, language, False, dev_needed)),
        ("leave-one-speaker-out", lambda: leave_one_speaker_out(metadata, ids, task, seed, language, dev=dev_needed)),
    ):
        try:
            attempt()
            return None
        except ProbeError as error:
            refusals.append(f"{name}: {error}")
    return "; ".join(refusals)


def _language_shown(metadata: dict[str, list], language: str | None) -> str | None:
    """The language a split's errors name: the one probed, else the store's only language (None when it has several)."""
    present = sorted(set(metadata["language"]))
    return language or (present[0] if len(present) == 1 else None)


def _in(language: str | None) -> str:
    return f" in language {language}" if language else ""


@dataclass
class Fold:
    """One fold of a leave-one-speaker-out run: the held-out speaker, its class, and the splits."""

    speaker: str
    label: int
    splits: ProbeSplits


def leave_one_speaker_out(
    metadata: dict[str, list], ids: list[str], task: str = "female-male", seed: int = 0, language: str | None = None, dev: bool = False
) -> list[Fold]:
    """One :class:`Fold` per speaker of ``task``'s classes, in speaker order: test is every utterance
    of the speaker (one class, not balanced), train every other speaker's (balanced); the manifest's
    splits are not used. With ``dev`` (probes that select on a dev split), one training speaker per
    class, drawn from ``(seed, fold number)``, is held out as a balanced dev split. Each class needs
    two speakers (three with ``dev``), so that every fold trains on both; a speaker labelled with
    both classes is refused (its fold would have no single class to score)."""
    all_ids, labels, speakers, _, class_names = _labelled(metadata, ids, task, language)
    classes = {}
    for name in sorted(set(speakers.tolist())):
        own = set(labels[speakers == name].tolist())
        if len(own) > 1:
            raise ProbeError(
                f"speaker {name} is labelled both {class_names[0]} and {class_names[1]}; leave-one-speaker-out scores one class per speaker: fix the manifest"
            )
        classes[name] = own.pop()
    needed = 3 if dev else 2
    counts = ", ".join(f"{sum(value == label for value in classes.values())} {name}" for label, name in enumerate(class_names))
    language = _language_shown(metadata, language)
    for label, class_name in enumerate(class_names):
        names = [name for name, value in classes.items() if value == label]
        if len(names) < needed:
            raise ProbeError(
                f"leave-one-speaker-out{_in(language)} needs at least {needed} {class_name} speakers (one held out, "
                + ("one for the dev split, " if dev else "")
                + f"one to train on), got {len(names)} ({', '.join(names)}; speakers{_in(language)}: {counts}); "
                + "add speakers, or share them between train and test (split: stratified; --split stratified), which lets a probe read who speaks"
            )
    folds = []
    for number, (name, label) in enumerate(classes.items()):
        rng = np.random.default_rng([seed, number])
        held = speakers == name
        dev_speakers = [str(rng.choice(sorted(n for n, v in classes.items() if v == c and n != name))) for c in range(len(class_names))] if dev else []
        in_dev = np.isin(speakers, dev_speakers) & ~held
        train = np.flatnonzero(~held & ~in_dev)
        parts = {
            "train": _balance(train, labels, speakers, rng),
            "dev": _balance(np.flatnonzero(in_dev), labels, speakers, rng) if dev else np.zeros(0, dtype=int),
            "test": np.flatnonzero(held),
        }
        splits = {part: SplitData(all_ids[chosen].tolist(), labels[chosen], speakers[chosen]) for part, chosen in parts.items()}
        folds.append(Fold(name, label, ProbeSplits(task, splits["train"], splits["dev"], splits["test"], "leave-one-speaker-out", classes=class_names)))
    return folds


def speakers_shared_with_train(split_of: np.ndarray, speakers: np.ndarray) -> dict[str, list[str]]:
    """Speakers of dev and test that also occur in train (only the splits that share any)."""
    train = set(speakers[split_of == "train"].tolist())
    common = {name: sorted(train & set(speakers[split_of == name].tolist())) for name in ("dev", "test")}
    return {name: names for name, names in common.items() if names}


def shared_speakers_message(shared: dict[str, list[str]], shown: int = 10) -> str:
    """One line naming, for each described set of utterances, the speakers it shares with the training split."""
    parts = []
    for what, common in shared.items():
        listed = ", ".join(common[:shown]) + (f", ... ({len(common)} in all)" if len(common) > shown else "")
        parts.append(f"{what} shares {len(common)} speaker(s) with the training split: {listed}")
    return (
        f"{'; '.join(parts)}; a probe scored on voices it was trained on overstates what it generalises: "
        "fix the splits, or pass --allow-shared-speakers (recorded in the row)"
    )


def probe_metadata(config, reader) -> tuple[dict, dict]:
    """The store's metadata for ``config.task`` and what the row records of its labels. A gender task
    reads the store alone (nothing to record). An attribute task reads the attribute from the manifest
    the store was extracted from (``labels``, else the path its config records), refused unless its
    sha256 is the one the store recorded (:func:`extract.attributes.read_attribute`); its values become
    the column :func:`probing.data.attribute_column`, and the row's ``labels`` names the attribute,
    the manifest and how many utterances (of the language probed) have no value and are left out."""
    metadata = reader.metadata()
    attribute = task_attribute(config.task)
    if attribute is None:
        return metadata, {}
    stored = reader.info.config
    manifest = config.labels or stored.get("manifest")
    if not manifest:
        raise ProbeError(f"store {config.store} records no manifest to read the attribute {attribute} from: pass --labels MANIFEST")
    found = _read_attribute(manifest, attribute, stored.get("manifest_sha256"), f"store {config.store}", given=config.labels is not None)
    values = [found.values.get(i) for i in reader.ids]
    probed = [config.language is None or language == config.language for language in metadata["language"]]
    unlabelled = sum(value is None for value, keep in zip(values, probed) if keep)
    return {**metadata, attribute_column(attribute): values}, {"labels": found.record(unlabelled)}


def _read_attribute(manifest, attribute: str, sha256: str | None, where: str, **given) -> object:
    """:func:`extract.attributes.read_attribute`, its refusals as :class:`ProbeError`."""
    try:
        return read_attribute(manifest, attribute, sha256, where, **given)
    except (LabelError, ManifestError) as error:
        raise ProbeError(str(error)) from error


def applied_attribute(config, other) -> tuple[np.ndarray, dict]:
    """The ``apply_to`` store's values of the task's attribute, per utterance in store order (None
    where unlabelled), and what the row records of them (:meth:`extract.attributes.AttributeLabels.record`):
    read from the manifest that store records, refused unless its sha256 is the one recorded there,
    as the probed store's are (:func:`probe_metadata`)."""
    attribute, stored = task_attribute(config.task), other.info.config
    where = f"the apply_to store {config.apply_to}"
    manifest = stored.get("manifest")
    if not manifest or not Path(manifest).is_file():
        if manifest:  # no --labels for this store: where its manifest moved, the command runs from where the store was built
            gone = (
                f"was built from the manifest {manifest}, which is not there: its {attribute} labels cannot be read; "
                "a relative path counts from where that store was built: run from there, or restore that manifest"
            )
        else:
            gone = f"records no manifest: its {attribute} labels cannot be read; rebuild the store from a manifest that holds them"
        raise ProbeError(f"{where} {gone}")
    found = _read_attribute(manifest, attribute, stored.get("manifest_sha256"), where)
    values = np.array([found.values.get(i) for i in other.ids], dtype=object)
    return values, found.record(int(sum(value is None for value in values)))


def pair_tasks(config) -> list[str]:
    """The one-vs-one tasks of an every-class attribute task (``attribute:NAME``): one per pair of the
    classes its utterances have (in ``config.language`` when given), each ``attribute:NAME:A,B`` with
    A before B in sorted order (A the positive class). Fewer than two classes is a :class:`ProbeError`."""
    attribute, (column, named) = task_attribute(config.task), task_labels(config.task)
    if attribute is None or named:
        raise ProbeError(f"pairs are of every class of an attribute (a task attribute:NAME), not of {config.task}")
    from extract.store import ShardReader

    reader = ShardReader(config.store, allow_partial=config.allow_partial)
    metadata, _ = probe_metadata(config, reader)
    probed = [config.language is None or language == config.language for language in metadata["language"]]
    classes = sorted({value for value, keep in zip(metadata[column], probed) if keep and value is not None})
    if len(classes) < 2:
        raise ProbeError(
            f"{config.task} has {len(classes)} class ({', '.join(classes)}) in store {config.store}{_in(config.language)}: pairs need two classes at least"
        )
    try:
        return [attribute_task(attribute, pair) for pair in itertools.combinations(classes, 2)]
    except LabelError as error:
        raise ProbeError(str(error)) from error


def refuse_an_applied_store_without_the_site(config, reader, other) -> None:
    """The ``apply_to`` store must hold the site, as wide as the probed store's (another model's
    states cannot go through this probe): refused before the probe trains."""
    if config.site not in other.sites:
        raise ProbeError(f"the apply_to store {config.apply_to} has no site {config.site!r}; it has {', '.join(other.sites)}")
    if other.dim(config.site) != reader.dim(config.site):
        raise ProbeError(
            f"the apply_to store {config.apply_to}: its {config.site} is {other.dim(config.site)} wide and {config.store}'s is "
            f"{reader.dim(config.site)}: a probe applies to states of the same model's site; give a store extracted by the model probed"
        )


def applied_store_speakers_shared(config, splits: ProbeSplits, other) -> list[str]:
    """Speakers of the ``apply_to`` store (``other``) that the probe was trained on: an error unless allowed."""
    shared = sorted(set(splits.train.speakers.tolist()) & set(other.metadata()["speaker"]))
    if shared and not config.allow_shared_speakers:
        raise ProbeError(shared_speakers_message({f"the apply_to store {config.apply_to}": shared}))
    return shared


def store_identity(*paths: str | Path) -> str:
    """A cheap fingerprint of stores' contents, hashed: each complete part's name, the content checksum
    its writer recorded (``content_sha256``; absent in parts written before it existed), size, inode
    and modification time, store by store (not how a store's path is spelled). Rewriting a part (a
    new file renamed into place) changes it; reading does not."""
    from extract.store import recorded_checksum, store_parts

    entries = []
    for index, path in enumerate(map(Path, paths)):
        for part in [path] if path.is_file() else store_parts(path):
            stat = os.stat(part)
            entries.append([index, part.name, recorded_checksum(part), stat.st_size, stat.st_ino, stat.st_mtime_ns])
    return hashlib.sha1(json.dumps(entries).encode()).hexdigest()[:16]


def config_store_identity(config) -> str:
    """The fingerprint of every store a run reads (``store`` and ``apply_to``)."""
    return store_identity(*[p for p in (config.store, config.apply_to) if p])


def store_subject(reader, language: str | None = None) -> dict:
    """A row's ``subject`` (:mod:`probing.results`), copied from the store. A store written before labels
    existed gets the default label of its family and checkpoint (:func:`extract.provenance.model_label`)."""
    info = reader.info
    config = info.config
    family = info.family or None
    checkpoint = config.get("checkpoint") or info.model_id or None
    metadata = reader.metadata()
    chosen = [i for i, value in enumerate(metadata["language"]) if language is None or value == language]
    return {
        "model": config.get("label") or model_label(family, checkpoint, bool(config.get("random_init"))),
        "family": family,
        "checkpoint": checkpoint,
        "revision": config.get("revision") or info.revision or None,
        "manifest_sha256": config.get("manifest_sha256"),
        "dataset": joined(metadata["dataset"][i] for i in chosen),
        "language": language or joined(metadata["language"]),
    }


def partial_record(reader, applied=None) -> dict:
    """A row's ``partial`` and ``applied_partial`` (:mod:`probing.results`); nothing when the stores are whole."""
    record = {"partial": reader.partial.record()} if reader.partial is not None else {}
    if applied is not None and applied.partial is not None:
        record["applied_partial"] = applied.partial.record()
    return record
