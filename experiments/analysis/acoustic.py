"""Acoustic features per record (Attanasio et al. 2024, §5.1), with Praat through praat-parselmouth.

Features (``features`` of each row; a null has its reason in ``null_reasons``):

- ``f0_mean_hz``: mean F0 over the voiced frames of Praat's autocorrelation pitch (``To Pitch``,
  time step 10 ms), with the pitch floor and ceiling chosen per speaker by the two-pass rule of
  De Looze & Hirst (2008) that Hirst & de Looze (2021) recommend: a first pass with floor 60 Hz and
  ceiling 700 Hz over all of the speaker's records; then floor = 0.75 × q25 and ceiling = 1.5 × q75 of
  the pooled first-pass F0 values of that speaker (q25, q75: 25th and 75th percentiles, numpy's linear
  interpolation); the second pass over each record with that range gives its mean. A speaker whose
  records hold fewer than :data:`MIN_RANGE_FRAMES` voiced first-pass frames gets no range (null,
  reason given). ``range_by="record"`` applies the rule per record instead (for corpora without
  speaker ids, e.g. Fleurs before ``experiments.speakers``).
- ``intensity_mean_db``: Praat's ``Get mean`` of ``To Intensity`` (minimum pitch 100 Hz for every
  record, so that every voice is smoothed alike; mean subtracted), averaged in the energy domain
  (Praat's default), in dB re 2e-5 with the samples read as pascals: the samples are the file's
  floating-point values in [-1, 1], so the level is relative to full scale (a sine of RMS 1 is
  93.98 dB), comparable within a corpus whose recording levels are comparable, not an SPL. A record
  with no energy once the mean is subtracted (a constant, DC waveform) gets null, not Praat's
  -300 dB floor.
- ``rate_tokens_per_second``: Whisper-tokenizer tokens of the reference text per second of speech
  (the paper's approximation: "no reliable multilingual tools for syllable segmentation"); tokens as
  ``experiments.dataset_stats`` counts them. Seconds of speech from silero-vad
  (``experiments.scoring.vad``), or the whole clip (``speech="duration"``).
- ``rate_nuclei_per_second``: syllable nuclei per second of speech, language-independent and
  approximate (De Jong & Wempe 2009, simplified): peaks of Praat's intensity (minimum pitch 50 Hz)
  that are local maxima above a threshold of the 99th intensity percentile minus 25 dB, that stand
  at least 2 dB above the lowest intensity between them and the next peak (the end of the record for
  the last one), and that fall in a voiced frame of the second-pass pitch. A nucleus count approximates
  syllables; it misses syllables without an intensity dip (vowel sequences) and counts loud voiced
  consonants.

Audio is the first 30 s (``extract.audio.MAX_SECONDS["asr"]``), as the ASR models see it.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from experiments.analysis.contrasts import feature_row_identity
from extract.appendlog import AppendLog, RowKind
from extract.audio import MAX_SECONDS, SAMPLE_RATE, AudioError, asr_samples
from extract.errors import UserError
from extract.manifest import Utterance

FIRST_PASS_FLOOR_HZ, FIRST_PASS_CEILING_HZ = 60.0, 700.0
FLOOR_FACTOR, CEILING_FACTOR = 0.75, 1.5  # floor = 0.75 q25, ceiling = 1.5 q75 (De Looze & Hirst 2008)
MIN_RANGE_FRAMES = 20  # voiced first-pass frames a speaker's range needs (0.2 s of voicing)
PITCH_TIME_STEP = 0.01
INTENSITY_MIN_PITCH_HZ = 100.0
PRAAT_INTENSITY_FLOOR_DB = -300.0  # what Praat's intensity reports for zero energy: a floor, not a level
MIN_SECONDS = 0.1  # shorter records get null features: too short for Praat's pitch window at the first-pass floor
NUCLEI_MIN_PITCH_HZ = 50.0
NUCLEI_SILENCE_DB = -25.0
NUCLEI_MIN_DIP_DB = 2.0
SPEECH_SOURCES = ("vad", "duration")
RANGE_BY = ("speaker", "record")
FEATURES = ("f0_mean_hz", "intensity_mean_db", "rate_tokens_per_second", "rate_nuclei_per_second")


@dataclass(frozen=True)
class PitchRange:
    floor: float
    ceiling: float
    frames: int  # voiced first-pass frames it rests on


def pitch_values(samples: np.ndarray, floor: float, ceiling: float):
    """(Praat Pitch object, F0 per frame in Hz with 0 for unvoiced frames)."""
    import parselmouth

    pitch = parselmouth.Sound(samples.astype(np.float64), sampling_frequency=SAMPLE_RATE).to_pitch(
        time_step=PITCH_TIME_STEP, pitch_floor=floor, pitch_ceiling=ceiling
    )
    return pitch, pitch.selected_array["frequency"]


def first_pass_f0(samples: np.ndarray) -> np.ndarray:
    """Voiced F0 values (Hz) of the first pass, 60-700 Hz."""
    _, frequencies = pitch_values(samples, FIRST_PASS_FLOOR_HZ, FIRST_PASS_CEILING_HZ)
    return frequencies[frequencies > 0]


def pitch_range(first_pass: np.ndarray) -> PitchRange | None:
    """The speaker's floor and ceiling from its pooled first-pass values, or None below :data:`MIN_RANGE_FRAMES`."""
    first_pass = np.asarray(first_pass, dtype=float)
    if len(first_pass) < MIN_RANGE_FRAMES:
        return None
    q25, q75 = np.percentile(first_pass, [25, 75])
    return PitchRange(FLOOR_FACTOR * float(q25), CEILING_FACTOR * float(q75), int(len(first_pass)))


