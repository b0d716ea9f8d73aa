"""Hugging Face ``datasets`` objects (or any iterable of row dicts)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import numpy as np
import soundfile

from extract.corpora.base import AdapterResult, Collector
from extract.paths import id_file_name


def hf_dataset(
    dataset: Iterable[Mapping],
    audio_dir: str | Path,
    dataset_name: str,
    columns: Mapping[str, str] | None = None,
    write_audio: Callable[[Path, np.ndarray, int], None] | None = None,
    **defaults,
) -> AdapterResult:
    """A Hugging Face ``datasets`` object (or any iterable of row dicts).

    The audio column may hold ``{"path", "array", "sampling_rate"}``: a row whose array is present
    is written into ``audio_dir`` (16-bit PCM) so that the manifest points at a file, named by
    :func:`extract.paths.id_file_name` from its id and its samples: an id is never a path out of
    ``audio_dir``, and the same id with other audio (another dataset, config or split written into
    the same folder) gets another file, while a rerun finds its own; otherwise its ``path`` is used
    as is. A gender column stored as a ``ClassLabel`` (Fleurs keeps
    0/1/2) is decoded with the dataset's own label names, never guessed from the integers.
    """
    audio_dir = Path(audio_dir)
    columns = {"id": "id", "audio": "audio", "text": "sentence", "gender": "gender", "speaker": "client_id", **(columns or {})}
    gender_names = _class_label_names(dataset, columns["gender"])
    collector = Collector(Path(f"<{dataset_name}>"))
    write = write_audio or (lambda path, array, rate: soundfile.write(path, array, rate, subtype="PCM_16"))
    for index, row in enumerate(dataset):
        line = index + 1
        fields = dict(defaults)
        for key, name in columns.items():
            if name in row:
                fields[key] = row[name]
        audio = fields.get("audio")
        if "id" not in fields:
            fields["id"] = f"{dataset_name}-{index}"
        if isinstance(audio, Mapping):
            if audio.get("array") is not None:
                samples = np.asarray(audio["array"], dtype=np.float32)
                fields["audio"] = str(_write_once(audio_dir, str(fields["id"]), samples, int(audio["sampling_rate"]), write))
            else:
                fields["audio"] = str(audio.get("path") or "")
        if gender_names is not None and isinstance(fields.get("gender"), int):
            fields["gender"] = gender_names[fields["gender"]] if 0 <= fields["gender"] < len(gender_names) else str(fields["gender"])
        fields["dataset"] = dataset_name
        fields["extra"] = {name: row[name] for name in row if name not in columns.values() and _is_json_scalar(row[name])}
        collector.add(line, **fields)
    return collector.result


def _write_once(audio_dir: Path, identifier: str, samples: np.ndarray, rate: int, write: Callable[[Path, np.ndarray, int], None]) -> Path:
    """The WAV of these samples in ``audio_dir``, written unless a file of the same id and samples is
    there already; written under a temporary name and renamed, so a file with its final name is whole."""
    target = audio_dir / id_file_name(identifier, ".wav", f"{rate}:".encode() + samples.tobytes())
    if not target.exists():
        audio_dir.mkdir(parents=True, exist_ok=True)
        temporary = audio_dir / f".{target.stem}.{os.getpid()}.partial.wav"
        write(temporary, samples, rate)
        temporary.replace(target)
    return target


def _class_label_names(dataset, column: str) -> list[str] | None:
    """The label names of a ``datasets.ClassLabel`` column, or None for a plain column."""
    feature = (getattr(dataset, "features", None) or {}).get(column)
    names = getattr(feature, "names", None)
    return list(names) if names else None


def _is_json_scalar(value) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))
