"""Utterance manifests: one record type, JSONL on disk.

The JSONL keys are a contract shared by every stage: ``id``, ``audio`` (path), ``offset`` and
``duration`` (seconds, optional), ``language``, ``text``, ``translation`` (optional), ``gender``,
``speaker``, ``split``, ``dataset``, ``extra`` (an object).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

GENDERS = ("female", "male", "other", "unknown")

# Values seen in the wild, lower-cased, mapped to the four labels above.
_GENDER_ALIASES = {
    "female": "female", "f": "female", "woman": "female", "women": "female", "she": "female",
    "female_feminine": "female", "feminine": "female",
    "male": "male", "m": "male", "man": "male", "men": "male", "he": "male",
    "male_masculine": "male", "masculine": "male",
    "other": "other", "non-binary": "other", "nonbinary": "other", "non_binary": "other", "they": "other",
    "transgender": "other", "intersex": "other", "do_not_wish_to_say": "unknown",
    "unknown": "unknown", "": "unknown", "na": "unknown", "n/a": "unknown", "none": "unknown", "nan": "unknown",
}
SPLITS = ("train", "dev", "test")
_SPLIT_ALIASES = {"train": "train", "dev": "dev", "validation": "dev", "valid": "dev", "test": "test", "": ""}
_OPTIONAL_KEYS = {"offset", "duration", "translation", "extra", "split", "dataset"}
_REQUIRED_KEYS = ("id", "audio", "language", "text", "gender", "speaker")


class ManifestError(ValueError):
    """A manifest or native corpus file has a bad row; the message names the file and line."""

    def __init__(self, source: str | Path, line: int | None, problem: str):
        where = f"{source}:{line}" if line is not None else str(source)
        super().__init__(f"{where}: {problem}")
        self.source, self.line, self.problem = str(source), line, problem


def normalize_gender(value: object) -> str:
    """Map a dataset's gender value (``male_masculine``, ``She``, ``F`` ...) to female/male/other/unknown."""
    key = "" if value is None else str(value).strip().lower()
    if key in _GENDER_ALIASES:
        return _GENDER_ALIASES[key]
    if key.startswith("female") or key.startswith("woman"):
        return "female"
    if key.startswith("male") or key.startswith("man"):
        return "male"
    raise ValueError(f"unrecognised gender value {value!r}; expected one of {GENDERS} or a known alias")


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


def iter_json_objects(path: str | Path) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` for each non-blank line of a JSONL file; a line that is not a JSON
    object raises :class:`ManifestError` naming the file and line."""
    path = Path(path)
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ManifestError(path, number, f"invalid JSON: {error}") from error
            if not isinstance(record, dict):
                raise ManifestError(path, number, f"expected a JSON object, got {type(record).__name__}")
            yield number, record


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
    """Read and validate a JSONL manifest; any bad line raises :class:`ManifestError` with its number.

    Relative audio paths are taken relative to the manifest's folder and returned absolute.
    """
    path = Path(path)
    records, seen = [], {}
    for number, record in iter_json_objects(path):
        try:
            utterance = utterance_from_json(record)
        except (ValueError, TypeError) as error:
            raise ManifestError(path, number, str(error)) from error
        if utterance.id in seen:
            raise ManifestError(path, number, f"duplicate id {utterance.id!r} (first on line {seen[utterance.id]})")
        seen[utterance.id] = number
        utterance.audio = str(path.parent / utterance.audio) if not Path(utterance.audio).is_absolute() else utterance.audio
        records.append(utterance)
    return records


def write_manifest(path: str | Path, utterances: Iterable[Utterance]) -> Path:
    """Write utterances as JSONL through a temporary file, so a reader never sees half a manifest."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    seen = set()
    with temporary.open("w", encoding="utf-8") as handle:
        for utterance in utterances:
            if utterance.id in seen:
                temporary.unlink()
                raise ValueError(f"duplicate id {utterance.id!r} while writing {path}")
            seen.add(utterance.id)
            handle.write(json.dumps(utterance.to_json(), ensure_ascii=False) + "\n")
    temporary.replace(path)
    return path


def iter_manifest(paths: Iterable[str | Path]) -> Iterator[Utterance]:
    for path in paths:
        yield from read_manifest(path)
