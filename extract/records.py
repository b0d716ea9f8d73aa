"""Typed result records: each format the package writes as a dataclass with ``to_dict`` /
``from_dict``, its version, and one reader and one writer per format (lhotse's
``serialization.py`` is the model).

Every JSON or JSONL result carries its format version in ``schema``. A file without it was written
before versions existed and reads as version 1, exactly as it did then; a version newer than this
code reads is refused in one line (:class:`RecordError`), never half-read. The versions live in
:data:`FORMATS`, which is the one place to raise one; the ``*_SCHEMA`` names of the scoring modules
(``GAP_SCHEMA``, ``ROW_SCHEMA``, ...) are kept for scripts that import them and read from here.

The records live in ``extract`` beside :mod:`extract.provenance` because every stage writes one and
data only moves forward: the probe row is written by :mod:`probing.run`, the behaviour documents
by :mod:`experiments` (the collected tables' rows, which only ``experiments`` reads and writes, are
:mod:`experiments.results.records`). A record types the header every output shares and the
keys its readers join on; the rest of a document (a gap report's per-language entries, a row's
scores) is kept as the file holds it, in its order, so ``from_dict(d).to_dict() == d`` for a
current file and nothing a newer writer added is lost on the way through.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, TypeVar

from extract.errors import UserError


class RecordError(UserError, ValueError):
    """A result file this code cannot read as its format: a newer version, a malformed header."""


@dataclass(frozen=True)
class Format:
    """One output format: the ``kind`` its documents record (a row format's name for JSONL rows),
    the newest ``version`` this code writes and reads, how messages name it and what writes it."""

    name: str
    version: int
    what: str
    written_by: str


FORMATS: dict[str, Format] = {
    fmt.name: fmt
    for fmt in (
        Format("probe_row", 1, "probe row", "python -m experiments.probe"),
        Format("asr_gap", 1, "gap report", "python -m experiments.asr_gap"),
        Format("mustshe", 1, "MuST-SHE result", "python -m experiments.mustshe"),
        Format("st_quality", 1, "translation-quality result", "python -m experiments.st_quality"),
        Format("winomt", 1, "WinoMT result", "python -m experiments.winomt"),
        Format("feature_gaps", 1, "feature-gaps result", "python -m experiments.feature_gaps"),
        Format("patch_summary", 2, "patch summary", "python -m experiments.patch"),  # 2: the graded metric is the effect; metrics, matching, two-way interval
        Format("collect", 1, "collect summary", "python -m experiments.collect"),
        Format("study_tables", 1, "study correlations or figures list", "python -m experiments.study"),
    )
}
FIRST_VERSION = 1  # what a file without ``schema`` is: written before the key existed


def schema_version(name: str) -> int:
    """The version of format ``name`` this code writes."""
    return FORMATS[name].version


def read_version(document: dict, name: str, where: str) -> int:
    """The format version ``document`` records in ``schema`` (:data:`FIRST_VERSION` without it);
    a version that is not a positive whole number, or newer than this code reads, is a
    :class:`RecordError` naming ``where``."""
    fmt = FORMATS[name]
    version = document.get("schema", FIRST_VERSION)
    if isinstance(version, bool) or not isinstance(version, int) or version < FIRST_VERSION:
        raise RecordError(f"{where}: a {fmt.what} whose schema is {version!r}, not a version number; move the file aside or rerun {fmt.written_by}")
    if version > fmt.version:
        raise RecordError(f"{where}: a {fmt.what} of schema {version}, newer than this code reads ({fmt.version}); update the package")
    return version


@dataclass
class ProbeRow:
    """One probe run's row of a results JSONL (:mod:`probing.results` describes every key).

    The header is typed; ``rest`` holds every other key in the row's order: ``shared_speakers``
    where there is one, the scores (``f1_macro``, ``f1_s``, ``applied_*``, control and MDL keys,
    ``folds``) and the code's provenance. Rows written before a header key existed lack it (None
    here, and left out of :meth:`to_dict`)."""

    FORMAT: ClassVar[str] = "probe_row"
    HEADER: ClassVar[tuple[str, ...]] = ("schema", "run_id", "store_identity", "subject", "site_index", "config", "seed", "splits")

    run_id: str
    config: dict
    schema: int = FIRST_VERSION
    store_identity: str | None = None
    subject: dict | None = None
    site_index: int | None = None
    seed: int | None = None
    splits: dict | None = None
    rest: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        header = {name: getattr(self, name) for name in self.HEADER}
        return {name: value for name, value in header.items() if value is not None} | self.rest

    @classmethod
    def from_dict(cls, row: dict, where: str = "a probe row") -> ProbeRow:
        """The record of ``row``; a row without ``run_id`` or ``config`` is a :class:`RecordError`."""
        if not isinstance(row, dict) or "run_id" not in row:
            raise RecordError(f"{where}: not a probe row (no 'run_id')")
        version = read_version(row, cls.FORMAT, where)
        header = {name: row[name] for name in cls.HEADER if name in row and name != "schema"}
        return cls(**header | {"schema": version, "config": row.get("config")}, rest={k: v for k, v in row.items() if k not in cls.HEADER})

    @property
    def probe(self) -> str:
        return self.config["probe"]

    @property
    def scores(self) -> dict:
        """The row's keys after its header (its scores among them)."""
        return self.rest


