"""GRAFN over a manifest: calibration from its audio, and normalised audio plus a manifest with the
same ids and metadata, so that extraction, transcription, gaps and probes run on it unchanged.

Which filter an utterance gets (``mode``):

- ``gender``: its label's filter (the paper's setting); an utterance without a binary label is
  passed through unchanged (its row points at the original audio) and counted;
- ``predicted``: the filter of the gender a pitch rule predicts (median F0 at or above the
  calibrated threshold: female), no label read; an utterance with no voiced frame is passed through;
- ``utterance``: a filter from the utterance's own spectrum toward the neutral target, no label read.

In every mode a waveform that step 1 cannot normalise (a constant or one-sample file) is passed
through unchanged and counted, as calibration skips and lists it.

The output audio is float WAV (the transform's output is not confined to 16-bit range). A run
records its settings in ``AUDIO_DIR/grafn-apply.json`` and each finished id in
``AUDIO_DIR/grafn-done.jsonl``: a rerun skips finished ids and refuses other filters, mode or manifest.
One run writes to an audio folder at a time: the done-list is claimed (:class:`extract.appendlog.AppendLog`),
and a record cut by a kill is dropped and its utterance redone.
"""

from __future__ import annotations

import io
import json
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from experiments.normalisation.calibration import fit_filters, utterance_gain
from experiments.normalisation.filters import GROUPS, GrafnFilters, load_filters
from experiments.normalisation.transform import GrafnError, GrafnParameters, grafn, normalisation_problem
from experiments.recipes.democorpus.pitch import median_f0
from extract.appendlog import AppendLog, RowKind
from extract.audio import SAMPLE_RATE, AudioError, load_audio
from extract.diskfull import naming_full_disk
from extract.manifest import Utterance, read_manifest, write_manifest
from extract.paths import id_file_name
from extract.provenance import file_sha256

MODES = ("gender", "predicted", "utterance")
SETTINGS_FILE = "grafn-apply.json"
DONE_FILE = "grafn-done.jsonl"
KEPT_ON_FAILURE = "the utterances normalised so far are kept and the rerun continues after them"
DONE_ROWS = RowKind("GRAFN done record", ("id", "file", "grafn"))


def run_files(audio_dir: Path) -> list[Path]:
    """The files an ``apply`` run keeps in its audio folder besides the audio: settings and done-list."""
    return [audio_dir / SETTINGS_FILE, audio_dir / DONE_FILE]


@dataclass(frozen=True)
class Choice:
    """The filter chosen for one utterance: ``gain_db`` None passes it through unchanged (``reason`` says why)."""

    gain_db: np.ndarray | None
    filter: str | None
    reason: str | None = None
    f0_hz: float | None = None

    def record(self, mode: str) -> dict:
        record = {"mode": mode, "filter": self.filter}
        if self.reason:
            record["reason"] = self.reason
        if self.f0_hz is not None:
            record["f0_hz"] = round(self.f0_hz, 2)
        return record


def check_mode(filters: GrafnFilters, mode: str) -> None:
    if mode not in MODES:
        raise GrafnError(f"mode {mode!r}: expected one of {', '.join(MODES)}")
    if mode == "predicted" and filters.pitch_threshold_hz is None:
        raise GrafnError("these filters have no pitch threshold (a calibration group had no voiced utterance): use --by gender or utterance")


def predicted_gender(samples: np.ndarray, filters: GrafnFilters) -> tuple[str | None, float]:
    """The pitch rule: ``female`` when the median F0 is at or above the calibrated threshold, else
    ``male``; None when no frame is voiced. Returns the F0 too (NaN when unvoiced)."""
    check_mode(filters, "predicted")
    f0 = median_f0(np.asarray(samples, dtype=np.float64), filters.params.sample_rate)
    if not np.isfinite(f0):
        return None, f0
    return ("female" if f0 >= filters.pitch_threshold_hz else "male"), f0


