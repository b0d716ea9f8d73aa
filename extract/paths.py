"""Where generated data lives: one cache directory for weights, corpora and outputs.

``$SPEECH_GENDER_CACHE`` when set. Otherwise, in a source checkout (the folder holding this
package's ``pyproject.toml``), the git-ignored ``.cache/`` beside the code, so ``make`` and CI stay
self-contained; in an installed package, the platform's user cache directory (never inside
site-packages).
"""

from __future__ import annotations

import os
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


def canonical_path(path: str | os.PathLike) -> str:
    """One spelling per file or folder: absolute, symlinks resolved, no ``./`` or trailing ``/``
    (``stores/wb``, ``./stores/wb`` and ``stores/wb/`` are one store)."""
    return str(Path(path).expanduser().resolve())
