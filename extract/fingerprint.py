"""A local model's identity by content: the fingerprint of a checkpoint folder's files.

A folder is known by what it holds, not by how its path is spelled: ``models/w``, ``./models/w/``
and a symlink to it are one model, and weights rewritten in place are another. The fingerprint
covers the files that define the model (:data:`MODEL_FILES`: configs, weights, tokenizer and
processor files, remote code) at the top level of the folder: their names, sizes and sha256. Files
that only describe a folder (a README, ``conversion.json``, ``finetune.json``) are left out.

Each file's sha256 is cached in ``<cache>/fingerprints.json`` keyed by its resolved path, size,
modification and change times, so a large folder is hashed once; a stale or unreadable cache only
costs a new hash. Records that carry a ``model_fingerprint`` are compared without the checkpoint's
spelling (:func:`compared`), which is kept in them for people to read.
"""

from __future__ import annotations

import hashlib
import json
import os
from fnmatch import fnmatch
from pathlib import Path

from extract.paths import cache_dir
from extract.provenance import file_sha256, read_json_object

MODEL_FILES = (
    "*config*.json",  # config, generation_config, preprocessor_config, tokenizer_config, ...
    "*.safetensors",
    "*.bin",
    "*.pt",
    "*.pth",
    "*.index.json",  # which shard holds which weight
    "tokenizer*.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "normalizer.json",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
    "*.model",  # sentencepiece
    "*.tiktoken",
    "*.py",  # remote code (trust_remote_code)
)
FINGERPRINT = "model_fingerprint"  # the key records keep a fingerprint under
CACHE_NAME = "fingerprints.json"
LENGTH = 16  # hex digits kept: short enough to read in a message, far beyond accidental collisions


def model_files(folder: Path) -> list[Path]:
    """The files of ``folder`` (top level, following symlinks) that define the model, by name."""
    return sorted((path for path in folder.iterdir() if path.is_file() and any(fnmatch(path.name, p) for p in MODEL_FILES)), key=lambda p: p.name)


def folder_fingerprint(folder: str | Path) -> str:
    """The fingerprint of a checkpoint folder: the first :data:`LENGTH` hex digits of one sha256
    over each model file's name, size and sha256 (see the module docstring)."""
    folder = Path(folder).expanduser()
    digest = hashlib.sha256()
    for path, entry in _cached_sha256(model_files(folder)).items():
        digest.update(f"{path.name}\0{entry['size']}\0{entry['sha256']}\n".encode())
    return digest.hexdigest()[:LENGTH]


def compared(first: dict, second: dict, fingerprints: tuple[str | None, str | None] | None = None) -> tuple[dict, dict]:
    """Two records (store configs, transcription settings, fine-tuning configs) as a rerun compares
    them: when both name their model by a fingerprint, the checkpoint's spelling is for people only
    and is left out of both. ``fingerprints``: the records' fingerprints when they are kept outside
    them (default: their ``model_fingerprint`` keys)."""
    ours, theirs = fingerprints or (first.get(FINGERPRINT), second.get(FINGERPRINT))
    if ours is None or theirs is None:
        return first, second
    return _without_checkpoint(first), _without_checkpoint(second)


def _without_checkpoint(record: dict) -> dict:
    return {key: value for key, value in record.items() if key != "checkpoint"}


def _stamp(path: Path) -> dict:
    status = path.stat()
    return {"size": status.st_size, "mtime_ns": status.st_mtime_ns, "ctime_ns": status.st_ctime_ns}


def _cached_sha256(files: list[Path]) -> dict[Path, dict]:
    """Size and sha256 of each file (in the order given), from the cache when its size and times are unchanged; the cache is
    updated (atomically) when something had to be hashed."""
    cache_path = cache_dir() / CACHE_NAME
    cache = read_json_object(cache_path)
    entries, changed = {}, False
    for path in files:
        key = str(path.resolve())
        stamp = _stamp(path)
        entry = cache.get(key)
        if not (isinstance(entry, dict) and {k: entry.get(k) for k in stamp} == stamp and isinstance(entry.get("sha256"), str)):
            entry = stamp | {"sha256": file_sha256(path)}
            cache[key], changed = entry, True
        entries[path] = entry
    if changed:
        _write_cache(cache_path, cache)
    return entries


def _write_cache(path: Path, cache: dict) -> None:
    """Written to a temporary name and renamed; entries of files that no longer exist are dropped.
    Two processes writing at once may lose each other's new entries: they are hashed again later."""
    kept = {key: entry for key, entry in cache.items() if os.path.exists(key)}
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(json.dumps(kept, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(temporary, path)
    except OSError:
        temporary.unlink(missing_ok=True)  # a cache that cannot be written costs a hash next time, never the run
