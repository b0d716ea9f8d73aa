"""Provenance recorded with every output: package version and git commit."""

from __future__ import annotations

import subprocess
from functools import lru_cache

from extract import __version__
from extract.paths import PROJECT_ROOT


@lru_cache(maxsize=1)
def git_commit() -> str:
    """The checkout's HEAD, with ``-dirty`` when tracked files changed; ``unknown`` outside git."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("-dirty" if dirty else "")


def provenance() -> dict[str, str]:
    return {"package_version": __version__, "git_commit": git_commit()}