def mean_intensity_db(samples: np.ndarray) -> float:
    """Praat's mean intensity (energy averaging), dB re 2e-5 with the samples as pascals."""
    import parselmouth
    from parselmouth.praat import call

    intensity = parselmouth.Sound(samples.astype(np.float64), sampling_frequency=SAMPLE_RATE).to_intensity(minimum_pitch=INTENSITY_MIN_PITCH_HZ)
    return float(call(intensity, "Get mean", 0, 0, "energy"))


def syllable_nuclei(samples: np.ndarray, pitch) -> int:
    """Voiced intensity peaks standing out by a dip (see the module docstring)."""
    import parselmouth

    intensity = parselmouth.Sound(samples.astype(np.float64), sampling_frequency=SAMPLE_RATE).to_intensity(minimum_pitch=NUCLEI_MIN_PITCH_HZ)
    values, times = intensity.values[0], intensity.xs()
    if len(values) < 3:
        return 0
    threshold = max(float(np.percentile(values, 99)) + NUCLEI_SILENCE_DB, float(values.min()))
    inner = np.arange(1, len(values) - 1)
    peaks = inner[(values[inner] > values[inner - 1]) & (values[inner] >= values[inner + 1]) & (values[inner] > threshold)]
    count = 0
    for index, peak in enumerate(peaks):
        following = peaks[index + 1] if index + 1 < len(peaks) else len(values) - 1
        dip = float(values[peak : following + 1].min())
        if values[peak] - dip >= NUCLEI_MIN_DIP_DB and math.isfinite(pitch.get_value_at_time(float(times[peak]))):
            count += 1
    return count


def rate(count: float, speech_seconds: float) -> float:
    """Units (tokens, nuclei) per second of speech."""
    if speech_seconds <= 0:
        raise ValueError("no speech to divide by")
    return float(count) / float(speech_seconds)


SpeechDetector = Callable[[np.ndarray], float]


@dataclass(frozen=True)
class Job:
    """What a worker needs for one record (plain data: it crosses process boundaries)."""

    id: str
    audio: str
    offset: float | None
    duration: float | None
    tokens: int = 0
    floor: float | None = None  # the second pass's range; None: the range is missing (``range_reason``)
    ceiling: float | None = None
    range_reason: str = ""


def first_pass_job(job: Job) -> tuple[str, np.ndarray]:
    """(id, voiced first-pass F0 values); unreadable or too short audio gives none."""
    try:
        samples = asr_samples(job)
    except AudioError:
        return job.id, np.zeros(0)
    if len(samples) < MIN_SECONDS * SAMPLE_RATE:
        return job.id, np.zeros(0)
    return job.id, first_pass_f0(samples)


_DETECTOR: SpeechDetector | None = None


def _end_with_parent(parent_alive) -> None:
    """Wait until every writing end of ``parent_alive`` is closed, which happens when the process that
    made the pool ends in any way (exit, SIGTERM, SIGKILL), then end this worker at once."""
    try:
        parent_alive.recv_bytes()
    except (EOFError, OSError):
        pass
    os._exit(1)


