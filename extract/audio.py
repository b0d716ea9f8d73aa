"""Audio loading: mono float32 at 16 kHz, with offset/duration slicing and a maximum length.

Bad audio raises a subclass of :class:`AudioError` naming the file; callers decide whether to
skip and count it. Audio that is usable but was changed or looks off is kept, with
:attr:`Audio.notes` saying what (callers record them per utterance and count them):

- ``trimmed``: ``{"from_seconds", "to_seconds"}``, cut to the maximum length;
- ``shorter_than_header``: ``{"header_seconds", "read_seconds"}``, the file holds fewer samples
  than its header promises (a truncated file; what it holds is used);
- ``outside_unit_range``: ``{"peak"}``, float samples beyond [-1, 1] (kept as they are; models
  normalise differently, so their effect depends on the model).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from extract.errors import UserError

SAMPLE_RATE = 16_000
MAX_SECONDS = {"asr": 30.0, "st": 60.0}
SILENCE_PEAK = 1e-4  # peak amplitude below which a file is treated as silent (-80 dBFS)
UNIT_RANGE_PEAK = 1.0  # float samples beyond this are outside the nominal [-1, 1] range
UNKNOWN_WAV_SIZES = (0, 0xFFFFFFFF)  # data sizes that streaming writers leave as placeholders


class AudioError(UserError, RuntimeError):
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
    notes: dict = field(default_factory=dict)  # what was changed or noticed (see the module docstring)

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
            promised = max(handle.frames, wav_header_frames(path) or 0)
            handle.seek(start)
            frames = -1 if duration is None else int(round(duration * rate))
            data = handle.read(frames=frames, dtype="float32", always_2d=True)
    except AudioError:
        raise
    except (RuntimeError, soundfile.LibsndfileError, ValueError) as error:
        raise AudioCorruptError(path, f"cannot decode: {error}") from error
    if data.size == 0:
        raise AudioEmptyError(path, "no samples" + (f" in the slice at {offset} s" if offset else ""))
    notes = {}
    expected = promised - start if frames < 0 else min(frames, promised - start)
    if len(data) < expected:
        notes["shorter_than_header"] = {"header_seconds": round(expected / rate, 3), "read_seconds": round(len(data) / rate, 3)}
    samples = data.mean(axis=1) if data.shape[1] > 1 else data[:, 0]
    if not np.all(np.isfinite(samples)):
        raise AudioCorruptError(path, "non-finite samples")
    peak = float(np.max(np.abs(data)))
    if peak > UNIT_RANGE_PEAK:
        notes["outside_unit_range"] = {"peak": round(peak, 4)}
    if rate != SAMPLE_RATE:
        samples = soxr.resample(samples, rate, SAMPLE_RATE, quality="HQ").astype(np.float32)
    if float(np.max(np.abs(samples))) < SILENCE_PEAK:
        raise AudioSilentError(path, f"all samples below {SILENCE_PEAK} (silent)")
    source_seconds = len(samples) / SAMPLE_RATE
    if max_seconds is not None and source_seconds > max_seconds:
        samples = samples[: int(max_seconds * SAMPLE_RATE)]
        notes["trimmed"] = {"from_seconds": round(source_seconds, 3), "to_seconds": round(len(samples) / SAMPLE_RATE, 3)}
    return Audio(samples=np.ascontiguousarray(samples, dtype=np.float32), source_seconds=source_seconds, notes=notes)


def asr_samples(record) -> np.ndarray:
    """A record's first 30 s, as the ASR models see it (a record: anything with ``audio``, ``offset``, ``duration``)."""
    return load_audio(record.audio, record.offset, record.duration, max_seconds=MAX_SECONDS["asr"]).samples


def wav_header_frames(path: Path) -> int | None:
    """Frames a RIFF/WAVE header's ``data`` chunk promises (libsndfile silently shortens a
    truncated WAV to what it holds, so this is read from the header itself); None for other formats
    and for placeholder sizes."""
    try:
        with open(path, "rb") as handle:
            if handle.read(12)[8:12] != b"WAVE":
                return None
            handle.seek(0)
            if handle.read(4) != b"RIFF":
                return None
            handle.seek(12)
            block_align = None
            while True:
                header = handle.read(8)
                if len(header) < 8:
                    return None
                chunk, size = header[:4], struct.unpack("<I", header[4:])[0]
                if chunk == b"fmt ":
                    block_align = struct.unpack("<H", handle.read(16)[12:14])[0]
                    handle.seek(size - 16 + size % 2, 1)
                elif chunk == b"data":
                    return size // block_align if block_align and size not in UNKNOWN_WAV_SIZES else None
                else:
                    handle.seek(size + size % 2, 1)
    except (OSError, struct.error):
        return None