def choose_filter(filters: GrafnFilters, mode: str, gender: str, samples: np.ndarray) -> Choice:
    problem = normalisation_problem(samples, filters.params)
    if problem:
        return Choice(None, None, problem)
    if mode == "gender":
        if gender not in GROUPS:
            return Choice(None, None, f"gender label {gender!r} is not binary")
        return Choice(filters.gain(gender), gender)
    if mode == "predicted":
        predicted, f0 = predicted_gender(samples, filters)
        if predicted is None:
            return Choice(None, None, "no voiced frame for the pitch rule")
        return Choice(filters.gain(predicted), predicted, f0_hz=f0)
    if mode == "utterance":
        return Choice(utterance_gain(samples, filters), "utterance")
    raise GrafnError(f"mode {mode!r}: expected one of {', '.join(MODES)}")


def normalise_samples(filters: GrafnFilters, mode: str, gender: str, samples: np.ndarray) -> tuple[np.ndarray, Choice]:
    """One utterance through GRAFN in ``mode`` (the fine-tuning front end calls this too); a
    passed-through utterance comes back unchanged."""
    choice = choose_filter(filters, mode, gender, samples)
    if choice.gain_db is None:
        return samples, choice
    return grafn(samples, choice.gain_db, filters.params), choice


def output_name(identifier: str) -> str:
    """A file name for an id (:func:`extract.paths.id_file_name`: ids may hold slashes, or differ only in them)."""
    return id_file_name(identifier, ".wav")


def _write_wav(path: Path, samples: np.ndarray) -> None:
    """``samples`` as a float WAV at ``path``, through a temporary file. Encoded in memory first, so
    a full disk is Python's error naming the file (libsndfile reports it as "System error."), and
    the partial temporary file is removed."""
    import soundfile

    encoded = io.BytesIO()
    soundfile.write(encoded, samples, SAMPLE_RATE, subtype="FLOAT", format="WAV")
    temporary = path.with_name(path.name + ".tmp")
    try:
        with naming_full_disk(path, KEPT_ON_FAILURE):
            temporary.write_bytes(encoded.getvalue())
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    temporary.replace(path)


def _load(utterance: Utterance) -> np.ndarray:
    return load_audio(utterance.audio, utterance.offset, utterance.duration).samples


def calibration_items(utterances: list[Utterance], params: GrafnParameters, skipped: list[dict], progress=None) -> Iterator[tuple[str, str, np.ndarray]]:
    """``(gender, speaker, samples)`` of each utterance whose audio loads and can be normalised (not a
    constant waveform); the others go to ``skipped``."""
    for utterance in utterances:
        try:
            samples = _load(utterance)
        except AudioError as error:
            skipped.append({"id": utterance.id, "problem": str(error)})
            continue
        finally:
            if progress is not None:
                progress.update(1)
        problem = normalisation_problem(samples, params)
        if problem:
            skipped.append({"id": utterance.id, "problem": f"{utterance.audio}: {problem}"})
            continue
        yield utterance.gender, utterance.speaker, samples


def fit_from_manifest(
    manifest: Path, params: GrafnParameters, split: str | None = None, per_gender: int | None = None, show_progress: bool = True
) -> tuple[GrafnFilters, list[dict]]:
    """Calibrate on a manifest (only its ``split`` rows when given; at most ``per_gender`` female and
    as many male utterances, a seeded sample, when given); returns the filters and the utterances
    skipped for bad audio."""
    from tqdm import tqdm

    utterances = read_manifest(manifest)
    if split is not None:
        utterances = [u for u in utterances if u.split == split]
        if not utterances:
            raise GrafnError(f"{manifest}: no utterance in split {split!r}")
    if per_gender is not None:
        if per_gender < 1:
            raise GrafnError(f"--per-gender must be at least 1, got {per_gender}")
        order = np.random.default_rng(0).permutation(len(utterances))
        kept = {group: [i for i in order if utterances[i].gender == group][:per_gender] for group in GROUPS}
        utterances = [utterances[i] for i in sorted(kept["female"] + kept["male"])]
    skipped: list[dict] = []
    with tqdm(total=len(utterances), desc="GRAFN calibration", unit="utt", disable=not show_progress) as bar:
        filters = fit_filters(calibration_items(utterances, params, skipped, bar), params, source=str(manifest))
    filters.calibration |= {"split": split, "per_gender": per_gender, "skipped_bad_audio": skipped}
    return filters, skipped


@dataclass
class ApplyReport:
    total: int
    resumed: int  # finished by an earlier run
    by_filter: Counter  # utterances per filter (female, male, utterance), this run and earlier ones
    passed_through: dict[str, list[str]] = field(default_factory=dict)  # reason -> ids left unchanged
    bad_audio: list[dict] = field(default_factory=list)  # ids whose audio did not load (rows point at the original; a rerun retries)
    out: Path | None = None

    @property
    def normalised(self) -> int:
        return sum(self.by_filter.values())


