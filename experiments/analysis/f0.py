"""The F0-only baseline of the gender probes: per-utterance F0 statistics written as a store.

A probe on a model's hidden states reads gender; F0 alone reads much of it before any model hears
the audio (issue 23 measured 0.953 leave-one-speaker-out accuracy on real voices). So F0 is probed
beside the hidden states, by the same code: each utterance becomes one frame of three numbers at the
site ``f0`` of a store (:data:`F0_FEATURES`): the natural log of its median F0, and the mean and
standard deviation of ln F0 over its voiced frames. The frames come from Praat's pitch (through
:mod:`experiments.analysis.acoustic`): a first pass at 60-700 Hz gives each speaker's range by the
rule of De Looze & Hirst (2008), or each record's with ``range_by="record"``; the second pass, in
that range, gives the voiced frames. The range uses the audio only, never the gender label, and a
speaker's range only that speaker's audio, so a held-out speaker's features know nothing of the
others. ``experiments.probe --site f0 --probe mean`` then fits the logistic regression on every
split, leave-one-speaker-out included, with controls, writing rows in the probes' format whose
subject's model is ``praat-f0``.

Records without F0 (unreadable, shorter than :data:`~experiments.analysis.acoustic.MIN_SECONDS`,
no pitch range, no voiced frame) are not stored: they are listed with their reason in the part's
``skipped`` attribute, as an extraction lists the records it skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from experiments.analysis.acoustic import MIN_SECONDS, RANGE_BY, first_pass_f0, pitch_range_settings, pitch_values, range_key, speaker_ranges
from extract.audio import MAX_SECONDS, SAMPLE_RATE, AudioError, asr_samples
from extract.errors import UserError
from extract.manifest import Utterance
from extract.provenance import file_sha256, provenance
from extract.store import DamagedPartError, PartWriter, StoreAttributes, comparable_config, complete_parts, part_attributes, utterance_meta

F0_SITE = "f0"
F0_FEATURES = ("log_f0_median", "log_f0_mean", "log_f0_sd")  # natural log of Hz, over the voiced frames
F0_LABEL = "praat-f0"
PART = "part-00000.h5"


class F0Error(UserError, ValueError):
    """A store that cannot be written as asked: another configuration in the folder, no record with F0."""


def f0_statistics(voiced_hz: np.ndarray) -> np.ndarray:
    """:data:`F0_FEATURES` of an utterance's voiced F0 values (Hz, at least one)."""
    logs = np.log(np.asarray(voiced_hz, dtype=np.float64))
    return np.array([np.median(logs), logs.mean(), logs.std()], dtype=np.float32)


def f0_settings(range_by: str) -> dict:
    """Everything that changes a feature value, recorded in the store's configuration."""
    return {"features": list(F0_FEATURES), **pitch_range_settings(range_by), "max_seconds": MAX_SECONDS["asr"], "min_seconds": MIN_SECONDS}


def _first_pass(utterance: Utterance) -> tuple[np.ndarray, str]:
    """(voiced first-pass F0 values, why there are none: empty when there are some)."""
    try:
        samples = asr_samples(utterance)
    except AudioError as error:
        return np.zeros(0), f"no usable audio ({type(error).__name__}: {error.problem})"
    if len(samples) < MIN_SECONDS * SAMPLE_RATE:
        return np.zeros(0), f"too short ({len(samples) / SAMPLE_RATE:.3f} s < {MIN_SECONDS} s)"
    return first_pass_f0(samples), ""


