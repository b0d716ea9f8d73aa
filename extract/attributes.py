"""Speaker attributes beyond gender: a manifest's ``extra`` fields as categorical labels per utterance.

A store's metadata and a transcription's rows hold gender, speaker and language only; any other
label a corpus gives (age group, accent, first language, dialect) stays in the manifest's ``extra``.
The labels are read from the manifest an output was built from, and only when its content is the
one the output recorded (``manifest_sha256`` in a store's config or a transcription's settings):
labels corrected after extraction would otherwise be paired with states or transcripts of another
version of the corpus, without a word. An edited manifest is refused in one line; re-extract (or
re-transcribe) from it, or give back the manifest the output was built from.

A value is a string or a whole number (a categorical label, kept as the corpus spells it); an
utterance without the field (or with null or "") has no label and is left out of what uses the
attribute, and counted. Task spellings (:func:`attribute_task`): ``attribute:NAME`` (every class
of the attribute) and ``attribute:NAME:A,B`` (two of its classes, the first the positive one).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from extract.errors import UserError
from extract.manifest import ManifestError, read_keyed_rows
from extract.provenance import file_sha256

ATTRIBUTE_PREFIX = "attribute:"


class LabelError(UserError, ValueError):
    """Attribute labels that cannot be read honestly: a changed manifest, an absent attribute, a bad value."""


@dataclass(frozen=True)
class AttributeLabels:
    """One attribute's labels from ``manifest`` (path as given, and its sha256): utterance id -> value,
    for the utterances that have one."""

    attribute: str
    manifest: str
    sha256: str
    values: dict[str, str]

    def record(self, unlabelled: int) -> dict:
        """What an output records about its labels: the attribute, the manifest read and how many of
        the utterances it used had no value (left out)."""
        return {"attribute": self.attribute, "manifest": self.manifest, "manifest_sha256": self.sha256, "unlabelled": unlabelled}


def check_attribute_name(name: str) -> str:
    """``name`` as an attribute (a key of ``extra``): not empty, no ``:`` or ``,`` (task spellings), no control characters."""
    if not name or any(ch in name for ch in ":,") or _has_control(name):
        raise LabelError(f"attribute {name!r}: name a key of the manifest's extra (not empty, without ':', ',' or control characters)")
    return name


def attribute_task(attribute: str, classes: tuple[str, ...] = ()) -> str:
    """The probe task of ``attribute`` over every class (``classes`` empty) or two named ones, the
    first the positive class: ``attribute:age``, ``attribute:age:young,old``."""
    check_attribute_name(attribute)
    if not classes:
        return f"{ATTRIBUTE_PREFIX}{attribute}"
    if len(classes) != 2 or classes[0] == classes[1] or not all(value.strip() for value in classes):
        named = ", ".join(repr(value) for value in classes) or "none"
        raise LabelError(f"attribute {attribute}: a two-class task names two different, non-empty classes, got {named}")
    for value in classes:
        if "," in value:
            raise LabelError(f"attribute {attribute}: class {value!r} holds a comma and cannot be named in a task; rename it in the manifest")
    return f"{ATTRIBUTE_PREFIX}{attribute}:{','.join(classes)}"


def parse_attribute_task(task: str) -> tuple[str, tuple[str, ...]] | None:
    """``(attribute, classes)`` of an attribute task (classes empty: every class), None for another task."""
    if not task.startswith(ATTRIBUTE_PREFIX):
        return None
    attribute, separator, named = task[len(ATTRIBUTE_PREFIX) :].partition(":")
    classes = tuple(named.split(",")) if separator else ()  # "attribute:age:" names an empty class list: refused
    attribute_task(attribute, classes)  # checks the spelling
    return attribute, classes


PLAIN_NAME = re.compile(r"[A-Za-z0-9.]+")  # an attribute or a value that names a file as it is spelled
FILE_NAME_CHARS = 150  # at most, of a task in a file name (task_file_name): the outputs add up to about 60 more, of 255


def task_file_name(task: str) -> str:
    """A task as part of a file name: a gender task as it is (``other-male``); an attribute task
    ``attribute:NAME[:A,B,...]`` as ``NAME[_A-B-...]`` where the attribute and its values are letters,
    digits and dots, otherwise with every other character spelled ``.`` and ``_`` plus the first 8 hex
    digits of the sha256 of the task (values are free text: ``/``, ``:``, spaces), so that two tasks
    never share a name: a plain name has at most one ``_``, an escaped one ends ``_`` and 8 hex digits.
    A name longer than :data:`FILE_NAME_CHARS` (many groups, long values: a file name may have 255
    bytes, and outputs add the model, corpus and suffix to it) is cut and ends ``__`` and the digest,
    ``__`` being in no other name."""
    if not task.startswith(ATTRIBUTE_PREFIX):
        return task
    attribute, separator, named = task[len(ATTRIBUTE_PREFIX) :].partition(":")
    names = [attribute, *(named.split(",") if separator else ())]
    digest = hashlib.sha256(task.encode()).hexdigest()[:8]
    if all(PLAIN_NAME.fullmatch(name) for name in names):
        name = "_".join(filter(None, (names[0], "-".join(names[1:]))))
    else:
        plain = [re.sub(r"[^A-Za-z0-9.]", ".", name) for name in names]
        name = "_".join(filter(None, (plain[0], "-".join(plain[1:]), digest)))
    if len(name) <= FILE_NAME_CHARS:
        return name
    return name[: FILE_NAME_CHARS - len(digest) - 2].rstrip("_-") + "__" + digest


def read_attribute(manifest: str | Path, attribute: str, recorded_sha256: str | None, built: str, given: bool = False) -> AttributeLabels:
    """``attribute``'s labels from ``manifest``, whose content must be the one ``built`` (what the
    output is, for messages) recorded as ``recorded_sha256``; ``given``: the user named ``manifest``
    (``--labels``), where it is otherwise the one ``built`` records. Refused in one line: a manifest that
    is missing or changed, an output that recorded no sha256, an attribute no utterance has (the
    attributes found are listed), a value that is not a string or whole number, or that holds a
    control character (a line and a column of a table must stay one).

    A grid reads one manifest once per run: the labels read are kept for the process, keyed by the
    file's resolved path, size, inode and modification time (the fingerprint a store's identity
    uses, :func:`probing.data.store_identity`), so a rewritten manifest is read and checked again.
    Measured: 2.2 s per read of a 100 000-line manifest (23 MB) on a loaded 2-core machine."""
    check_attribute_name(attribute)
    path = Path(manifest)
    if not path.is_file():
        if given:
            raise LabelError(f"--labels {path}: not a file; give the manifest {built} was built from")
        raise LabelError(
            f"{built} was built from the manifest {path}, which is not there (a relative path counts from where it was built); pass --labels MANIFEST"
        )
    if recorded_sha256 is None:
        raise LabelError(f"{built} records no manifest sha256, so its labels cannot be checked against {path}: rebuild it with this version")
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_ino, stat.st_mtime_ns, attribute)
    if key not in _READ:
        _READ.clear()  # one manifest at a time is what a grid reads
        _READ[key] = _read(path, attribute)
    sha256, values = _READ[key]
    if sha256 != recorded_sha256 and given:
        raise LabelError(
            f"--labels {path} is not the manifest {built} was built from (sha256 {sha256[:12]}, recorded {recorded_sha256[:12]}): "
            "give that manifest, or rebuild from this one"
        )
    if sha256 != recorded_sha256:
        raise LabelError(
            f"{path} changed since {built} was built from it (sha256 {sha256[:12]}, recorded {recorded_sha256[:12]}): "
            "its labels may no longer match; rebuild from the manifest as it is, or restore the one it was built from"
        )
    return AttributeLabels(attribute, str(manifest), sha256, values)


_READ: dict[tuple, tuple[str, dict[str, str]]] = {}  # the last manifest read: (sha256, labels) by its fingerprint and attribute


def _read(path: Path, attribute: str) -> tuple[str, dict[str, str]]:
    """The sha256 of ``path`` and ``attribute``'s value per utterance id (see :func:`read_attribute`)."""
    sha256 = file_sha256(path)
    values, found = {}, set()
    for line, row in read_keyed_rows(path, what="utterance"):
        extra = row.get("extra") or {}
        if not isinstance(extra, dict):
            raise ManifestError(path, line, f"extra must be an object, got {type(extra).__name__}")
        found |= set(extra)
        try:
            value = attribute_value(extra, attribute)
        except ValueError as error:
            raise ManifestError(path, line, str(error)) from error
        if value is not None:
            values[row["id"]] = value
    if not values:
        listed = ", ".join(sorted(found)) or "none"
        raise LabelError(
            f"no utterance of {path} has extra.{attribute}; the attributes its utterances have: {listed}{own_label_hint(attribute, 'leave out --attribute')}"
        )
    return sha256, values


def own_label_hint(attribute: str, fix: str) -> str:
    """What to say where ``attribute`` is gender, which a manifest gives each utterance beside ``extra``
    (the default task of the probes and gaps): an attribute named gender would read ``extra.gender``."""
    return f"; gender is each utterance's own label, not extra's: {fix}" if attribute == "gender" else ""


def attribute_value(extra: dict, attribute: str) -> str | None:
    """``extra[attribute]`` as a label (a whole number spelled as a string), None where it is absent,
    null, "" or only white space; a ValueError for a value that cannot be a categorical label (a
    fraction, a boolean, a list or object, a string holding a control character)."""
    value = extra.get(attribute)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"extra.{attribute} is {value!r}: an attribute is a categorical label, a string or a whole number")
    if _has_control(str(value)):
        raise ValueError(f"extra.{attribute} is {value!r}, which holds a control character")
    return str(value)


def _has_control(text: str) -> bool:
    return any(unicodedata.category(ch).startswith("C") for ch in text)
