"""Where generated data lives: one cache directory for weights, corpora and outputs; and the file
name an utterance id gets inside a folder (:func:`id_file_name`).

``$SPEECH_GENDER_CACHE`` when set. Otherwise, in a source checkout (the folder holding this
package's ``pyproject.toml``), the git-ignored ``.cache/`` beside the code, so ``make`` and CI stay
self-contained; in an installed package, the platform's user cache directory (never inside
site-packages).
"""

from __future__ import annotations

import hashlib
import os
import re
from functools import lru_cache
from pathlib import Path

import platformdirs

CACHE_ENV = "SPEECH_GENDER_CACHE"
DISTRIBUTION = "speech-gender-probing"


@lru_cache(maxsize=1)
def source_checkout() -> Path | None:
    """The source tree this package runs from, or None when it is installed (e.g. from a wheel)."""
    root = Path(__file__).resolve().parent.parent
    pyproject = root / "pyproject.toml"
    if pyproject.is_file() and f'name = "{DISTRIBUTION}"' in pyproject.read_text(encoding="utf-8"):
        return root
    return None


def cache_dir() -> Path:
    """The cache root (see the module docstring), created if missing."""
    checkout = source_checkout()
    default = checkout / ".cache" if checkout else Path(platformdirs.user_cache_dir(DISTRIBUTION))
    root = Path(os.environ.get(CACHE_ENV) or default)
    root.mkdir(parents=True, exist_ok=True)
    return root


def id_file_name(identifier: str, suffix: str, content: bytes = b"") -> str:
    """A file name for an utterance id, inside whatever folder it is joined to: the id's letters,
    digits, ``.``, ``_`` and ``-`` (every other run of characters, path separators and control
    characters included, becomes ``_``; at most 80 of them), ``-``, 8 hex digits of the sha1 of the
    raw id and of ``content``, then ``suffix``. An id is not a path: ``../x``, ``/etc/x`` and ``..``
    give plain names in the folder; ids that differ only in replaced characters, or the same id with
    other ``content`` (the audio of another dataset), get other names; the same id and content always
    the same name."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", identifier)[:80]
    digest = hashlib.sha1(identifier.encode("utf-8", "surrogatepass"))
    if content:
        digest.update(b"\0" + content)
    return f"{safe}-{digest.hexdigest()[:8]}{suffix}"


def canonical_path(path: str | os.PathLike) -> str:
    """One spelling per file or folder: absolute, symlinks resolved, no ``./`` or trailing ``/``
    (``stores/wb``, ``./stores/wb`` and ``stores/wb/`` are one store)."""
    return str(Path(path).expanduser().resolve())