def _check_settings(audio_dir: Path, settings: dict) -> None:
    path = audio_dir / SETTINGS_FILE
    if path.exists():
        stored = json.loads(path.read_text(encoding="utf-8"))
        differing = sorted(key for key in set(stored) | set(settings) if stored.get(key) != settings.get(key))
        if differing:
            raise GrafnError(
                f"{audio_dir} holds audio normalised with other settings ({', '.join(f'{k}: {stored.get(k)!r} vs {settings.get(k)!r}' for k in differing)}); "
                "use a new --audio-dir"
            )
        return
    path.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")


def _finished(audio_dir: Path, records: list[dict]) -> dict[str, dict]:
    """The done records whose audio is in ``audio_dir`` (or that passed the utterance through), by id."""
    return {record["id"]: record for record in records if record["file"] is None or (audio_dir / record["file"]).is_file()}


def _relative(path: str | Path, folder: Path) -> str:
    return os.path.relpath(Path(path).resolve(), folder.resolve())


def apply_to_manifest(
    filters_path: Path, manifest: Path, audio_dir: Path, out: Path, mode: str = "gender", show_progress: bool = True, reclaim_stale: bool = False
) -> ApplyReport:
    """Normalise every utterance of ``manifest`` into ``audio_dir`` and write the manifest ``out``
    (same ids, order and metadata; ``extra.grafn`` records the filter; audio paths relative to ``out``).
    ``reclaim_stale``: take over the claim a killed run left on the folder's done-list."""
    from tqdm import tqdm

    filters = load_filters(filters_path)
    check_mode(filters, mode)
    utterances = read_manifest(manifest)
    audio_dir.mkdir(parents=True, exist_ok=True)
    with (
        naming_full_disk(audio_dir / DONE_FILE, KEPT_ON_FAILURE),
        AppendLog(audio_dir / DONE_FILE, DONE_ROWS, reclaim_stale) as log,  # one run per audio folder; a cut record is redone
    ):
        _check_settings(audio_dir, {"filters_sha256": file_sha256(filters_path), "mode": mode, "manifest": str(Path(manifest).resolve())})
        done = _finished(audio_dir, log.rows)
        report = ApplyReport(total=len(utterances), resumed=sum(u.id in done for u in utterances), by_filter=Counter())
        for utterance in tqdm(utterances, desc=f"GRAFN ({mode})", unit="utt", disable=not show_progress):
            if utterance.id in done:
                continue
            try:
                samples = _load(utterance)
            except AudioError as error:
                report.bad_audio.append({"id": utterance.id, "problem": str(error)})
                continue
            try:
                normalised, choice = normalise_samples(filters, mode, utterance.gender, samples)
            except GrafnError as error:
                raise GrafnError(f"{manifest}: utterance {utterance.id}: {error}") from None
            record = {"id": utterance.id, "file": None, "grafn": choice.record(mode)}
            if choice.gain_db is not None:
                record["file"] = output_name(utterance.id)
                _write_wav(audio_dir / record["file"], normalised)
                record["seconds"] = len(samples) / SAMPLE_RATE
            log.append([record])
            done[utterance.id] = record
    rows = []
    bad = {entry["id"]: entry["problem"] for entry in report.bad_audio}
    for utterance in utterances:
        record = done.get(utterance.id)
        if record is None or record["file"] is None:
            if record is None:
                grafn = {"mode": mode, "filter": None, "reason": f"audio error: {bad[utterance.id]}"}
            else:
                grafn = record["grafn"]
                report.passed_through.setdefault(grafn["reason"], []).append(utterance.id)
            rows.append(replace(utterance, audio=_relative(utterance.audio, out.parent), extra=utterance.extra | {"grafn": grafn}))
            continue
        report.by_filter[record["grafn"]["filter"]] += 1
        audio = _relative(audio_dir / record["file"], out.parent)
        rows.append(replace(utterance, audio=audio, offset=None, duration=record["seconds"], extra=utterance.extra | {"grafn": record["grafn"]}))
    report.out = write_manifest(out, rows)
    return report
