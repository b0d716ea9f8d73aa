"""GRAFN's filters file: JSON with every parameter, the frequencies, the target, each group's
spectrum and gain, the calibration counts and the pitch rule's threshold. Never pickled."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from experiments.normalisation.transform import GrafnError, GrafnParameters

FORMAT = "grafn-filters"
VERSION = 1
GROUPS = ("female", "male")
ARRAY_KEYS = ("spectrum_db", "gain_db")


@dataclass
class GrafnFilters:
    """The calibrated filters. ``groups[g]``: ``spectrum_db`` and ``gain_db`` arrays, ``utterances``,
    ``speakers``, ``frames``, ``median_f0_hz``; ``pitch_threshold_hz``: F0 at or above which the
    label-free rule picks the female filter (None when the calibration set gave no pitch for a group)."""

    params: GrafnParameters
    target_db: np.ndarray
    groups: dict[str, dict]
    pitch_threshold_hz: float | None
    calibration: dict = field(default_factory=dict)

    def gain(self, group: str) -> np.ndarray:
        return self.groups[group]["gain_db"]

    def to_json(self) -> dict:
        groups = {name: {key: (value.tolist() if key in ARRAY_KEYS else value) for key, value in entry.items()} for name, entry in self.groups.items()}
        return {
            "format": FORMAT,
            "version": VERSION,
            "parameters": self.params.to_json(),
            "frequencies_hz": self.params.frequencies.tolist(),
            "target_db": np.asarray(self.target_db).tolist(),
            "groups": groups,
            "pitch_threshold_hz": self.pitch_threshold_hz,
            "calibration": self.calibration,
        }

    def save(self, path: str | Path) -> Path:
        """Write through a temporary file, so a reader never sees half a filters file."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(path.name + ".tmp")
        temporary.write_text(json.dumps(self.to_json(), indent=1, allow_nan=False) + "\n", encoding="utf-8")
        temporary.replace(path)
        return path


def _array(value, bins: int, where: str) -> np.ndarray:
    array = np.asarray(value, dtype=np.float64) if isinstance(value, list) else None
    if array is None or array.shape != (bins,) or not np.all(np.isfinite(array)):
        raise GrafnError(f"{where} must be a list of {bins} finite numbers")
    return array


def filters_from_json(record: dict) -> GrafnFilters:
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise GrafnError(f'not a GRAFN filters file (expected "format": "{FORMAT}"); write one with `python -m experiments.grafn fit`')
    if record.get("version") != VERSION:
        raise GrafnError(f"filters version {record.get('version')!r}, this code reads version {VERSION}; refit them")
    missing = [key for key in ("parameters", "target_db", "groups", "pitch_threshold_hz") if key not in record]
    if missing:
        raise GrafnError(f"missing key(s) {', '.join(missing)}")
    if not isinstance(record["parameters"], dict):
        raise GrafnError("parameters must be an object")
    try:
        params = GrafnParameters.from_json(record["parameters"])
    except TypeError as error:
        raise GrafnError(f"parameters: {error}") from None
    bins = len(params.frequencies)
    groups = record["groups"]
    if not isinstance(groups, dict) or set(groups) != set(GROUPS):
        raise GrafnError(f"groups must hold exactly {' and '.join(GROUPS)}")
    parsed = {}
    for name in GROUPS:
        if not isinstance(groups[name], dict):
            raise GrafnError(f"groups.{name} must be an object")
        parsed[name] = dict(groups[name]) | {key: _array(groups[name].get(key), bins, f"groups.{name}.{key}") for key in ARRAY_KEYS}
        if np.any(np.abs(parsed[name]["gain_db"]) > params.max_gain_db + 1e-9):
            raise GrafnError(f"groups.{name}.gain_db exceeds max_gain_db {params.max_gain_db}")
    threshold = record["pitch_threshold_hz"]
    if threshold is not None and not (isinstance(threshold, (int, float)) and np.isfinite(threshold) and threshold > 0):
        raise GrafnError(f"pitch_threshold_hz must be a positive number or null, got {threshold!r}")
    return GrafnFilters(params, _array(record["target_db"], bins, "target_db"), parsed, threshold, record.get("calibration", {}))


def load_filters(path: str | Path) -> GrafnFilters:
    """Read a filters file; anything wrong with it is a :class:`GrafnError` naming the file."""
    path = Path(path)
    if not path.is_file():
        raise GrafnError(
            f"{path}: " + ("is a folder; give the filters file" if path.is_dir() else "no such filters file; write one with `python -m experiments.grafn fit`")
        )
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise GrafnError(f"{path}: not JSON ({error})") from None
    try:
        return filters_from_json(record)
    except GrafnError as error:
        raise GrafnError(f"{path}: {error}") from None
