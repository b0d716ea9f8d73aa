"""Where generated data lives: one git-ignored cache directory for weights, corpora and outputs."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "SPEECH_GENDER_CACHE"
PROJECT_ROOT = Path(__file__).resolve().parent.parent


def cache_dir() -> Path:
    """The cache root: ``$SPEECH_GENDER_CACHE`` if set, else ``.cache/`` in the project checkout."""
    root = Path(os.environ.get(CACHE_ENV) or PROJECT_ROOT / ".cache")
    root.mkdir(parents=True, exist_ok=True)
    return root
