"""The per-gender validation callback: WER per gender, E, Δrel and the absolute gap with the package's
scorers (``experiments.scoring``), logged through Lightning's loggers at every validation and
appended to a JSONL history that survives a resumed run (one writer, a record cut by a kill
dropped before the next is appended: :func:`history_log`).

E is the full-set estimate, named as in ``experiments.asr_gap``'s report (``gap_relative_full``, not
the resampled ``gap_relative`` the gap tables show by default): validation has no resampling."""

from __future__ import annotations

import json
from pathlib import Path

from experiments.scoring.asr_metrics import Scoring
from experiments.scoring.gaps import error_rate_frame, finite_or_null, full_set_gaps, utterance_counts
from extract.appendlog import AppendLog, RowKind
from probing.lightning_import import L

GROUPS = ("female", "male")
GAP_KEYS = ("gap_relative_full", "gap_absolute", "delta_rel")  # experiments.scoring.gaps.full_set_gaps
ALIASES = {"E": "gap_relative_full", "gap_abs": "gap_absolute"}  # the tracker's first names, still in histories and logs
HISTORY_ROWS = RowKind("validation record", ("step", "epoch"))


def history_log(path: Path, reclaim_stale: bool = False) -> AppendLog:
    """The history file opened for one writer (:class:`extract.appendlog.AppendLog`): claimed
    (``reclaim_stale`` takes over the claim of a killed run), a record cut by a kill removed."""
    return AppendLog(path, HISTORY_ROWS, reclaim_stale)


def gender_metrics(rows: list[dict], scoring: Scoring | None = None) -> dict[str, float]:
    """From hypothesis rows (id, reference, hypothesis, gender, speaker, language): the corpus WER
    overall and per gender, and the gap module's full-set gaps (:func:`~experiments.scoring.gaps.full_set_gaps`):
    E(F, M) on all rows (Attanasio et al. 2024), the absolute gap WER_F − WER_M (GRAFN's eq. 5) and
    Δrel (Boito et al. 2022), in percent, with their aliases ``E`` and ``gap_abs``. Each language is
    normalised by its own rules and the counts pooled. A missing group leaves its WER and the gaps
    NaN; E is undefined when the male group makes no error (infinite, or NaN when neither group
    errs; null in the history either way)."""
    scoring = scoring or Scoring()
    counts = []
    for language in sorted({row["language"] for row in rows}):
        counts.extend(utterance_counts([row for row in rows if row["language"] == language], language, scoring)[0])
    frame = error_rate_frame(counts, GROUPS)
    metrics = {"wer": frame.overall if counts else float("nan")}
    for group in GROUPS:
        metrics[f"wer_{group}"] = frame.evaluate(group) if group in frame.present else float("nan")
        metrics[f"utterances_{group}"] = float(len(frame.members(group)))
    gaps = dict.fromkeys(GAP_KEYS, float("nan")) if frame.missing else full_set_gaps(frame, *GROUPS)
    return metrics | gaps | {alias: gaps[name] for alias, name in ALIASES.items()}


class GenderGapTracker(L.Callback):
    """Collects the validation steps' hypothesis rows (``outputs["rows"]``) and, at the end of each
    validation, logs ``val/wer``, ``val/wer_female``, ``val/wer_male``, ``val/gap_relative_full``,
    ``val/gap_absolute``, ``val/delta_rel`` (and the aliases ``val/E``, ``val/gap_abs``) and appends
    them, with the step, to ``history`` (an open :func:`history_log`; an undefined E is null)."""

    def __init__(self, history: AppendLog, scoring: Scoring | None = None):
        self.history, self.scoring = history, scoring or Scoring()
        self.rows: list[dict] = []

    def on_validation_epoch_start(self, trainer, pl_module) -> None:
        self.rows = []

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        self.rows.extend(outputs["rows"])

    def on_validation_epoch_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking or not self.rows:
            return
        metrics = gender_metrics(self.rows, self.scoring)
        pl_module.log_dict({f"val/{name}": float(value) for name, value in metrics.items()})
        record = {"step": int(trainer.global_step), "epoch": int(trainer.current_epoch)} | finite_or_null({k: float(v) for k, v in metrics.items()})
        if not any(row["step"] == record["step"] for row in self.history.rows):  # a run killed between this record and its checkpoint validates the step again
            self.history.append([record])


def read_history(path: Path) -> list[dict]:
    """The validations recorded so far (a line cut short by a kill is ignored)."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records