def init_worker(speech: str, single_thread: bool = True, parent_alive=None) -> None:
    """Per process: the speech detector (silero-vad) loaded once, torch on one thread in a pool's
    process; with ``parent_alive`` (the reading end of a pipe whose writing end only the pool's
    owner holds), a thread that ends the worker when the owner is gone (:func:`_end_with_parent`)."""
    global _DETECTOR
    if parent_alive is not None:
        threading.Thread(target=_end_with_parent, args=(parent_alive,), name="end-with-parent", daemon=True).start()
    if speech == "vad":
        import torch

        from experiments.scoring.vad import silero_detector

        if single_thread:
            torch.set_num_threads(1)
        _DETECTOR = silero_detector()
    else:
        _DETECTOR = None


def _speech_seconds(samples: np.ndarray) -> float:
    return len(samples) / SAMPLE_RATE if _DETECTOR is None else float(_DETECTOR(samples))


def second_pass_job(job: Job) -> dict:
    """The ``features``, ``null_reasons`` and ``details`` of one record (needs :func:`init_worker` first);
    a record Praat fails on gets nulls with Praat's message rather than stopping the run."""
    import parselmouth

    try:
        return _second_pass(job)
    except parselmouth.PraatError as error:
        message = str(error).strip().splitlines()[0] if str(error).strip() else "PraatError"
        return {"features": dict.fromkeys(FEATURES), "null_reasons": dict.fromkeys(FEATURES, f"Praat failed: {message}"), "details": {"tokens": job.tokens}}


def _second_pass(job: Job) -> dict:
    features = dict.fromkeys(FEATURES)
    details = {"seconds": None, "speech_seconds": None, "tokens": job.tokens, "f0_floor_hz": job.floor, "f0_ceiling_hz": job.ceiling}
    try:
        samples = asr_samples(job)
    except AudioError as error:
        return {
            "features": features,
            "null_reasons": dict.fromkeys(FEATURES, f"no usable audio ({type(error).__name__}: {error.problem})"),
            "details": details,
        }
    details["seconds"] = round(len(samples) / SAMPLE_RATE, 4)
    if len(samples) < MIN_SECONDS * SAMPLE_RATE:
        return {"features": features, "null_reasons": dict.fromkeys(FEATURES, f"too short ({details['seconds']} s < {MIN_SECONDS} s)"), "details": details}
    reasons = {}
    intensity = mean_intensity_db(samples)
    if math.isnan(intensity):
        reasons["intensity_mean_db"] = "Praat's mean intensity is undefined"
    elif intensity <= PRAAT_INTENSITY_FLOOR_DB:
        reasons["intensity_mean_db"] = f"no energy once the mean is subtracted (a constant waveform): Praat's {PRAAT_INTENSITY_FLOOR_DB:g} dB floor, no level"
    else:
        features["intensity_mean_db"] = intensity
    speech_seconds = _speech_seconds(samples)
    details["speech_seconds"] = round(speech_seconds, 4)
    if speech_seconds <= 0:
        reasons["rate_tokens_per_second"] = "no speech detected"
    elif job.tokens == 0:
        reasons["rate_tokens_per_second"] = "empty reference text (0 tokens)"
    else:
        features["rate_tokens_per_second"] = rate(job.tokens, speech_seconds)
    if job.floor is None:
        reasons["f0_mean_hz"] = reasons["rate_nuclei_per_second"] = job.range_reason
        return {"features": features, "null_reasons": reasons, "details": details}
    pitch, frequencies = pitch_values(samples, job.floor, job.ceiling)
    voiced = frequencies[frequencies > 0]
    details["voiced_frames"] = int(len(voiced))
    if len(voiced) == 0:
        reasons["f0_mean_hz"] = reasons["rate_nuclei_per_second"] = "unvoiced (no voiced frame in the speaker's pitch range)"
        return {"features": features, "null_reasons": reasons, "details": details}
    features["f0_mean_hz"] = float(voiced.mean())
    details["syllable_nuclei"] = syllable_nuclei(samples, pitch)
    if speech_seconds > 0:
        features["rate_nuclei_per_second"] = rate(details["syllable_nuclei"], speech_seconds)
    else:
        reasons["rate_nuclei_per_second"] = "no speech detected"
    return {"features": features, "null_reasons": reasons, "details": details}


