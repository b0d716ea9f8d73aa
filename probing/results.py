"""The probe results format: one JSONL row per run, its arrays beside it.

A results file ``OUT`` (e.g. ``results/probes.jsonl``) holds one JSON row per finished run, appended
as runs finish; each row has the run's ``run_id`` and the ``store_identity`` of the stores it read.
A run recomputed after its store changed is appended again: the latest row of a run id is the one
readers use. Per-position (and applied-store) arrays go to ``OUT.arrays/<run_id>.npz``, attention
weights to ``OUT.arrays/<run_id>.attention.npz`` (ragged weights stored flat with offsets).

A row (``schema`` 1; rows without ``schema`` were written before it) holds ``run_id``,
``store_identity``, ``subject`` (what it is about, copied from the store: ``model`` the label,
``family``, ``checkpoint``, ``revision``, ``manifest_sha256``, ``dataset`` and ``language``: the
probe's language filter, else the store's languages joined with ``+``), ``site_index`` (the
site's place in the store's forward order), ``config`` (the :class:`probing.run.ProbeConfig`, paths as
given), ``seed``, ``splits``, the scores (``f1_macro``, ``accuracy``, ``recall``; ``f1_s`` for
positional probes; ``applied_*`` and ``applied_to`` with its store's ``subject`` for ``apply_to``;
control and MDL keys where asked for; with ``config.split`` ``loso``, the scores pooled over the
folds and ``folds``, ``fold_accuracy_mean``: see :func:`probing.run._loso_run`) and the code's
``package_version`` and ``git_commit``. ``config.split`` is absent in rows written before it (``fixed``).
A row of an attribute task (``config.task`` ``attribute:NAME`` or ``attribute:NAME:A,B``) also holds
``classes`` (class 0 first; ``recall`` is keyed by them) and ``labels`` (the attribute, the manifest
read and its sha256, and ``unlabelled``: the utterances left out for want of a value), before its
scores; ``config.labels`` is there only where the manifest was named (:func:`probing.data.probe_metadata`).
A row from a store read incomplete on purpose (``config.allow_partial``, there only when true) holds
``partial``: ``{used, expected}`` utterances (``applied_partial`` for an incomplete ``apply_to`` store).

Concurrent writers: every append holds an exclusive ``flock`` on the file it appends to, so rows never
interleave, and first removes a last line cut by a killed writer, so the next row starts on a line of
its own (the cut run has no row: it is redone). Grid tasks running side by side (``experiments.probe
--executor``) append to their own file each, ``OUT.tasks/task-NNNNN.jsonl``; :func:`merge_task_results`
moves those rows into ``OUT``. The runs of one results or task file are computed by one process at a
time (:func:`probing.grid.run_all` claims it, :mod:`extract.claims`).
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from extract.appendlog import RowKind, drop_cut_line
from extract.errors import UserError
from extract.paths import canonical_path
from extract.records import ProbeRow, RecordError, iter_row_lines

if TYPE_CHECKING:  # importing probing.run loads torch and Lightning: a task that only appends rows needs neither
    from probing.run import ProbeConfig, ProbeResult


RESULT_ROWS = RowKind("result row", ("run_id",))


class ResultsError(UserError, ValueError):
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


def task_results_folder(out: str | Path) -> Path:
    """``OUT.tasks``: one results file per grid task running beside others, merged into ``out`` afterwards."""
    return Path(out).with_name(Path(out).name + ".tasks")


def task_results_file(out: str | Path, task: int) -> Path:
    return task_results_folder(out) / f"task-{task:05d}.jsonl"


@contextmanager
def _appending(path: Path) -> Iterator:
    """``path`` open for appending under an exclusive lock, a last line cut by a killed writer removed
    (under the lock every writer ends its lines, so a line without its end is a dead writer's). The
    lock is taken on the file that is at ``path`` once locked (a merge may have moved the old one away
    meanwhile), so no line is lost."""
    while True:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                if not path.exists() or os.fstat(handle.fileno()).st_ino != os.stat(path).st_ino:
                    continue  # merged and removed between open and lock: append to the new file instead
                drop_cut_line(path, RESULT_ROWS)
                yield handle
                return
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def append_lines(path: Path, lines: list[str]) -> None:
    """Appends whole lines under an exclusive lock on ``path`` (see :func:`_appending`)."""
    with _appending(path) as handle:
        handle.write("".join(line + "\n" for line in lines))
        handle.flush()


def drop_cut_result_line(path: Path) -> None:
    """Removes a last line of ``path`` cut by a killed writer, under the appenders' lock."""
    if path.exists():
        with _appending(path):
            pass


def save_result(result: ProbeResult, out: Path, arrays_to: Path | None = None) -> None:
    """Appends ``result``'s row to ``out`` (under a lock), after saving its arrays and attention weights
    under :func:`arrays_folder` of ``arrays_to`` (default ``out``: a grid task's file keeps its arrays
    with the final results file's)."""
    folder = arrays_folder(arrays_to or out)
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
    append_lines(Path(out), [json.dumps(result.row)])


def task_rows(out: str | Path) -> dict[str, dict]:
    """Rows of the task files of ``out`` not merged yet, by run id (the latest of each)."""
    rows = {}
    folder = task_results_folder(out)
    for path in sorted(folder.glob("task-*.jsonl")) if folder.is_dir() else []:
        rows |= load_rows(path)
    return rows


def merge_task_results(out: str | Path, remove_folder: bool = False) -> int:
    """Moves the rows of every task file into ``out`` (appended under ``out``'s lock; each task file is
    read and removed under its own lock, so a task still running loses nothing: its next row goes to a
    new file, merged next time). ``remove_folder``: also remove the emptied ``OUT.tasks`` (only once no
    task runs any more). Returns the number of rows merged."""
    out = Path(out)
    folder = task_results_folder(out)
    merged = 0
    for path in sorted(folder.glob("task-*.jsonl")) if folder.is_dir() else []:
        with path.open("r") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                drop_cut_line(path, RESULT_ROWS)  # the task that was writing it is dead: its cut run is redone
                lines = [line.rstrip("\n") for line in handle if line.strip()]
                load_rows(path)  # every line must be a row: a damaged task file is an error naming its line
                if lines:
                    append_lines(out, lines)
                merged += len(lines)
                path.unlink()
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
    if remove_folder and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
    return merged


def load_rows(out: str | Path) -> dict[str, dict]:
    """Result rows of a results file by run id, the latest row of each; a line that is not a
    result row raises :class:`ResultsError` naming ``file:line``."""
    return {run_id: row for run_id, (_, row) in load_numbered_rows(out).items()}


def load_numbered_rows(out: str | Path) -> dict[str, tuple[int, dict]]:
    """:func:`load_rows` with the line number of each row kept (for messages naming ``file:line``).
    Each row is read through its record (:class:`extract.records.ProbeRow`): a row without ``schema``
    reads as version 1, as it always did; one of a newer version than this code reads is a
    :class:`ResultsError` naming ``file:line``. The rows are returned as the file holds them."""
    return {run_id: (number, row) for run_id, (number, _, row) in _numbered_records(out).items()}


def load_records(out: str | Path) -> dict[str, ProbeRow]:
    """The rows of a results file as :class:`extract.records.ProbeRow` records, by run id (the latest
    of each; the reading rules of :func:`load_numbered_rows`)."""
    return {run_id: record for run_id, (_, record, _) in _numbered_records(out).items()}


def _numbered_records(out: str | Path) -> dict[str, tuple[int, ProbeRow, dict]]:
    rows = {}
    try:
        for number, line in iter_row_lines(out):
            where = f"{out}:{number}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise ResultsError(f"{where}: not a result row ({error!r}); move the file aside or fix that line") from error
            if not isinstance(row, dict) or "run_id" not in row:
                raise ResultsError(f"{where}: not a result row (no 'run_id'); move the file aside or fix that line")
            record = ProbeRow.from_dict(row, where)
            rows[record.run_id] = (number, record, row)
    except RecordError as error:
        raise ResultsError(str(error)) from None
    return rows


def finished_ids(configs: Iterable[ProbeConfig], rows: dict[str, dict]) -> set[str]:
    """Run ids of ``configs`` whose latest row in ``rows`` read the stores as they are now (same
    ``store_identity``): a rerun skips those and recomputes the others."""
    from probing.data import config_store_identity

    identities: dict[tuple, str] = {}
    finished = set()
    for config in configs:
        row = rows.get(config.run_id())
        if row is None:
            continue
        key = (canonical_path(config.store), canonical_path(config.apply_to) if config.apply_to else None)
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
    """(test ids, attention weights per test utterance, P(class 1) per test utterance) of an attention
    run; of three classes or more, every class's probability (``[N, K]``) instead of P(class 1)."""
    with np.load(arrays_folder(out) / f"{run_id}.attention.npz") as data:
        offsets, weights = data["offsets"], data["weights"]
        return [str(i) for i in data["ids"]], [weights[a:b] for a, b in zip(offsets[:-1], offsets[1:])], data["probabilities"]


def _class_names(row: dict) -> list[str]:
    """A row's class names, class 0 first: its ``classes`` (attribute tasks), else those of its gender task."""
    from probing.data import TASKS

    return row.get("classes") or list(TASKS.get((row.get("config") or {}).get("task"), TASKS["female-male"]))


def load_predictions(out: str | Path, run_id: str) -> dict[str, str]:
    """Utterance id -> predicted class of an attention run: on the ``--apply-to`` store where the run
    has one, else on its test split (class 1 where P(class 1) > 0.5; of three classes or more, whose
    probabilities are one row per utterance, the most probable). Classes are named as the applied
    arrays name them, else as the run's row does (``classes`` of an attribute task, else its gender task's)."""
    saved = arrays_folder(out) / f"{run_id}.npz"  # an attention run without --apply-to saves no arrays, its attention only
    arrays = load_arrays(out, run_id) if saved.exists() else {}
    classes = [str(c) for c in arrays.get("applied_class_names", _class_names(load_rows(out).get(run_id, {})))]
    if "applied_ids" in arrays:
        ids, probabilities = [str(i) for i in arrays["applied_ids"]], arrays["applied_probabilities"]
    else:
        ids, _, probabilities = load_attention(out, run_id)
    if np.ndim(probabilities) == 2:
        return {i: classes[int(np.argmax(p))] for i, p in zip(ids, probabilities)}
    return {i: classes[int(p > 0.5)] for i, p in zip(ids, probabilities)}
