"""Utterance manifests: one record type, JSONL on disk.

The JSONL keys are a contract shared by every stage: ``id``, ``audio`` (path), ``offset`` and
``duration`` (seconds, optional), ``language``, ``text``, ``translation`` (optional), ``gender``,
``speaker``, ``split``, ``dataset``, ``extra`` (an object).
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from extract.diskfull import write_whole
from extract.errors import UserError

GENDERS = ("female", "male", "other", "unknown")

# The whole mapping, lower-cased: a value not listed here is not guessed at (no prefix rules:
# "manly woman" or "male-to-female" must not become "male"). docs/concepts.md (Manifests) prints this table.
GENDER_ALIASES = {
    "female": "female",
    "f": "female",
    "woman": "female",
    "women": "female",
    "she": "female",
    "female_feminine": "female",
    "feminine": "female",
    "male": "male",
    "m": "male",
    "man": "male",
    "men": "male",
    "he": "male",
    "male_masculine": "male",
    "masculine": "male",
    "other": "other",
    "non-binary": "other",
    "nonbinary": "other",
    "non_binary": "other",
    "they": "other",
    "transgender": "other",
    "intersex": "other",
    "unknown": "unknown",
    "": "unknown",
    "na": "unknown",
    "n/a": "unknown",
    "none": "unknown",
    "nan": "unknown",
    "do_not_wish_to_say": "unknown",
}
SPLITS = ("train", "dev", "test")
_SPLIT_ALIASES = {"train": "train", "dev": "dev", "validation": "dev", "valid": "dev", "test": "test", "": ""}
_OPTIONAL_KEYS = {"offset", "duration", "translation", "extra", "split", "dataset"}
_REQUIRED_KEYS = ("id", "audio", "language", "text", "gender", "speaker")
# the fields stored as strings beside the hidden states and named in one-line messages: HDF5
# strings cannot hold a NUL, and a newline or tab would split a message or a table row
_PRINTABLE_FIELDS = ("id", "speaker", "language", "dataset")


class ManifestError(UserError, ValueError):
    """A manifest or native corpus file has a bad row; the message names the file and line."""

    def __init__(self, source: str | Path, line: int | None, problem: str):
        where = f"{source}:{line}" if line is not None else str(source)
        super().__init__(f"{where}: {problem}")
        self.source, self.line, self.problem = str(source), line, problem


def gender_label(value: object) -> str | None:
    """The label of a dataset's gender value (``male_masculine``, ``She``, ``F`` ...) from
    :data:`GENDER_ALIASES`, or None when the value is not in the table."""
    key = "" if value is None else str(value).strip().lower()
    return GENDER_ALIASES.get(key)


def normalize_gender(value: object) -> str:
    """:func:`gender_label`, strict: a value not in the table raises ValueError. Manifests and
    hypothesis rows use it; the corpus adapters map unrecognised values to ``unknown`` and count them."""
    label = gender_label(value)
    if label is None:
        raise ValueError(f"unrecognised gender value {value!r}; expected one of {GENDERS} or an alias listed in docs/concepts.md (Manifests)")
    return label


def normalize_split(value: object) -> str:
    key = "" if value is None else str(value).strip().lower()
    if key not in _SPLIT_ALIASES:
        raise ValueError(f"unrecognised split {value!r}; expected train, dev (validation) or test")
    return _SPLIT_ALIASES[key]


@dataclass
class Utterance:
    id: str
    audio: str
    language: str
    text: str
    gender: str
    speaker: str
    split: str = ""
    dataset: str = ""
    offset: float | None = None
    duration: float | None = None
    translation: str | list[str] | None = None
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        if not self.id:
            raise ValueError("empty id")
        for name in _PRINTABLE_FIELDS:
            _refuse_control_characters(name, getattr(self, name))
        if not self.audio:
            raise ValueError("empty audio path")
        if not self.language:
            raise ValueError("empty language")
        if not self.speaker:
            raise ValueError("empty speaker")
        self.gender = normalize_gender(self.gender)
        self.split = normalize_split(self.split)
        for name in ("offset", "duration"):
            value = getattr(self, name)
            if value is not None:
                value = float(value)
                if not value >= 0 or value == float("inf"):
                    raise ValueError(f"{name} must be a finite number >= 0, got {value}")
                setattr(self, name, value)
        if self.duration == 0:
            raise ValueError("duration is 0 seconds")
        if not isinstance(self.extra, dict):
            raise ValueError(f"extra must be an object, got {type(self.extra).__name__}")
        if isinstance(self.translation, list) and not all(isinstance(t, str) for t in self.translation):
            raise ValueError("translation must be a string or a list of strings")

    def to_json(self) -> dict:
        record = asdict(self)
        for key in ("offset", "duration", "translation"):
            if record[key] is None:
                del record[key]
        return record


def _refuse_control_characters(name: str, value: object) -> None:
    """ValueError naming the first control character (Unicode category Cc: NUL, tab, newline, DEL ...) in ``value``."""
    if not isinstance(value, str):
        return
    for position, character in enumerate(value, start=1):
        if unicodedata.category(character) == "Cc":
            raise ValueError(f"{name} {value!r} holds a control character (U+{ord(character):04X} at position {position}); use printable text")


def iter_text_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """``(line number, line with its ending)`` of a UTF-8 text file, streamed; a UTF-8 byte-order
    mark is dropped. A missing file, a folder and bytes that are not UTF-8 raise :class:`ManifestError`."""
    path = Path(path)
    if path.is_dir():
        raise ManifestError(path, None, "is a directory; give the path of a file")
    if not path.exists():
        raise ManifestError(path, None, "no such file")
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ManifestError(
                    path, number, f"not UTF-8 (byte 0x{raw[error.start]:02x} at position {error.start + 1}); re-encode the file as UTF-8"
                ) from None
            yield number, line.removeprefix("\ufeff") if number == 1 else line


def iter_json_objects(path: str | Path) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` for each non-blank line of a JSONL file; a line that is not a JSON
    object raises :class:`ManifestError` naming the file and line."""
    path = Path(path)
    for number, line in iter_text_lines(path):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise ManifestError(path, number, f"invalid JSON: {error}") from error
        if not isinstance(record, dict):
            raise ManifestError(path, number, f"expected a JSON object, got {type(record).__name__}")
        yield number, record