def range_key(utterance: Utterance, range_by: str) -> str:
    return utterance.speaker if range_by == "speaker" else utterance.id


def speaker_ranges(first_pass: dict[str, np.ndarray], keys: dict[str, str]) -> dict[str, dict]:
    """Per range key (speaker or record): ``{"floor", "ceiling", "frames"}`` or ``{"reason"}``,
    from the first-pass values of its records (``keys``: record id -> range key)."""
    pooled: dict[str, list[np.ndarray]] = {}
    for record_id, values in first_pass.items():
        pooled.setdefault(keys[record_id], []).append(values)
    ranges = {}
    for key, parts in pooled.items():
        values = np.concatenate(parts)
        found = pitch_range(values)
        ranges[key] = asdict(found) if found else {"reason": f"too few voiced frames for a pitch range ({len(values)} < {MIN_RANGE_FRAMES} at 60-700 Hz)"}
    return ranges


def pitch_range_settings(range_by: str) -> dict:
    """The settings of the two-pass pitch range, shared by the acoustic features and the F0 store."""
    return {
        "first_pass_hz": [FIRST_PASS_FLOOR_HZ, FIRST_PASS_CEILING_HZ],
        "range_rule": f"floor = {FLOOR_FACTOR} q25, ceiling = {CEILING_FACTOR} q75 of the pooled first-pass F0 (De Looze & Hirst 2008)",
        "range_by": range_by,
        "min_range_frames": MIN_RANGE_FRAMES,
        "pitch_time_step": PITCH_TIME_STEP,
    }


def settings(speech: str, range_by: str, tokenizer: str) -> dict:
    """Everything that changes a value; a resumed output must have been written with the same."""
    return {
        **pitch_range_settings(range_by),
        "intensity_min_pitch_hz": INTENSITY_MIN_PITCH_HZ,
        "intensity_averaging": "energy",
        "speech_seconds": "silero-vad" if speech == "vad" else "clip duration",
        "tokenizer": tokenizer,
        "nuclei": {"min_pitch_hz": NUCLEI_MIN_PITCH_HZ, "silence_db": NUCLEI_SILENCE_DB, "min_dip_db": NUCLEI_MIN_DIP_DB},
        "max_seconds": MAX_SECONDS["asr"],
        "min_seconds": MIN_SECONDS,
    }


def row(utterance: Utterance, result: dict) -> dict:
    return {**feature_row_identity(utterance), **result}


def null_counts(rows: Iterable[dict]) -> dict[str, dict[str, int]]:
    """feature -> reason -> records."""
    counts: dict[str, dict[str, int]] = {}
    for record in rows:
        for feature, reason in record.get("null_reasons", {}).items():
            counts.setdefault(feature, {}).setdefault(reason, 0)
            counts[feature][reason] += 1
    return counts


class AcousticError(UserError, ValueError):
    """An output written with other settings, or a manifest that cannot be analysed."""


@contextmanager
def _runner(workers: int, speech: str):
    """``run(function, jobs, description, show_progress)`` yielding ``(job, result)`` as they finish:
    in this process for one worker, else in one pool for both passes, its processes started by a
    fork server (a fresh process that imports the caller's main module once: nothing forked from a
    parent whose torch threads are running), each with its own detector loaded once.

    A pool's workers end with this process, however it ends. Left alone they would not: a killed
    parent never tells them to stop, each holds a writing end of its own task queue (so it never
    reads end-of-file there) and the fork server stays for as long as they live. So this process
    keeps the only writing end of a pipe whose reading end every worker watches: SIGTERM or SIGKILL
    closes it and the workers exit (after the Praat call under way, which holds the interpreter for
    at most one record), then the fork server and the resource tracker, whose last users they were."""
    from tqdm.auto import tqdm

    def progress(pairs, total: int, description: str, show_progress: bool):
        with tqdm(total=total, desc=description, unit="rec", disable=not show_progress) as bar:
            for pair in pairs:
                yield pair
                bar.update()

    if workers <= 1:
        init_worker(speech, single_thread=False)  # this process's torch threads stay as the caller set them
        yield lambda function, jobs, description, show: progress(((job, function(job)) for job in jobs), len(jobs), description, show)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    context = multiprocessing.get_context("forkserver")
    parent_alive, alive = context.Pipe(duplex=False)  # the workers get the reading end; only this process holds the writing one
    try:
        with ProcessPoolExecutor(workers, mp_context=context, initializer=init_worker, initargs=(speech, True, parent_alive)) as pool:

            def run(function, jobs, description, show):
                futures = {pool.submit(function, job): job for job in jobs}
                return progress(((futures[future], future.result()) for future in as_completed(futures)), len(jobs), description, show)

            yield run
    finally:
        alive.close()
        parent_alive.close()


