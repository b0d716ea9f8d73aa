"""The GRAFN transform of one waveform (Alm, Szachara and Murphy, §IV.D): local statistical alignment,
a gain H(f) on the STFT, and the inverse STFT with the input's length.

Every choice the paper leaves open is a field of :class:`GrafnParameters`, with its default and the
reason for it in docs/stages/normalisation.md.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING

import numpy as np

from extract.audio import SAMPLE_RATE
from extract.errors import UserError
from extract.options import option

if TYPE_CHECKING:  # scipy takes a second to import: the functions that filter import it, so that --help stays fast
    from scipy.signal import ShortTimeFFT

TARGETS = ("geometric", "arithmetic", "pooled", "female", "male")
PARAMETERS = "GRAFN parameters (the choices the paper leaves open; see docs/stages/normalisation.md)"  # their --help heading
AVERAGES = ("speaker", "utterance")
FLOAT32_MAX = float(np.finfo(np.float32).max)  # the output WAV holds float32 samples
# what a filters file may hold for each annotation of GrafnParameters: accepted JSON types, and their name
FIELD_TYPES = {
    "int": ((int,), "an integer"),
    "float": ((int, float), "a number"),
    "str": ((str,), "a string"),
    "float | None": ((int, float, type(None)), "a number or null"),
}


class GrafnError(UserError, ValueError):
    """GRAFN parameters, filters or inputs that cannot be used (the message says which and why)."""


@dataclass(frozen=True)
class GrafnParameters:
    """What the paper leaves open, with the defaults used here.

    - ``window_seconds``: length of the sliding window W of step 1 (eq. 11), centred on each sample;
      near the edges it holds the samples that exist. 25 ms: "short", one analysis frame of speech.
    - ``floor_ratio``: σ_x(t) is floored at this fraction of the utterance's global standard deviation,
      so that pauses (σ near 0) are not amplified into loud noise; 0.1 (-20 dB).
    - ``n_fft``, ``hop``, ``window``: the STFT of step 2 (512 samples = 32 ms, hop 128 = 8 ms, periodic
      Hann): 75 % overlap, so the inverse STFT reconstructs the input exactly under a unit gain.
    - ``smoothing_hz``: H(f) is smoothed across frequency by a moving average of this width in dB
      (300 Hz: wider than the harmonic spacing of any voice, so H follows formants and tilt, not F0).
    - ``max_gain_db``: H(f) clipped to ± this many dB (12): a bin with almost no energy in one group
      (below a low F0, DC) would otherwise get an unbounded gain.
    - ``target``: the neutral spectrum: ``geometric`` (default; the mean of the two groups' spectra in
      dB, so each group moves half-way and H_female H_male = 1), ``arithmetic`` (mean in magnitude),
      ``pooled`` (all speakers together: an imbalanced calibration set pulls it to the majority),
      ``female`` or ``male`` (map the other group onto that one).
    - ``average``: ``speaker`` (default: per-speaker means first, so a speaker with many utterances
      does not dominate the group) or ``utterance``.
    - ``active_db``: frames more than this many dB below the utterance's loudest frame are left out of
      the average spectra (pauses); ``None`` keeps every frame.
    - ``output_rms``: the transform's output is scaled by this constant (0.1, about -20 dBFS RMS): the
      paper's x_norm has unit local variance, peaks of ±4 and more, beyond what a WAV file or a
      speech front end expects. A constant gain changes no spectral shape.
    """

    window_seconds: float = option(0.025, "sliding window W of the local mean and variance", group=PARAMETERS)
    floor_ratio: float = option(0.1, "σ_x(t) floored at this share of the utterance's global std, so pauses are not blown up", group=PARAMETERS)
    n_fft: int = option(512, "STFT size in samples at 16 kHz", group=PARAMETERS)
    hop: int = option(128, "STFT hop in samples, at most n_fft/2", group=PARAMETERS)
    window: str = option("hann", "STFT window, a scipy.signal.get_window name", group=PARAMETERS)
    smoothing_hz: float = option(300.0, "width of the moving average of H(f) across frequency, in Hz", group=PARAMETERS)
    max_gain_db: float = option(12.0, "H(f) clipped to ± this many dB", group=PARAMETERS)
    target: str = option("geometric", "the neutral spectrum (geometric: the mean of the two groups in dB)", choices=TARGETS, group=PARAMETERS)
    average: str = option("speaker", "average spectra per speaker first, or over utterances", choices=("speaker", "utterance"), group=PARAMETERS)
    active_db: float | None = option(40.0, "frames this many dB below an utterance's loudest are left out of the spectra; 0 keeps all", group=PARAMETERS)
    output_rms: float = option(0.1, "constant output scale: x_norm has unit local variance (0.1: about -20 dBFS)", group=PARAMETERS)
    sample_rate: int = SAMPLE_RATE

    def __post_init__(self):
        positive = {"window_seconds": self.window_seconds, "smoothing_hz": self.smoothing_hz, "output_rms": self.output_rms}
        for name, value in positive.items():
            if not (np.isfinite(value) and value > 0):
                raise GrafnError(f"{name} must be a positive number, got {value}")
        if not (np.isfinite(self.floor_ratio) and self.floor_ratio >= 0):
            raise GrafnError(f"floor_ratio must be >= 0, got {self.floor_ratio}")
        if not (np.isfinite(self.max_gain_db) and self.max_gain_db >= 0):
            raise GrafnError(f"max_gain_db must be >= 0, got {self.max_gain_db}")
        if self.active_db is not None and not (np.isfinite(self.active_db) and self.active_db > 0):
            raise GrafnError(f"active_db must be a positive number of dB or None, got {self.active_db}")
        if self.n_fft < 16 or self.hop < 1 or self.hop > self.n_fft // 2:
            raise GrafnError(f"need n_fft >= 16 and 1 <= hop <= n_fft / 2 (overlap for an exact inverse), got n_fft {self.n_fft}, hop {self.hop}")
        if self.target not in TARGETS:
            raise GrafnError(f"target {self.target!r}: expected one of {', '.join(TARGETS)}")
        if self.average not in AVERAGES:
            raise GrafnError(f"average {self.average!r}: expected one of {', '.join(AVERAGES)}")
        if self.sample_rate != SAMPLE_RATE:
            raise GrafnError(f"sample_rate must be {SAMPLE_RATE} (the package loads all audio at 16 kHz), got {self.sample_rate}")
        from scipy.signal import get_window

        try:
            get_window(self.window, self.n_fft)
        except ValueError as error:
            raise GrafnError(f"window {self.window!r}: {error}") from None
        if self.peak_bound_log10() > np.log10(FLOAT32_MAX):
            raise GrafnError(
                f"output_rms {self.output_rms:g} with max_gain_db {self.max_gain_db:g} can take the output to 1e{self.peak_bound_log10():.0f}, "
                f"beyond the float32 samples of the output WAV (at most {FLOAT32_MAX:.3g}); lower output_rms (default 0.1) or max_gain_db (default 12)"
            )

    def peak_bound_log10(self) -> float:
        """log10 of a bound on the output's largest magnitude, whatever the input: |x_norm| <= sqrt(W - 1)
        (Samuelson's inequality: no sample of a window lies more than sqrt(n - 1) standard deviations
        from the window's mean, and the floor only lowers it); a gain of at most 10^(max_gain_db / 20) per
        bin; the STFT round trip multiplies a peak by at most n_fft max|window| (one frame's spectrum)
        times ceil(n_fft / hop) max|dual window| (the overlapping frames); then ``output_rms``. Loose
        (about 1e4 with the defaults), so it refuses only scales no audio needs. In logs, so that no
        factor overflows."""
        stft = short_time_fft(self)
        round_trip = self.n_fft * np.abs(stft.win).max() * -(-self.n_fft // self.hop) * np.abs(stft.dual_win).max()
        return float(np.log10(self.output_rms) + self.max_gain_db / 20.0 + np.log10(round_trip) + 0.5 * np.log10(max(self.window_samples - 1, 1)))

    @property
    def window_samples(self) -> int:
        """W in samples, odd so that it is centred on t."""
        return 2 * max(1, int(round(self.window_seconds * self.sample_rate / 2))) + 1

    @property
    def frequencies(self) -> np.ndarray:
        return np.fft.rfftfreq(self.n_fft, 1 / self.sample_rate)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, record: dict) -> GrafnParameters:
        types = {f.name: FIELD_TYPES[f.type] for f in fields(cls)}
        unknown = sorted(set(record) - set(types))
        if unknown:
            raise GrafnError(f"unknown GRAFN parameter(s) {', '.join(unknown)}")
        for name, value in record.items():
            accepted, expected = types[name]
            if isinstance(value, bool) or not isinstance(value, accepted):
                raise GrafnError(f"parameter {name} must be {expected}, got {value!r}")
        return cls(**record)


def _moving_mean(values: np.ndarray, width: int) -> np.ndarray:
    """Mean over a centred window of ``width`` (odd) samples; near the edges, over those that exist."""
    half = width // 2
    padded = np.concatenate([[0.0], np.cumsum(values, dtype=np.float64)])
    index = np.arange(len(values))
    low, high = np.maximum(index - half, 0), np.minimum(index + half + 1, len(values))
    return (padded[high] - padded[low]) / (high - low)


def local_statistics(samples: np.ndarray, params: GrafnParameters) -> tuple[np.ndarray, np.ndarray]:
    """μ_x(t) and σ_x(t) of eq. 11 over the window W centred on t (σ² = E_W[x²] − μ², the same
    quantity as E_W[(x − μ(t))²] since μ(t) is the mean over the same window)."""
    x = np.asarray(samples, dtype=np.float64)
    mean = _moving_mean(x, params.window_samples)
    variance = np.maximum(_moving_mean(x * x, params.window_samples) - mean * mean, 0.0)
    return mean, np.sqrt(variance)


def normalisation_problem(samples: np.ndarray, params: GrafnParameters) -> str | None:
    """Why step 1 cannot normalise ``samples``, or None when it can. A property of one utterance (a
    constant or one-sample file), so callers skip or pass through that utterance and name it."""
    x = np.asarray(samples, dtype=np.float64)
    if x.ndim != 1 or len(x) == 0:
        return f"expected a non-empty mono waveform, got shape {x.shape}"
    if not np.all(np.isfinite(x)):
        return "the waveform has non-finite samples"
    if params.floor_ratio * float(np.std(x)) == 0 and np.any(local_statistics(x, params)[1] == 0):
        if np.std(x) == 0:
            return "a constant waveform (σ_x(t) is 0 everywhere): nothing to divide by"
        return "σ_x(t) is 0 in a constant stretch and floor_ratio is 0: nothing to divide by"
    return None


def local_normalise(samples: np.ndarray, params: GrafnParameters) -> np.ndarray:
    """Step 1, eq. 12: x_norm(t) = (x(t) − μ_x(t)) / σ_x(t), σ floored at ``floor_ratio`` times the
    utterance's global standard deviation (see :class:`GrafnParameters`)."""
    problem = normalisation_problem(samples, params)
    if problem:
        raise GrafnError(problem)
    x = np.asarray(samples, dtype=np.float64)
    mean, deviation = local_statistics(x, params)
    return (x - mean) / np.maximum(deviation, params.floor_ratio * float(np.std(x)))


def short_time_fft(params: GrafnParameters) -> ShortTimeFFT:
    from scipy.signal import ShortTimeFFT, get_window

    return ShortTimeFFT(get_window(params.window, params.n_fft), hop=params.hop, fs=params.sample_rate)


def _padded(signal: np.ndarray, params: GrafnParameters) -> np.ndarray:
    """``signal`` with zeros appended up to ``n_fft`` samples (the STFT needs half a frame at least)."""
    signal = np.asarray(signal, dtype=np.float64)
    return np.pad(signal, (0, max(0, params.n_fft - len(signal))))


def magnitude_frames(signal: np.ndarray, params: GrafnParameters) -> np.ndarray:
    """|STFT| of ``signal``, ``[frames, bins]``."""
    return np.abs(short_time_fft(params).stft(_padded(signal, params))).T


def rebalance(normalised: np.ndarray, gain_db: np.ndarray | None, params: GrafnParameters) -> np.ndarray:
    """Steps 2 and 3 (eqs. 13-14): the STFT of ``normalised`` times H(f) = 10^(gain_db / 20), then
    the inverse STFT cut to the input's length. ``gain_db`` None is a unit gain."""
    if gain_db is None:
        return np.asarray(normalised, dtype=np.float64).copy()
    gain_db = np.asarray(gain_db, dtype=np.float64)
    if gain_db.shape != params.frequencies.shape:
        raise GrafnError(f"the gain has {gain_db.shape[0] if gain_db.ndim else 0} bins, the STFT {len(params.frequencies)} (n_fft {params.n_fft})")
    stft, padded = short_time_fft(params), _padded(normalised, params)
    spectrum = stft.stft(padded) * (10.0 ** (gain_db / 20.0))[:, None]
    return stft.istft(spectrum, k1=len(padded))[: len(normalised)]


def grafn(samples: np.ndarray, gain_db: np.ndarray | None, params: GrafnParameters) -> np.ndarray:
    """The whole transform: local normalisation, gain, inverse STFT, times ``output_rms``; float32,
    the input's length. An output that float32 cannot hold is refused, never written as ±inf."""
    output = rebalance(local_normalise(samples, params), gain_db, params) * params.output_rms
    if not (np.all(np.isfinite(output)) and np.abs(output).max() <= FLOAT32_MAX):
        raise GrafnError(f"the normalised waveform is not finite in float32 (output_rms {params.output_rms:g}); nothing written for it")
    return output.astype(np.float32)


def smooth_db(values_db: np.ndarray, params: GrafnParameters) -> np.ndarray:
    """A moving average across frequency, ``smoothing_hz`` wide (an odd number of bins, at least 1)."""
    bin_hz = params.sample_rate / params.n_fft
    width = 2 * int(round(params.smoothing_hz / bin_hz / 2)) + 1
    return _moving_mean(np.asarray(values_db, dtype=np.float64), width)


def gain_toward(target_db: np.ndarray, spectrum_db: np.ndarray, params: GrafnParameters) -> np.ndarray:
    """H(f) in dB mapping a spectrum onto the target: smoothed across frequency, then clipped."""
    return np.clip(smooth_db(np.asarray(target_db) - np.asarray(spectrum_db), params), -params.max_gain_db, params.max_gain_db)