def utterance_f0(utterances: Sequence[Utterance], range_by: str = "speaker", show_progress: bool = True) -> tuple[dict[str, tuple], list[dict], dict]:
    """(record id -> (:data:`F0_FEATURES`, seconds read), the records skipped as ``{"id", "reason"}``,
    the pitch ranges by range key)."""
    from tqdm.auto import tqdm

    if range_by not in RANGE_BY:
        raise F0Error(f"pitch range by {range_by!r}: expected one of {', '.join(RANGE_BY)}")
    first, problems = {}, {}
    for utterance in tqdm(utterances, desc="pitch range (first pass)", unit="rec", disable=not show_progress):
        first[utterance.id], problems[utterance.id] = _first_pass(utterance)
    keys = {u.id: range_key(u, range_by) for u in utterances}
    ranges = speaker_ranges(first, keys)
    features, skipped = {}, []
    for utterance in tqdm(utterances, desc="F0 statistics", unit="rec", disable=not show_progress):
        found = ranges[keys[utterance.id]]
        if problems[utterance.id] or "reason" in found:
            skipped.append({"id": utterance.id, "reason": problems[utterance.id] or found["reason"]})
            continue
        samples = asr_samples(utterance)
        _, frequencies = pitch_values(samples, found["floor"], found["ceiling"])
        voiced = frequencies[frequencies > 0]
        if len(voiced) == 0:
            skipped.append({"id": utterance.id, "reason": f"unvoiced (no voiced frame in the {range_by}'s pitch range)"})
            continue
        features[utterance.id] = (f0_statistics(voiced), len(samples) / SAMPLE_RATE)
    return features, skipped, ranges


def write_f0_store(utterances: Sequence[Utterance], manifest: str | Path, out: str | Path, range_by: str = "speaker", show_progress: bool = True) -> dict:
    """Writes the F0 store of ``utterances`` (read from ``manifest``) into folder ``out``; returns
    ``{"store", "stored", "skipped", "up_to_date"}``. A folder already holding this store (same
    configuration, the manifest compared by content) is left as it is; one holding another is refused."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise F0Error(f"--out {out} is a file; give a folder for the F0 store (it is created if missing)")
    config = f0_store_config(manifest, range_by)
    existing = _existing_config(out)
    if existing is not None:
        if existing.get("label") != F0_LABEL:
            raise F0Error(f"{out} holds the store of another model (label {existing.get('label')!r}), not an F0 store; give a new --out")
        if comparable_config(existing) != comparable_config(config):
            raise F0Error(f"{out} holds an F0 store written with another configuration or manifest; write to a new --out or move this one aside")
        return {"store": str(out), "up_to_date": True}
    if out.exists() and any(out.iterdir()):
        raise F0Error(f"{out} is not empty and holds no F0 store; give a new folder")
    features, skipped, ranges = utterance_f0(utterances, range_by, show_progress)
    if not features:
        raise F0Error(f"no record of {manifest} has F0 (e.g. {skipped[0]['id']}: {skipped[0]['reason']}); nothing to probe")
    out.mkdir(parents=True, exist_ok=True)
    attributes = StoreAttributes(
        model_id=F0_LABEL,
        family="praat",
        site_modules={F0_SITE: "praat:To Pitch (ac), " + ", ".join(F0_FEATURES)},
        storage_dtype="float32",
        config=config,
        skipped=skipped,
        extra={"pitch_ranges": ranges},
        **provenance(),
    )
    with PartWriter(out / PART, {F0_SITE: len(F0_FEATURES)}, "float32", attributes, max_rows=len(features)) as writer:
        for utterance in utterances:
            if utterance.id in features:
                values, seconds = features[utterance.id]
                writer.add(utterance.id, {F0_SITE: values[None]}, utterance_meta(utterance, seconds))
    return {"store": str(out), "stored": len(features), "skipped": skipped, "up_to_date": False}


def f0_store_config(manifest: str | Path, range_by: str) -> dict:
    """The configuration an F0 store of ``manifest`` records (the manifest by its sha256 too), compared on resume."""
    return {"label": F0_LABEL, "manifest": str(manifest), "manifest_sha256": file_sha256(manifest), **f0_settings(range_by)}


def f0_store_current(manifest: str | Path, out: str | Path, range_by: str = "speaker") -> bool:
    """Whether ``out`` holds the F0 store of ``manifest`` with these settings (what :func:`write_f0_store` leaves as it is)."""
    existing = _existing_config(Path(out))
    return existing is not None and comparable_config(existing) == comparable_config(f0_store_config(manifest, range_by))


def _existing_config(out: Path) -> dict | None:
    """The configuration of the F0 store in ``out``, or None when there is none."""
    parts = complete_parts(out) if out.is_dir() else []
    if not parts:
        return None
    try:
        return part_attributes(parts[0]).config
    except DamagedPartError as error:
        raise F0Error(f"{parts[0]}: unreadable configuration ({error.problem}); give a new --out") from None
