"""Debian packages into the cache: ``apt-get download`` (no root needed once package lists exist),
``dpkg-deb -x`` to unpack without installing.

Layout under ``cache_dir()/realvoices``::

    debs/NAME_VERSION_ARCH.deb       as apt-get downloads it (a .deb put there by hand is used as is)
    unpacked/NAME/                   the package's files (usr/share/...)
    unpacked/NAME.json               package, version and .deb: written last, marks a complete unpack
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from extract.errors import UserError
from extract.paths import cache_dir


class FetchError(UserError, RuntimeError):
    """A package cannot be fetched or unpacked; the message says what to run."""


@dataclass(frozen=True)
class Unpacked:
    package: str
    version: str
    root: Path


def realvoices_cache() -> Path:
    return cache_dir() / "realvoices"


def _tool(name: str, package: str, debs: Path) -> str:
    path = shutil.which(name)
    if path is None:
        raise FetchError(
            f"{name} not found: the real voices come from Debian packages (apt-get download, then dpkg-deb -x); "
            f"without apt-get, put {package}'s .deb from https://packages.debian.org/bookworm/all/{package}/download "
            f"into {debs} (dpkg-deb is still needed to unpack it)"
        )
    return path


def _run(command: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)


def _last_error(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip() and not line.startswith("W:")]
    errors = [line for line in lines if line.startswith("E:")]
    return (errors or lines or ["no output"])[-1]


def download(package: str, debs: Path) -> Path:
    """``apt-get download package`` into ``debs``, through a scratch folder so a cut download leaves no .deb."""
    apt_get = _tool("apt-get", package, debs)
    scratch = debs / f".download-{package}"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    result = _run([apt_get, "download", package], cwd=scratch)
    got = sorted(scratch.glob(f"{package}_*.deb"))
    if result.returncode != 0 or not got:
        shutil.rmtree(scratch, ignore_errors=True)
        raise FetchError(
            f"apt-get download {package} failed ({_last_error(result.stderr + result.stdout)}): "
            f"run `apt-get update` first (as root) so the package lists name {package}, or put its .deb into {debs}"
        )
    target = debs / got[0].name
    got[0].replace(target)
    shutil.rmtree(scratch, ignore_errors=True)
    return target


def deb_version(deb: Path) -> str:
    result = _run([_tool("dpkg-deb", deb.name, deb.parent), "-f", str(deb), "Version"])
    if result.returncode != 0:
        raise FetchError(f"{deb}: not a readable .deb ({_last_error(result.stderr)}); delete it and run again to download it afresh")
    return result.stdout.strip()


def unpack(package: str, cache: Path | None = None) -> Unpacked:
    """``package``'s files under the cache, fetched and unpacked unless a complete unpack is there."""
    cache = cache or realvoices_cache()
    debs, unpacked = cache / "debs", cache / "unpacked"
    marker = unpacked / f"{package}.json"
    if marker.is_file():
        recorded = json.loads(marker.read_text(encoding="utf-8"))
        return Unpacked(package, recorded["version"], unpacked / package)
    debs.mkdir(parents=True, exist_ok=True)
    found = sorted(debs.glob(f"{package}_*.deb"))  # one is normally there; else the newest-named
    deb = found[-1] if found else download(package, debs)
    version = deb_version(deb)
    partial = unpacked / f".{package}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    result = _run([_tool("dpkg-deb", package, debs), "-x", str(deb), str(partial)])
    if result.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        raise FetchError(f"dpkg-deb -x {deb} failed ({_last_error(result.stderr)}); delete the .deb and run again to download it afresh")
    root = unpacked / package
    shutil.rmtree(root, ignore_errors=True)
    partial.rename(root)
    temporary = marker.with_name(marker.name + ".tmp")
    temporary.write_text(json.dumps({"package": package, "version": version, "deb": deb.name}, indent=2), encoding="utf-8")
    temporary.replace(marker)
    return Unpacked(package, version, root)
