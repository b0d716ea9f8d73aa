"""Append-only JSONL outputs: one writer each, and a cut last line never spoils the next row.

Hypotheses (``experiments.transcribe``), acoustic and lexical features, GRAFN's done-list, the
fine-tuning validation history and probe results are written row by row, so a killed run resumes
where it stopped. :class:`AppendLog` is how such a file is opened for writing:

- One writer: an exclusive :class:`extract.claims.Claim` on the file while it is open. A second
  process on the same output is refused naming the first, so two processes never append the same
  ids; a claim left by a killed run is reported, and taken over only with ``reclaim_stale``.
- A cut last line (no newline at its end, as a kill or a full disk leaves it, or a last line that
  starts a row but is not JSON) is removed, with a note, before anything is appended: its work is
  redone, and the next row starts on a line of its own.
- A file of another kind (a manifest, a JSON report, rows without the expected keys) is refused
  naming the file and line; it is never counted as finished work.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from extract.claims import Claim
from extract.manifest import ManifestError


class OutputKindError(ManifestError):
    """An output file that holds something other than the rows the command appends (named by file and line)."""


@dataclass(frozen=True)
class RowKind:
    """The rows of one kind of output: ``what`` names them in messages, every row has ``keys``, and
    no two rows share their ``unique`` key (when given: the id a resumed run skips)."""

    what: str
    keys: tuple[str, ...]
    unique: str | None = None

    def problem(self, record: object) -> str | None:
        """Why ``record`` is not a row of this kind, or None."""
        if not isinstance(record, dict):
            return f"a JSON {type(record).__name__}, not an object"
        missing = [key for key in self.keys if key not in record]
        return f"no {', '.join(repr(key) for key in missing)}" if missing else None


def note_on_stderr(message: str) -> None:
    print(f"note: {message}", file=sys.stderr)


def complete_length(data: bytes, kind: RowKind) -> int:
    """How many bytes of ``data`` hold complete lines: all of it, or up to a cut last line.

    A last line is cut when it starts a JSON object and either does not parse (a kill or a full disk
    mid-row) or lacks its newline. A last line that does not start an object, or parses as an
    object of another kind, is left for the reader to refuse: it is not a row this kind writes."""
    body = data.rstrip()
    if not body:
        return len(data)
    start = body.rfind(b"\n") + 1
    line = data[start:]
    text = line.strip()
    if not text.startswith(b"{"):
        return len(data)
    try:
        record = json.loads(text)
    except ValueError:  # also a UTF-8 sequence cut in half
        return start
    terminated = b"\n" in line
    return start if not terminated and kind.problem(record) is None else len(data)


def drop_cut_line(path: Path, kind: RowKind, note: Callable[[str], None] = note_on_stderr) -> bytes:
    """Removes a cut last line from ``path`` (see :func:`complete_length`), with a note naming it;
    returns the complete lines. Only a process that alone writes ``path`` may call this."""
    if path.exists() and not path.is_file():  # a device (/dev/zero reads forever), a FIFO or a folder
        raise OutputKindError(path, None, "not a regular file (a device, a FIFO or a folder); give the path of a file to write")
    data = path.read_bytes() if path.exists() else b""
    keep = complete_length(data, kind)
    if keep < len(data):
        os.truncate(path, keep)
        line = data[:keep].count(b"\n") + 1
        note(f"{path}:{line}: removed an incomplete last line left by an interrupted run (a kill or a full disk); its work is redone")
    return data[:keep]


def parse_rows(path: Path, data: bytes, kind: RowKind) -> list[dict]:
    """The rows of ``data`` (complete lines of ``path``); anything else is an :class:`OutputKindError`."""
    rows, first_line = [], {}
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except UnicodeDecodeError:
            problem = "not UTF-8 text"
        except ValueError as error:
            problem = f"not JSON: {error}"
        else:
            problem = kind.problem(record)
        if problem is not None and rows:  # rows of this command before it: its own output, one line damaged
            raise OutputKindError(path, number, f"not a {kind.what} ({problem}), after {len(rows)} that are: fix that line, or move the file aside")
        if problem is not None:
            raise OutputKindError(path, number, f"not a {kind.what} ({problem}); it is not an output of this command: write to another file")
        if kind.unique is not None:
            value = record[kind.unique]
            if value in first_line:
                first, key = first_line[value], kind.unique
                raise OutputKindError(path, number, f"duplicate {key} {value!r}, first on line {first}; keep one row per {key} or write to another file")
            first_line[value] = number
        rows.append(record)
    return rows


class AppendLog:
    """An append-only JSONL output opened for one writer; use as a context manager.

    On entry: claims ``path`` (:class:`extract.claims.Claim`; ``reclaim_stale`` takes over the claim
    of a killed run on this host), drops a cut last line, and reads the rows already there into
    :attr:`rows` (a file of another kind is refused). :meth:`append` writes whole lines and flushes
    them. On exit the file is closed and the claim released."""

    def __init__(self, path: str | Path, kind: RowKind, reclaim_stale: bool = False, note: Callable[[str], None] = note_on_stderr):
        self.path, self.kind, self.reclaim_stale, self.note = Path(path), kind, reclaim_stale, note
        self.rows: list[dict] = []
        self.claim: Claim | None = None
        self.handle = None

    def __enter__(self) -> AppendLog:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.claim = Claim(self.path, self.reclaim_stale, self.note)
        try:
            self.rows = parse_rows(self.path, drop_cut_line(self.path, self.kind, self.note), self.kind)
        except BaseException:
            self.claim.release()
            raise
        return self

    @property
    def ids(self) -> set:
        """The ``unique`` key of every row written so far."""
        return {row[self.kind.unique] for row in self.rows}

    def append(self, rows: Iterable[dict]) -> None:
        rows = list(rows)
        if self.handle is None:
            self.handle = self.path.open("a", encoding="utf-8")
        self.handle.write("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
        self.handle.flush()
        self.rows.extend(rows)

    def __exit__(self, *exc_info) -> None:
        try:
            if self.handle is not None:
                self.handle.close()
        finally:
            self.handle = None
            self.claim.release()
