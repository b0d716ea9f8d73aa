"""A full disk while writing an output: one error that names the file, whichever library was writing;
and a small text file written whole or not at all (:func:`write_text_whole`).

Python reports a full disk as ``OSError`` with ``errno`` ENOSPC (or EDQUOT for an exceeded quota),
usually without the file's name when the failing call was a write or a close; HDF5 puts the errno in
the text of an ``OSError`` or ``RuntimeError``. A writer wraps its writes in :func:`naming_full_disk`
so the error that reaches the command line is :class:`DiskFullError`: one line naming the file and
saying what was kept.
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from extract.errors import UserError

NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
_NO_SPACE_TEXT = ("errno = 28", "errno = 122", "No space left on device", "Disk quota exceeded")


class DiskFullError(UserError, OSError):
    """No space left while writing a file; ``str()`` is the one-line message (see :func:`disk_full`)."""

    def __str__(self) -> str:
        return str(self.strerror)


def disk_full(path: str | Path, kept: str) -> DiskFullError:
    """The error for a full disk while writing ``path``; ``kept`` says what survives and how the rerun goes on."""
    return DiskFullError(errno.ENOSPC, f"disk full while writing {path}: free space and rerun; {kept}", str(path))


def is_disk_full(error: BaseException) -> bool:
    """An error from a full disk or an exceeded quota, as Python or HDF5 reports it."""
    if isinstance(error, OSError) and error.errno in NO_SPACE:
        return True
    return isinstance(error, (OSError, RuntimeError)) and any(text in str(error) for text in _NO_SPACE_TEXT)


@contextmanager
def naming_full_disk(path: str | Path, kept: str) -> Iterator[None]:
    """Turns a full disk inside the block into :func:`disk_full` for ``path``; other errors pass unchanged."""
    try:
        yield
    except DiskFullError:
        raise
    except (OSError, RuntimeError) as error:
        if not is_disk_full(error):
            raise
        raise disk_full(path, kept) from error


def write_text_whole(path: str | Path, text: str, kept: str = "it was not written and an earlier version is unchanged") -> Path:
    """``text`` (UTF-8) at ``path``, whole or not at all (:func:`write_whole`)."""
    return write_whole(path, lambda temporary: temporary.write_text(text, encoding="utf-8"), kept)


def write_whole(path: str | Path, write: Callable[[Path], object], kept: str = "it was not written and an earlier version is unchanged") -> Path:
    """``write(temporary)`` writes the file into a temporary file beside ``path``, which is renamed over
    ``path`` once written: a reader sees the old file or the new one, never half of it (a killed
    writer leaves at most the temporary file). A full disk is named (:func:`naming_full_disk`,
    ``kept``) and the temporary file removed on any failure."""
    path = Path(path)
    temporary = path.with_name(path.name + ".tmp")
    try:
        with naming_full_disk(path, kept):
            write(temporary)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    temporary.replace(path)
    return path
