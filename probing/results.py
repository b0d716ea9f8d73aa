"""The probe results format: one JSONL row per run, its arrays beside it.

A results file ``OUT`` (e.g. ``results/probes.jsonl``) holds one JSON row per finished run, appended
as runs finish; each row has the run's ``run_id`` and the ``store_identity`` of the stores it read.
A run recomputed after its store changed is appended again: the latest row of a run id is the one
readers use. Per-position (and applied-store) arrays go to ``OUT.arrays/<run_id>.npz``, attention
weights to ``OUT.arrays/<run_id>.attention.npz`` (ragged weights stored flat with offsets).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from probing.run import ProbeConfig, ProbeResult, config_store_identity


class ResultsError(ValueError):
    """A results file that cannot be read or written as given (a malformed line, a folder for a file)."""


def arrays_folder(out: str | Path) -> Path:
    """``OUT.arrays``: where the arrays of the runs in results file ``out`` are saved."""
    return Path(out).with_name(Path(out).name + ".arrays")


def check_results_path(out: Path) -> None:
    """``out`` can be a results file: not a folder, no file where a parent folder should be."""
    if out.is_dir():
        raise ResultsError(f"results file {out} is a folder; give a file, e.g. {out / 'probes.jsonl'}")
    for parent in out.parents:
        if parent.exists() and not parent.is_dir():
            raise ResultsError(f"results file {out}: {parent} is a file, not a folder")


def save_result(result: ProbeResult, out: Path) -> None:
    """Appends ``result``'s row to ``out``, after saving its arrays and attention weights under :func:`arrays_folder`."""
    folder = arrays_folder(out)
    folder.mkdir(parents=True, exist_ok=True)
    run_id = result.row["run_id"]
    if result.arrays:
        np.savez_compressed(folder / f"{run_id}.npz", **result.arrays)
    if result.attention:
        weights = result.attention["weights"]
        np.savez_compressed(
            folder / f"{run_id}.attention.npz",
            ids=np.array(result.attention["ids"]),
            offsets=np.cumsum([0] + [len(w) for w in weights]),
            weights=np.concatenate(weights) if weights else np.zeros(0),
            probabilities=np.asarray(result.attention["probabilities"]),
        )
    with out.open("a") as handle:
        handle.write(json.dumps(result.row) + "\n")


def load_rows(out: str | Path) -> dict[str, dict]:
    """Result rows of a results file by run id, the latest row of each; a line that is not a
    result row raises :class:`ResultsError` naming ``file:line``."""
    rows = {}
    with Path(out).open() as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                try:
                    row = json.loads(line)
                    rows[row["run_id"]] = row
                except (json.JSONDecodeError, KeyError, TypeError) as error:
                    raise ResultsError(f"{out}:{number}: not a result row ({error!r}); move the file aside or fix that line") from error
    return rows


def finished_ids(configs: Iterable[ProbeConfig], rows: dict[str, dict]) -> set[str]:
    """Run ids of ``configs`` whose latest row in ``rows`` read the stores as they are now (same
    ``store_identity``): a rerun skips those and recomputes the others."""
    identities: dict[tuple, str] = {}
    finished = set()
    for config in configs:
        row = rows.get(config.run_id())
        if row is None:
            continue
        key = (config.store, config.apply_to)
        if key not in identities:
            identities[key] = config_store_identity(config)
        if row.get("store_identity") == identities[key]:
            finished.add(config.run_id())
    return finished


def load_arrays(out: str | Path, run_id: str) -> dict[str, np.ndarray]:
    """The per-position (and applied-store) arrays saved for one run."""
    with np.load(arrays_folder(out) / f"{run_id}.npz") as data:
        return dict(data)


def load_attention(out: str | Path, run_id: str) -> tuple[list[str], list[np.ndarray], np.ndarray]:
    """(test ids, attention weights per test utterance, P(class 1) per test utterance) of an attention run."""
    with np.load(arrays_folder(out) / f"{run_id}.attention.npz") as data:
        offsets, weights = data["offsets"], data["weights"]
        return [str(i) for i in data["ids"]], [weights[a:b] for a, b in zip(offsets[:-1], offsets[1:])], data["probabilities"]


def load_predictions(out: str | Path, run_id: str) -> dict[str, str]:
    """Utterance id -> predicted class of an attention run: on the ``--apply-to`` store where the run
    has one, else on its test split (class 1 where P(class 1) > 0.5)."""
    arrays = load_arrays(out, run_id)
    classes = [str(c) for c in arrays.get("applied_class_names", ["male", "female"])]
    if "applied_ids" in arrays:
        ids, probabilities = [str(i) for i in arrays["applied_ids"]], arrays["applied_probabilities"]
    else:
        ids, _, probabilities = load_attention(out, run_id)
    return {i: classes[int(p > 0.5)] for i, p in zip(ids, probabilities)}
