"""What a probe run reads of its stores besides their states: the labels of its task (an attribute
from the manifest), the identity and subject a row records, and the checks on an ``apply_to`` store."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from pathlib import Path

import numpy as np

from extract.attributes import LabelError, attribute_task, read_attribute
from extract.provenance import joined, model_label
from probing.data import ProbeError, ProbeSplits, attribute_column, shared_speakers_message, task_attribute, task_labels


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
    from extract.manifest import ManifestError

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


def partial_record(reader, applied=None) -> dict:
    """A row's ``partial`` (``{used, expected}`` utterances) when its store was read incomplete on
    purpose (``allow_partial``), and ``applied_partial`` for its ``apply_to`` store; nothing when whole."""
    record = {"partial": reader.partial.record()} if reader.partial is not None else {}
    if applied is not None and applied.partial is not None:
        record["applied_partial"] = applied.partial.record()
    return record


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
        where = f"store {config.store}" + (f" in language {config.language}" if config.language else "")
        raise ProbeError(f"{config.task} has {len(classes)} class ({', '.join(classes)}) in {where}: pairs need two classes at least")
    try:
        return [attribute_task(attribute, pair) for pair in itertools.combinations(classes, 2)]
    except LabelError as error:
        raise ProbeError(str(error)) from error


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


def store_subject(reader, language: str | None = None) -> dict:
    """What a store's probe rows are about, copied from the store: ``model`` (its label), ``family``,
    ``checkpoint``, ``revision``, ``manifest_sha256``, and the ``dataset`` and ``language`` of the
    utterances probed (``language``: the probe's language filter, else the store's languages; several
    values joined with ``+``). A store written before labels existed gets the default label of its
    family and checkpoint (:func:`extract.provenance.model_label`)."""
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


def config_store_identity(config) -> str:
    """The fingerprint of every store a run reads (``store`` and ``apply_to``)."""
    return store_identity(*[p for p in (config.store, config.apply_to) if p])