def _describe(value: object) -> str:
    return "null" if value is None else f"{type(value).__name__} {value!r}"


def read_keyed_rows(
    path: str | Path, key: str = "id", required: Iterable[str] = (), strings: Iterable[str] = (), what: str = "row", genders: bool = False
) -> list[tuple[int, dict]]:
    """The id-keyed JSONL reader every scorer uses: ``(line number, object)`` in file order.

    Refused, naming the file and line: a row without ``key`` or a ``required`` key, a ``key`` that
    is not a non-empty string, a ``strings`` value that is not a string (a numeric or null
    hypothesis), an id seen before (both lines named: a duplicate would be counted twice or
    overwrite the first), and a file with no rows at all. With ``genders``, each row's ``gender`` is
    mapped to its label (:func:`normalize_gender`); an unrecognised value is refused the same way.
    """
    path = Path(path)
    required, strings = (key, *required), (key, *strings)
    rows, first_line = [], {}
    for number, record in iter_json_objects(path):
        missing = [name for name in dict.fromkeys(required) if name not in record]
        if missing:
            raise ManifestError(path, number, f"missing key(s) {', '.join(missing)}")
        for name in dict.fromkeys(strings):
            if name in record and not isinstance(record[name], str):
                raise ManifestError(path, number, f"{name} must be a string, got {_describe(record[name])}")
        identifier = record[key]
        if not identifier:
            raise ManifestError(path, number, f"empty {key}")
        if identifier in first_line:
            raise ManifestError(path, number, f"duplicate {key} {identifier!r}, first on {path}:{first_line[identifier]}; keep one row per {key}")
        first_line[identifier] = number
        if genders:
            try:
                record["gender"] = normalize_gender(record["gender"])
            except ValueError as error:
                raise ManifestError(path, number, str(error)) from error
        rows.append((number, record))
    if not rows:
        raise ManifestError(path, None, f"holds no {what}s (empty file); check the path or rerun what writes it")
    return rows


def align_by_id(rows: list[tuple[int, dict]], ids: list[str], path: str | Path, key: str = "id") -> tuple[list[dict], list[str]]:
    """``rows`` (from :func:`read_keyed_rows`) put in the order of ``ids``, and the ids of rows
    that ``ids`` lacks, in file order. An id of ``ids`` with no row is an error naming how many and a few."""
    by_id = {record[key]: record for _, record in rows}
    absent = [identifier for identifier in ids if identifier not in by_id]
    if absent:
        raise ManifestError(path, None, f"no row for {len(absent)} of {len(ids)} expected {key}(s), e.g. {absent[:3]}")
    wanted = set(ids)
    return [by_id[identifier] for identifier in ids], [record[key] for _, record in rows if record[key] not in wanted]


def utterance_from_json(record: object) -> Utterance:
    if not isinstance(record, dict):
        raise ValueError(f"expected a JSON object, got {type(record).__name__}")
    missing = [key for key in _REQUIRED_KEYS if key not in record]
    if missing:
        raise ValueError(f"missing key(s) {', '.join(missing)}")
    unknown = set(record) - set(_REQUIRED_KEYS) - _OPTIONAL_KEYS
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(sorted(unknown))}; put free-form fields under 'extra'")
    for key in ("id", "audio", "language", "text", "speaker"):
        if not isinstance(record[key], str):
            raise ValueError(f"{key} must be a string, got {type(record[key]).__name__}")
    return Utterance(**record)


def read_manifest(path: str | Path) -> list[Utterance]:
    """Read and validate a JSONL manifest; any bad line raises :class:`ManifestError` with its number,
    as do a duplicate id (both lines named) and a manifest without utterances.

    Relative audio paths are taken relative to the manifest's folder and returned absolute.
    """
    path = Path(path)
    records = []
    for number, record in read_keyed_rows(path, what="utterance"):
        try:
            utterance = utterance_from_json(record)
        except (ValueError, TypeError) as error:
            raise ManifestError(path, number, str(error)) from error
        utterance.audio = str(path.parent / utterance.audio) if not Path(utterance.audio).is_absolute() else utterance.audio
        records.append(utterance)
    return records


def write_manifest(path: str | Path, utterances: Iterable[Utterance]) -> Path:
    """Write utterances as JSONL through a temporary file, so a reader never sees half a manifest."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)

    def write(temporary: Path) -> None:
        seen = set()
        with temporary.open("w", encoding="utf-8") as handle:
            for utterance in utterances:
                if utterance.id in seen:
                    raise ValueError(f"duplicate id {utterance.id!r} while writing {path}")
                seen.add(utterance.id)
                handle.write(json.dumps(utterance.to_json(), ensure_ascii=False) + "\n")

    return write_whole(path, write)


def iter_manifest(paths: Iterable[str | Path]) -> Iterator[Utterance]:
    for path in paths:
        yield from read_manifest(path)
