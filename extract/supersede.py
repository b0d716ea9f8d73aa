"""Outputs set aside, never deleted: ``ROOT/.superseded/STAMP/...``.

When a user asks for outputs to be computed anew (``study run --redo STAGE``, ``extract --overwrite``)
or a study's own earlier probe rows are replaced by a rerun's (other grid options, the study folder
moved), the old files are moved, with their path relative to ``ROOT`` kept, into a folder named by
the time of the move (``.superseded/20261127T012233``, with ``-2``, ``-3`` ... when one second
holds several). Nothing is lost: moving a folder back undoes it; deleting ``.superseded`` frees the
space. A file or folder holding a claim (``*.lock``: a writer may be running) is refused, never moved.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path

from extract.claims import CLAIM_SUFFIX, claim_path
from extract.errors import UserError

SUPERSEDED = ".superseded"


class SupersedeError(UserError, RuntimeError):
    """An output that cannot be set aside: a writer's claim on it, or a folder outside the root."""


def superseded_folder(root: Path) -> Path:
    """A new, empty ``ROOT/.superseded/STAMP`` folder."""
    base = Path(root) / SUPERSEDED / time.strftime("%Y%m%dT%H%M%S")
    folder, number = base, 1
    while folder.exists():
        number += 1
        folder = base.with_name(f"{base.name}-{number}")
    folder.mkdir(parents=True)
    return folder


def claims_in(path: Path) -> list[Path]:
    """The claims (``*.lock``) on ``path`` or inside it."""
    found = [lock for lock in [claim_path(path)] if lock.exists()]
    if path.is_dir():
        found += sorted(path.rglob(f"*{CLAIM_SUFFIX}"))
    return found


def set_aside(paths: Iterable[Path], root: Path) -> Path | None:
    """Moves each existing path of ``paths`` (each under ``root``) into a new ``ROOT/.superseded/STAMP``
    folder, keeping its path relative to ``root``; returns that folder (None when nothing existed).
    Refuses, before moving anything, a path with a claim on it or in it."""
    root = Path(root)
    existing = [Path(path) for path in dict.fromkeys(paths) if Path(path).exists()]
    for path in existing:
        locks = claims_in(path)
        if locks:
            raise SupersedeError(f"{path} is claimed by a writer ({locks[0]}); let it finish (or rerun it with --reclaim-stale), then set it aside")
        try:
            path.resolve().relative_to(root.resolve())
        except ValueError:
            raise SupersedeError(f"{path} is not under {root}; it is not set aside from here") from None
    if not existing:
        return None
    folder = superseded_folder(root)
    for path in sorted(existing, key=lambda path: len(path.resolve().parts)):  # a folder before what it holds
        if not path.exists():  # inside a folder moved before it
            continue
        target = folder / path.resolve().relative_to(root.resolve())
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, target)
    return folder
