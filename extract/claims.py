"""Exclusive claims: one writer per output file.

A claim on ``path`` is the file ``{path}.lock``, created atomically (``O_CREAT | O_EXCL``) and naming
the holder's host, pid and start time, so a second writer of the same output stops with a message
naming the first. A claim whose process is gone (a job killed with SIGKILL) is reported, never
broken silently: with ``reclaim_stale`` a claim whose holder ran on this host and is gone is taken
over, and ``on_reclaim`` is told which one. A claim from another host is never taken over (its
process cannot be checked from here).

The store's part claims (:class:`extract.store.PartClaim`) and the append-only JSONL outputs
(:mod:`extract.appendlog`) are claims of this kind.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import time
from pathlib import Path

from extract.diskfull import DiskFullError, is_disk_full

CLAIM_SUFFIX = ".lock"


class ClaimError(RuntimeError):
    """Another writer (alive, or a dead one whose claim was left behind) holds the output."""


def claim_path(path: Path) -> Path:
    return path.with_name(path.name + CLAIM_SUFFIX)


class Claim:
    """An exclusive claim on ``target``; use as a context manager (or call :meth:`release`).

    Taking it raises :meth:`refusal` when the lock exists: the message says whether the holder still
    runs (wait for it, or write elsewhere) or is gone (a killed run: rerun with ``--reclaim-stale``).
    Subclasses name what a killed holder leaves besides its lock (:meth:`discard_leftovers`) and word
    the refusal for their output (:meth:`refusal`).
    """

    def __init__(self, target: Path, reclaim_stale: bool = False, on_reclaim=None):
        self.target = Path(target)
        self.lock = claim_path(self.target)
        self.holder = {"host": socket.gethostname(), "pid": os.getpid(), "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        self.held = False
        try:
            descriptor = os.open(self.lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            stale = stale_holder(self.lock)
            if not (reclaim_stale and stale):
                raise self.refusal() from None
            self.lock.unlink()
            self.discard_leftovers()
            if on_reclaim is not None:
                on_reclaim(f"{self.target}: reclaimed the stale claim of pid {stale.get('pid')} on {stale.get('host')} since {stale.get('since')}")
            descriptor = os.open(self.lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        try:
            with os.fdopen(descriptor, "w") as handle:
                json.dump(self.holder, handle)
        except BaseException as error:
            self.lock.unlink(missing_ok=True)  # left empty, it would read as another writer's claim
            if is_disk_full(error):
                raise self.unwritable() from error
            raise
        self.held = True

    def unwritable(self) -> Exception:
        """The error for a claim that a full disk kept from being written (the lock is removed)."""
        return DiskFullError(errno.ENOSPC, f"disk full while writing the claim {self.lock}: nothing was written; free space and rerun", str(self.lock))

    def discard_leftovers(self) -> None:
        """Delete what a killed holder may have left besides its lock, before the claim is taken over."""

    def refusal(self) -> ClaimError:
        """Why the claim cannot be taken, naming the holder and what to do."""
        holder = read_holder(self.lock)
        if holder is None:
            return ClaimError(
                f"{self.target} is claimed by another writer ({self.lock} is being created or unreadable); "
                f"if no other process writes to {self.target}, delete {self.lock} and rerun"
            )
        if stale_holder(self.lock):
            return ClaimError(
                f"{self.target}: stale claim {self.lock} by {describe_holder(holder)}: that process is gone (a killed run); "
                f"check that no other job writes to {self.target}, then rerun with --reclaim-stale (or delete {self.lock})"
            )
        return ClaimError(
            f"{self.target} is being written by {describe_holder(holder)} (claim {self.lock}): another process writes to this output; "
            "let it finish and rerun to resume, or write to another file"
        )

    def release(self) -> None:
        if self.held and read_holder(self.lock) == self.holder:
            self.lock.unlink(missing_ok=True)
        self.held = False

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.release()


def describe_holder(holder: dict) -> str:
    return f"pid {holder.get('pid')} on host {holder.get('host')} since {holder.get('since')}"


def read_holder(lock: Path) -> dict | None:
    try:
        holder = json.loads(lock.read_text())
    except (OSError, ValueError):
        return None
    return holder if isinstance(holder, dict) else None


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def stale_holder(lock: Path) -> dict | None:
    """The holder recorded in ``lock`` when it ran on this host and its process is gone, else None."""
    holder = read_holder(lock)
    if holder and holder.get("host") == socket.gethostname() and isinstance(holder.get("pid"), int) and not process_alive(holder["pid"]):
        return holder
    return None
