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
from datetime import datetime
from pathlib import Path

from extract.diskfull import DiskFullError, is_disk_full
from extract.errors import UserError

CLAIM_SUFFIX = ".lock"


class ClaimError(UserError, RuntimeError):
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
        self.holder = {"host": socket.gethostname(), "pid": os.getpid(), "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **process_identity(os.getpid())}
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


def boot_id() -> str | None:
    """This boot's id (Linux): a claim written before a reboot names a process that is gone, whatever its pid now is."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def process_start_ticks(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (Linux ``/proc/PID/stat`` field 22), or
    None where it cannot be read: with the boot id it tells the claim's writer from a later process
    that was given the same pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    try:
        return int(stat[stat.rindex(")") + 2 :].split()[19])  # the fields after the command name, which may hold spaces
    except (ValueError, IndexError):
        return None


def process_identity(pid: int) -> dict:
    """What a claim records beside the pid (where the system tells it): the boot id and the process's start time."""
    identity = {"boot_id": boot_id(), "start_ticks": process_start_ticks(pid)}
    return {key: value for key, value in identity.items() if value is not None}


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def stale_holder(lock: Path) -> dict | None:
    """The holder recorded in ``lock`` when it ran on this host and its process is gone, else None.

    Gone means: its pid is no process now, or is no pid at all (a string, a negative number: a
    malformed claim), or is a process that is not the writer: the claim was written in another boot,
    or the process now holding the pid started at another time than the one recorded (or, for a
    claim that recorded no start time, after the claim's ``since``)."""
    holder = read_holder(lock)
    if not holder or holder.get("host") != socket.gethostname():
        return None
    pid = holder.get("pid")
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0 or not process_alive(pid):
        return holder
    return holder if _pid_reused(holder, pid) else None


def _pid_reused(holder: dict, pid: int) -> bool:
    """Whether live process ``pid`` is another process than the one that wrote ``holder``."""
    booted = boot_id()
    if holder.get("boot_id") is not None and booted is not None and holder["boot_id"] != booted:
        return True
    started = process_start_ticks(pid)
    if started is None:
        return False  # nothing to compare: the pid alone says alive
    if holder.get("start_ticks") is not None:
        return holder["start_ticks"] != started
    since = _parsed_since(holder.get("since"))
    if since is None:
        return True  # every claim written here records a readable since: this one is malformed
    return _started_at(started) > since + SINCE_SLACK_SECONDS


SINCE_SLACK_SECONDS = 2.0  # a claim's ``since`` has one-second resolution, a process start time is computed from the boot time


def _parsed_since(since) -> float | None:
    try:
        return datetime.strptime(since, "%Y-%m-%dT%H:%M:%S%z").timestamp() if isinstance(since, str) else None
    except (ValueError, OverflowError):
        return None


def _started_at(ticks: int) -> float:
    """A start time in clock ticks since boot as a Unix time."""
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    return time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")
