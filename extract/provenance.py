"""Provenance recorded with every output: package version and git commit."""

from __future__ import annotations

import subprocess
from functools import lru_cache

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
