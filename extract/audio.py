"""Audio loading: mono float32 at 16 kHz, with offset/duration slicing and a maximum length.

Bad audio raises a subclass of :class:`AudioError` naming the file; callers decide whether to
skip and count it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

SAMPLE_RATE = 16_000
MAX_SECONDS = {"asr": 30.0, "st": 60.0}
SILENCE_PEAK = 1e-4  # peak amplitude below which a file is treated as silent (-80 dBFS)


class AudioError(RuntimeError):
    """Base class: the audio file cannot be used."""

    def __init__(self, path: str | Path, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path, self.problem = str(path), problem


class AudioMissingError(AudioError):
    pass


class AudioCorruptError(AudioError):
    pass


class AudioEmptyError(AudioError):
    pass


class AudioSilentError(AudioError):
    pass


@dataclass
class Audio:
    samples: np.ndarray  # float32, mono, SAMPLE_RATE
    source_seconds: float  # length of the requested slice before trimming
    trimmed: bool

    @property
    def seconds(self) -> float:
        return len(self.samples) / SAMPLE_RATE


def load_audio(
    path: str | Path,
    offset: float | None = None,
    duration: float | None = None,
    max_seconds: float | None = None,
) -> Audio:
    """Read ``path`` (any format libsndfile reads), slice, downmix, resample to 16 kHz, trim to ``max_seconds``."""
    import soundfile
    import soxr

    path = Path(path)
    if not path.is_file():
        raise AudioMissingError(path, "file not found")
    try:
        with soundfile.SoundFile(path) as handle:
            rate = handle.samplerate
            start = int(round((offset or 0.0) * rate))
            if start > handle.frames:
                raise AudioEmptyError(path, f"offset {offset} s is past the end ({handle.frames / rate:.3f} s)")
            handle.seek(start)
            frames = -1 if duration is None else int(round(duration * rate))
            data = handle.read(frames=frames, dtype="float32", always_2d=True)
    except AudioError:
        raise
    except (RuntimeError, soundfile.LibsndfileError, ValueError) as error:
        raise AudioCorruptError(path, f"cannot decode: {error}") from error
    if data.size == 0:
        raise AudioEmptyError(path, "no samples" + (f" in the slice at {offset} s" if offset else ""))
    samples = data.mean(axis=1) if data.shape[1] > 1 else data[:, 0]
    if not np.all(np.isfinite(samples)):
        raise AudioCorruptError(path, "non-finite samples")
    if rate != SAMPLE_RATE:
        samples = soxr.resample(samples, rate, SAMPLE_RATE, quality="HQ").astype(np.float32)
    if float(np.max(np.abs(samples))) < SILENCE_PEAK:
        raise AudioSilentError(path, f"all samples below {SILENCE_PEAK} (silent)")
    source_seconds = len(samples) / SAMPLE_RATE
    trimmed = max_seconds is not None and source_seconds > max_seconds
    if trimmed:
        samples = samples[: int(max_seconds * SAMPLE_RATE)]
    return Audio(samples=np.ascontiguousarray(samples, dtype=np.float32), source_seconds=source_seconds, trimmed=trimmed)
