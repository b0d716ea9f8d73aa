"""What every output records about itself: the code's provenance (package version and git commit),
its inputs' identities (path and sha256), and its subject (the model label, dataset and languages).

Joins between outputs (``experiments.collect``) use these names, never how a path is spelled.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import unicodedata
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path, PurePath

from extract import __version__
from extract.paths import source_checkout


@lru_cache(maxsize=1)
def git_commit() -> str:
    """The checkout's HEAD, with ``-dirty`` when tracked files changed; ``unknown`` for an installed
    package or a source tree outside git (the package version then identifies the code)."""
    checkout = source_checkout()
    if checkout is None:
        return "unknown"
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=checkout, capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=checkout, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("-dirty" if dirty else "")


def provenance() -> dict[str, str]:
    return {"package_version": __version__, "git_commit": git_commit()}


def file_sha256(path: str | Path) -> str:
    """The sha256 of a file's bytes (read in blocks): its identity whatever its path is spelled."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_identity(path: str | Path) -> dict[str, str]:
    """An input as every output records it: the path as given and the sha256 of its content."""
    return {"path": str(path), "sha256": file_sha256(path)}


FORMULA_STARTS = ("=", "+", "-", "@")  # a spreadsheet reads a cell beginning with one of these as a formula


def label_problem(label: str) -> str | None:
    """Why ``label`` cannot be a model label, or None. The label is the join key of collect's tables
    and a cell of every CSV and RESULTS.md table: a control character (a newline) would break a
    table row, and a first character that a spreadsheet reads as a formula (``=HYPERLINK(...)``)
    would run when the CSV is opened."""
    if label.startswith(FORMULA_STARTS):
        return f"{label!r} begins with {label[0]!r}, which a spreadsheet reads as a formula; begin the label with a letter or digit"
    for position, character in enumerate(label):
        if unicodedata.category(character) == "Cc":
            return f"{label!r} holds a control character (U+{ord(character):04X} at position {position}); use printable text"
    return None


def label_argument(value: str) -> str:
    """``--label`` as an argparse type (:func:`label_problem`); an empty label means the default one."""
    problem = label_problem(value)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return value


def model_label(family: str | None, checkpoint: str | None, random_init: bool = False) -> str:
    """The default model label: the checkpoint's last path component without ``bundled-``, prefixed
    with the family when it does not already name it, with ``-random`` for random weights
    (``whisper`` + ``bundled-base`` -> ``whisper-base``; ``openai/whisper-large-v3`` ->
    ``whisper-large-v3``; random init -> ``whisper-base-random``)."""
    name = PurePath(str(checkpoint or "").rstrip("/\\")).name.removeprefix("bundled-")
    if family and family.lower() not in name.lower():
        name = f"{family}-{name}" if name else family
    return (name or "model") + ("-random" if random_init else "")


def joined(values: Iterable[str | None]) -> str | None:
    """Distinct non-empty values, sorted and joined with ``+`` (``en+es``); None when there are none."""
    distinct = sorted({str(value) for value in values if value})
    return "+".join(distinct) if distinct else None


def settings_path(hypotheses: str | Path) -> Path:
    """``OUT.settings.json``: where a transcription records its settings beside its rows ``OUT``."""
    path = Path(hypotheses)
    return path.with_name(path.name + ".settings.json")


SUBJECT_SETTINGS = ("family", "checkpoint", "revision", "manifest_sha256")  # copied from a transcription's settings file


def hypotheses_subject(rows: Iterable[dict], hypotheses: str | Path | None = None) -> dict:
    """What transcription rows are about: ``model`` (their label), ``dataset``, ``languages`` and, for
    translations, ``tgt_langs``; with the rows' file, the family, checkpoint, revision and manifest
    sha256 its ``OUT.settings.json`` recorded (None where unknown). Several values of one key are
    joined with ``+``, so they never match a single model's or dataset's name."""
    rows = list(rows)
    subject = {
        "model": joined(row.get("model") for row in rows),
        "dataset": joined(row.get("dataset") for row in rows),
        "languages": sorted({row["language"] for row in rows if row.get("language")}),
    }
    if any(row.get("task") == "st" for row in rows):
        subject["tgt_langs"] = sorted({row["tgt_lang"] for row in rows if row.get("tgt_lang")})
    settings = read_settings(hypotheses) if hypotheses is not None else {}
    return subject | {key: settings.get(key) for key in SUBJECT_SETTINGS}


def hypotheses_file_subject(hypotheses: str | Path) -> dict:
    """:func:`hypotheses_subject` of a hypotheses file: ``experiments.transcribe`` rows (``.jsonl``;
    lines that are not objects are left to the scorer reading the file) or plain text (one output
    per line: nothing is known about its model, dataset or languages)."""
    path, rows = Path(hypotheses), []
    if path.suffix == ".jsonl":
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            rows += [row] if isinstance(row, dict) else []
    return hypotheses_subject(rows, path)


def read_settings(hypotheses: str | Path) -> dict:
    """The settings file beside a hypotheses file, or ``{}`` when there is none (or it is not an object)."""
    return read_json_object(settings_path(hypotheses))


def settings_damage(path: Path) -> str | None:
    """What is wrong with an existing settings file (not readable, not JSON, not a JSON object), or None."""
    try:
        loaded = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return f"not a readable settings file ({type(error).__name__}: {reason})"
    if not isinstance(loaded, dict):
        return f"a settings file holds a JSON object, and this one holds {type(loaded).__name__} {json.dumps(loaded)[:40]}"
    return None


def read_json_object(path: Path) -> dict:
    """A JSON file's object, or ``{}`` where the file is missing, unreadable or not an object (a cache,
    a settings file, a config: the caller decides what an empty one means)."""
    try:
        loaded = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def identified(document: dict, schema: int, inputs: Iterable[str | Path], subject: dict, kind: str) -> dict:
    """``document`` headed by what every output records about itself: its ``kind`` (the command that
    wrote it: ``asr_gap``, ``mustshe``, ``winomt``, ...) and that kind's ``schema`` version, its
    ``subject`` (model label, dataset, languages), the ``inputs`` it was computed from
    (:func:`file_identity` of each) and the ``provenance`` of the code that computed it. A reader
    such as ``collect`` refuses a document of another kind than it asked for. The document is built
    as its record (:class:`extract.records.Document`), so the header's keys and order are the record's."""
    from extract.records import Document

    record = Document(subject=subject, body=document, schema=schema, inputs=[file_identity(path) for path in inputs], provenance=provenance(), kind=kind)
    return record.to_dict()
