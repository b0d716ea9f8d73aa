"""Median fundamental frequency by frame autocorrelation: enough to describe a voice in the corpus card."""

from __future__ import annotations

import numpy as np


def median_f0(samples: np.ndarray, rate: int, fmin: float = 60.0, fmax: float = 400.0, frame_seconds: float = 0.04) -> float:
    """Median F0 in Hz over voiced frames (frames with energy above 10 % of the loudest and a clear periodicity peak).

    Returns NaN when no frame is voiced.
    """
    frame = int(frame_seconds * rate)
    hop = frame // 2
    low, high = int(rate / fmax), int(rate / fmin)
    if len(samples) < frame or high >= frame:
        return float("nan")
    starts = np.arange(0, len(samples) - frame + 1, hop)
    frames = np.stack([samples[s : s + frame] for s in starts]).astype(np.float64)
    frames -= frames.mean(axis=1, keepdims=True)
    energy = (frames**2).sum(axis=1)
    voiced = energy > 0.1 * energy.max()
    spectrum = np.fft.rfft(frames[voiced] * np.hanning(frame), n=2 * frame)
    autocorrelation = np.fft.irfft(np.abs(spectrum) ** 2)[:, :frame]
    autocorrelation /= np.maximum(autocorrelation[:, :1], 1e-12)
    lags = low + np.argmax(autocorrelation[:, low:high], axis=1)
    strength = autocorrelation[np.arange(len(lags)), lags]
    periodic = strength > 0.3
    if not periodic.any():
        return float("nan")
    return float(np.median(rate / lags[periodic]))