FEATURE_ROWS = RowKind("feature row", ("id", "features"), unique="id")


def side_files(out: Path) -> list[Path]:
    """``OUT.ranges.json`` (pitch ranges and settings) and ``OUT.summary.json``, written beside ``out``."""
    return [out.with_suffix(".ranges.json"), out.with_suffix(".summary.json")]


def compute_acoustics(
    utterances: list[Utterance],
    out,
    count_tokens: Callable[[str], int],
    tokenizer: str,
    speech: str = "vad",
    range_by: str = "speaker",
    workers: int = 1,
    show_progress: bool = True,
    reclaim_stale: bool = False,
) -> dict:
    """Write one row per record to ``out`` (JSONL, appended as records finish, resumable by id;
    one writer: :class:`extract.appendlog.AppendLog`, ``reclaim_stale`` takes over the claim of a
    killed run), the pitch ranges and settings to ``OUT.ranges.json``, and return the summary (also
    written to ``OUT.summary.json``): records done now and before, and the nulls per feature and reason."""
    import json

    if speech not in SPEECH_SOURCES:
        raise AcousticError(f"speech seconds from {speech!r}: expected one of {', '.join(SPEECH_SOURCES)}")
    if range_by not in RANGE_BY:
        raise AcousticError(f"pitch range by {range_by!r}: expected one of {', '.join(RANGE_BY)}")
    out = Path(out)
    ranges_path, summary_path = side_files(out)
    wanted = settings(speech, range_by, tokenizer)
    with AppendLog(out, FEATURE_ROWS, reclaim_stale) as features:
        done = {record["id"]: record for record in features.rows}
        stored = json.loads(ranges_path.read_text()) if ranges_path.exists() else {"settings": wanted, "ranges": {}}
        if stored["settings"] != wanted:
            if done:
                changed = sorted(k for k in wanted if stored["settings"].get(k) != wanted[k])
                raise AcousticError(f"{out} was written with other settings ({', '.join(changed)}); write to a new --out or delete it")
            stored = {"settings": wanted, "ranges": {}}  # nothing written with the old settings: their ranges are not reused
        known = {u.id for u in utterances}
        stale = sorted(set(done) - known)
        if stale:
            raise AcousticError(f"{out} holds {len(stale)} id(s) that are not in the manifest, e.g. {stale[:3]}; write to a new --out")
        todo = [u for u in utterances if u.id not in done]
        keys = {u.id: range_key(u, range_by) for u in utterances}
        needed = {keys[u.id] for u in todo} - set(stored["ranges"])
        first = [Job(u.id, u.audio, u.offset, u.duration) for u in utterances if keys[u.id] in needed]
        if todo:
            with _runner(workers, speech) as run:
                if first:
                    values = dict(result for _, result in run(first_pass_job, first, "pitch range (first pass)", show_progress))
                    stored["ranges"] |= speaker_ranges(values, keys)
                    stored["settings"] = wanted
                    ranges_path.write_text(json.dumps(stored, indent=1))
                jobs = []
                for u in todo:
                    found = stored["ranges"][keys[u.id]]
                    tokens = count_tokens(u.text or "")
                    jobs.append(Job(u.id, u.audio, u.offset, u.duration, tokens, found.get("floor"), found.get("ceiling"), found.get("reason", "")))
                by_id = {u.id: u for u in todo}
                for job, result in run(second_pass_job, jobs, "acoustic features", show_progress):
                    features.append([row(by_id[job.id], result)])
        rows = {record["id"]: record for record in features.rows}
        summary = {"records": len(rows), "computed_now": len(todo), "resumed": len(done), "nulls": null_counts(rows.values()), "settings": wanted}
        summary_path.write_text(json.dumps(summary, indent=1, ensure_ascii=False))
    return summary
