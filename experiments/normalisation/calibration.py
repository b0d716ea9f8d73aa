"""GRAFN's offline calibration (§V): per-gender average magnitude spectra of the locally normalised
signals, a neutral target, and the gains H_female(f), H_male(f) mapping each group onto it; the
per-utterance gain of the label-free mode; long-term average spectrum distances between groups.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from experiments.normalisation.filters import GROUPS, GrafnFilters
from experiments.normalisation.transform import GrafnError, GrafnParameters, gain_toward, local_normalise, magnitude_frames, smooth_db
from experiments.recipes.democorpus.pitch import median_f0

DB_FLOOR = 1e-10  # magnitudes below this are taken as this (-200 dB) before the logarithm


def to_db(magnitude: np.ndarray) -> np.ndarray:
    return 20.0 * np.log10(np.maximum(magnitude, DB_FLOOR))


@dataclass
class UtteranceSpectrum:
    """One utterance's mean magnitude spectrum over its active frames, and how many frames that is."""

    magnitude: np.ndarray
    frames: int


def utterance_spectrum(signal: np.ndarray, params: GrafnParameters) -> UtteranceSpectrum:
    """The mean |STFT| of ``signal`` over frames within ``active_db`` of its loudest frame."""
    frames = magnitude_frames(signal, params)
    if params.active_db is not None:
        energy_db = 10.0 * np.log10(np.maximum((frames**2).sum(axis=1), DB_FLOOR**2))
        frames = frames[energy_db >= energy_db.max() - params.active_db]
    return UtteranceSpectrum(frames.mean(axis=0), len(frames))


@dataclass
class GroupSpectra:
    """Per-group average magnitude spectra (linear) with the counts behind them."""

    magnitude: dict[str, np.ndarray]
    utterances: dict[str, int]
    speakers: dict[str, int]
    frames: dict[str, int]

    def db(self, group: str) -> np.ndarray:
        return to_db(self.magnitude[group])


def group_spectra(items: Iterable[tuple[str, str, np.ndarray]], params: GrafnParameters, local: bool = True, groups=GROUPS) -> GroupSpectra:
    """Average spectra of ``(group, speaker, samples)`` items, each group averaged per ``params.average``
    (per speaker first, or over utterances). ``local``: apply step 1 (local normalisation) first, as the
    calibration does; off, the spectra of the signals as given (long-term average spectra)."""
    per_speaker: dict[str, dict[str, list[np.ndarray]]] = {group: {} for group in groups}
    frames = dict.fromkeys(groups, 0)
    for group, speaker, samples in items:
        if group not in per_speaker:
            continue
        spectrum = utterance_spectrum(local_normalise(samples, params) if local else np.asarray(samples, dtype=np.float64), params)
        per_speaker[group].setdefault(speaker, []).append(spectrum.magnitude)
        frames[group] += spectrum.frames
    magnitude, utterances, speakers = {}, {}, {}
    for group, by_speaker in per_speaker.items():
        utterances[group] = sum(len(spectra) for spectra in by_speaker.values())
        speakers[group] = len(by_speaker)
        if not by_speaker:
            continue
        if params.average == "speaker":
            magnitude[group] = np.mean([np.mean(spectra, axis=0) for spectra in by_speaker.values()], axis=0)
        else:
            magnitude[group] = np.mean([spectrum for spectra in by_speaker.values() for spectrum in spectra], axis=0)
    return GroupSpectra(magnitude, utterances, speakers, frames)


def target_spectrum_db(spectra: GroupSpectra, params: GrafnParameters) -> np.ndarray:
    """The neutral target in dB (see ``GrafnParameters.target``)."""
    female, male = spectra.magnitude["female"], spectra.magnitude["male"]
    if params.target == "geometric":
        return 0.5 * (to_db(female) + to_db(male))
    if params.target == "arithmetic":
        return to_db(0.5 * (female + male))
    if params.target == "pooled":
        weights = {group: spectra.speakers[group] if params.average == "speaker" else spectra.utterances[group] for group in GROUPS}
        return to_db((weights["female"] * female + weights["male"] * male) / (weights["female"] + weights["male"]))
    return to_db(spectra.magnitude[params.target])


def pitch_threshold(f0s: dict[str, list[float]]) -> float | None:
    """The label-free rule's boundary: the geometric mean of the two groups' median F0s (None when a
    group has no voiced utterance)."""
    medians = {group: float(np.nanmedian(values)) for group, values in f0s.items() if np.isfinite(values).any()}
    if set(medians) != set(GROUPS):
        return None
    return float(np.sqrt(medians["female"] * medians["male"]))


def fit_filters(items: Iterable[tuple[str, str, np.ndarray]], params: GrafnParameters, source: str = "") -> GrafnFilters:
    """Calibrate on ``(gender, speaker, samples)`` items (other genders than female/male are passed over
    and counted): the per-gender spectra, the target, both gains and the pitch rule's threshold."""
    f0s: dict[str, list[float]] = {group: [] for group in GROUPS}
    passed_over: dict[str, int] = {}

    def binary():
        for gender, speaker, samples in items:
            if gender not in GROUPS:
                passed_over[gender] = passed_over.get(gender, 0) + 1
                continue
            f0s[gender].append(median_f0(np.asarray(samples, dtype=np.float64), params.sample_rate))
            yield gender, speaker, samples

    spectra = group_spectra(binary(), params)
    missing = [group for group in GROUPS if group not in spectra.magnitude]
    if missing:
        raise GrafnError(f"no {' or '.join(missing)} utterance to calibrate on; GRAFN needs both groups")
    target = target_spectrum_db(spectra, params)
    groups = {
        group: {
            "spectrum_db": spectra.db(group),
            "gain_db": gain_toward(target, spectra.db(group), params),
            "utterances": spectra.utterances[group],
            "speakers": spectra.speakers[group],
            "frames": spectra.frames[group],
            "median_f0_hz": float(np.nanmedian(f0s[group])) if np.isfinite(f0s[group]).any() else None,
        }
        for group in GROUPS
    }
    return GrafnFilters(params, target, groups, pitch_threshold(f0s), {"manifest": source, "passed_over": passed_over})


def utterance_gain(samples: np.ndarray, filters: GrafnFilters) -> np.ndarray:
    """The label-free per-utterance H(f): this utterance's own spectrum (after step 1) mapped onto the target."""
    params = filters.params
    spectrum = utterance_spectrum(local_normalise(samples, params), params)
    return gain_toward(filters.target_db, to_db(spectrum.magnitude), params)


def spectrum_distance(female_db: np.ndarray, male_db: np.ndarray, params: GrafnParameters, band: tuple[float, float] = (100.0, 7000.0)) -> dict[str, float]:
    """How far apart two long-term average spectra are within ``band``, each smoothed across frequency
    as H(f) is (``params.smoothing_hz``: the envelope GRAFN can move, not the harmonics of one pitch):
    ``rms_db`` (RMS of the dB difference), ``level_db`` (its mean: female minus male) and
    ``shape_rms_db`` (RMS after removing that mean: the difference in spectral shape, whatever the levels)."""
    frequencies = params.frequencies
    inside = (frequencies >= band[0]) & (frequencies <= band[1])
    difference = (smooth_db(female_db, params) - smooth_db(male_db, params))[inside]
    level = float(np.mean(difference))
    return {"rms_db": float(np.sqrt(np.mean(difference**2))), "level_db": level, "shape_rms_db": float(np.sqrt(np.mean((difference - level) ** 2)))}
