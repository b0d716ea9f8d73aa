"""Hugging Face ``datasets`` objects (or any iterable of row dicts)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import numpy as np
import soundfile

from extract.corpora.base import AdapterResult, Collector


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
    is written to ``audio_dir/{id}.wav`` (16-bit PCM) so that the manifest points at a file;
    otherwise its ``path`` is used as is. A gender column stored as a ``ClassLabel`` (Fleurs keeps
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
                audio_dir.mkdir(parents=True, exist_ok=True)
                target = audio_dir / f"{fields['id']}.wav"
                if not target.exists():
                    write(target, np.asarray(audio["array"], dtype=np.float32), int(audio["sampling_rate"]))
                fields["audio"] = str(target)
            else:
                fields["audio"] = str(audio.get("path") or "")
        if gender_names is not None and isinstance(fields.get("gender"), int):
            fields["gender"] = gender_names[fields["gender"]] if 0 <= fields["gender"] < len(gender_names) else str(fields["gender"])
        fields["dataset"] = dataset_name
        fields["extra"] = {name: row[name] for name in row if name not in columns.values() and _is_json_scalar(row[name])}
        collector.add(line, **fields)
    return collector.result


def _class_label_names(dataset, column: str) -> list[str] | None:
    """The label names of a ``datasets.ClassLabel`` column, or None for a plain column."""
    feature = (getattr(dataset, "features", None) or {}).get(column)
    names = getattr(feature, "names", None)
    return list(names) if names else None


def _is_json_scalar(value) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))