@dataclass
class Document:
    """A behaviour result (one JSON document): the header every output records
    (:func:`extract.provenance.identified`: ``schema``, ``subject``, ``inputs``, ``provenance``,
    ``kind``) and ``body``, the rest in the file's order. A document written before it recorded its
    kind, inputs or provenance has None there (and they are left out of :meth:`to_dict`)."""

    FORMAT: ClassVar[str] = ""  # a subclass's format name (its documents' ``kind``)
    HEADER: ClassVar[tuple[str, ...]] = ("schema", "subject", "inputs", "provenance", "kind")

    subject: dict | None
    body: dict = field(default_factory=dict)
    schema: int = FIRST_VERSION
    inputs: list | None = None
    provenance: dict | None = None
    kind: str | None = None

    def to_dict(self) -> dict:
        header = {name: getattr(self, name) for name in self.HEADER}
        return {name: value for name, value in header.items() if value is not None} | self.body

    @classmethod
    def from_dict(cls, document: dict, where: str = "a document") -> Document:
        """The record of ``document``; a recorded ``kind`` other than this class's format is a
        :class:`RecordError` (a document written before it recorded its kind is taken as asked)."""
        fmt = FORMATS[cls.FORMAT]
        if not isinstance(document, dict):
            raise RecordError(f"{where}: not a {fmt.what} (a JSON {type(document).__name__}, not an object)")
        recorded = document.get("kind")
        if recorded is not None and recorded != cls.FORMAT:
            raise RecordError(f"{where}: a {recorded} result, not a {fmt.what}")
        version = read_version(document, cls.FORMAT, where)
        header = {name: document.get(name) for name in cls.HEADER if name != "schema"}
        return cls(**header, schema=version, body={k: v for k, v in document.items() if k not in cls.HEADER})

    @classmethod
    def new(cls, body: dict, subject: dict, inputs: list[dict], provenance: dict) -> Document:
        """A document of this format as this code writes it: the current version, its kind recorded."""
        return cls(subject=subject, body=body, schema=schema_version(cls.FORMAT), inputs=inputs, provenance=provenance, kind=cls.FORMAT)


D = TypeVar("D", bound=Document)


def read_document(path: str | Path, record: type[D]) -> D:
    """The document at ``path`` as ``record``: a file that is not readable JSON, a newer version or
    another kind is a :class:`RecordError` naming the file."""
    fmt = FORMATS[record.FORMAT]
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise RecordError(f"{path}: not a readable {fmt.what} ({type(error).__name__}: {error})") from None
    return record.from_dict(document, str(path))


def read_versioned(path: str | Path, name: str) -> dict:
    """A JSON object of format ``name`` that has no record of its own (``collect.json``, the study's
    ``correlations.json`` and ``figures.json``), its version checked (:func:`read_version`)."""
    fmt = FORMATS[name]
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise RecordError(f"{path}: not a readable {fmt.what} ({type(error).__name__}: {error})") from None
    if not isinstance(document, dict):
        raise RecordError(f"{path}: not a {fmt.what} (a JSON {type(document).__name__}, not an object)")
    read_version(document, name, str(path))
    return document


def write_document(document: Document, path: str | Path) -> Path:
    """``document`` as JSON at ``path``: indented, UTF-8 with non-ASCII characters as they are, one
    final newline. A writer whose numbers may be undefined turns them into null first, as
    :func:`experiments.scoring.gaps.finite_or_null` does (JSON has no NaN; Python's reader takes
    the ``NaN`` it would otherwise write)."""
    path = Path(path)
    path.write_text(json.dumps(document.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def write_side_rows(rows: Iterable[dict], path: str | Path) -> Path:
    """The rows a document keeps beside it (a gap report's ``OUT.counts.jsonl``, a MuST-SHE or
    WinoMT result's ``OUT.sentences.jsonl``) as JSONL: one object a line, UTF-8 with non-ASCII
    characters as they are. Their format is their document's and so is its version."""
    path = Path(path)
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


def read_side_rows(path: str | Path, record: type[Document]) -> list[dict]:
    """The rows :func:`write_side_rows` wrote beside a document of ``record``'s format; a line that
    is not a JSON object is a :class:`RecordError` naming ``file:line``."""
    fmt = FORMATS[record.FORMAT]
    rows = []
    for number, line in iter_row_lines(path):
        try:
            row = json.loads(line)
        except ValueError as error:
            raise RecordError(f"{path}:{number}: not a row of a {fmt.what} ({error}); rerun {fmt.written_by}") from None
        if not isinstance(row, dict):
            raise RecordError(f"{path}:{number}: not a row of a {fmt.what} (a JSON {type(row).__name__}, not an object); rerun {fmt.written_by}")
        rows.append(row)
    return rows


def iter_row_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of each non-blank line of a JSONL file; a line that is not UTF-8 is a
    :class:`RecordError` naming ``file:line``."""
    with Path(path).open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise RecordError(f"{path}:{number}: not UTF-8 ({error.reason} at byte {error.start}); move the file aside or fix that line") from None
            if line.strip():
                yield number, line
