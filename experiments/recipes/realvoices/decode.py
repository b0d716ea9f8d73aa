"""Packaged prompts to 16 kHz mono WAV: G.722 and GSM 06.10 with PyAV (libsndfile and sox read
neither raw format), WAV and Ogg through :func:`extract.audio.load_audio` (libsndfile, soxr)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from extract.audio import SAMPLE_RATE, SILENCE_PEAK, AudioCorruptError, AudioSilentError, load_audio
from extract.errors import UserError

# raw telephone codecs: PyAV's demuxer name, the decoded rate, and bytes per second (the
# duration of a file without decoding it: G.722 at 64 kbit/s, GSM 06.10 at 33 bytes per 20 ms)
RAW_CODECS = {".g722": ("g722", 16_000, 8_000.0), ".gsm": ("gsm", 8_000, 1_650.0)}


def source_seconds(path: Path) -> float:
    """The duration of a packaged clip from its size (raw codecs) or its header."""
    if path.suffix in RAW_CODECS:
        return path.stat().st_size / RAW_CODECS[path.suffix][2]
    import soundfile

    return float(soundfile.info(str(path)).duration)


class DecoderMissingError(UserError, RuntimeError):
    """PyAV is not installed."""


def decode_raw(path: Path) -> tuple[np.ndarray, int]:
    """A raw G.722 or GSM file as float32 mono samples in [-1, 1) and its rate."""
    try:
        import av
    except ImportError:
        raise DecoderMissingError(f"{path}: decoding {path.suffix} needs PyAV: pip install 'speech-gender-probing[realvoices]' (or pip install av)") from None

    format_name, rate, _ = RAW_CODECS[path.suffix]
    try:
        with av.open(str(path), format=format_name) as container:
            frames = [frame.to_ndarray() for frame in container.decode(audio=0)]
    except (av.error.FFmpegError, ValueError) as error:
        raise AudioCorruptError(path, f"cannot decode {format_name}: {error}") from error
    if not frames:
        raise AudioCorruptError(path, f"no {format_name} frames")
    samples = np.concatenate(frames, axis=1).astype(np.float32).mean(axis=0) / 32768.0
    if float(np.max(np.abs(samples))) < SILENCE_PEAK:
        raise AudioSilentError(path, f"all samples below {SILENCE_PEAK} (silent)")
    return samples, rate


def decode_16k(path: Path) -> np.ndarray:
    """``path`` as 16 kHz mono float32 samples."""
    if path.suffix not in RAW_CODECS:
        return load_audio(path).samples
    samples, rate = decode_raw(path)
    if rate != SAMPLE_RATE:
        import soxr

        samples = soxr.resample(samples, rate, SAMPLE_RATE, quality="HQ").astype(np.float32)
    return samples


def write_wav_16k(source: Path, target: Path) -> float:
    """Decode ``source`` into ``target`` (16 kHz mono 16-bit PCM) unless it is there; returns its seconds.

    Written under a temporary name and renamed, so an interrupted run leaves no half file and a
    rerun skips every finished clip.
    """
    import soundfile

    if target.is_file():
        return float(soundfile.info(str(target)).duration)
    samples = np.clip(decode_16k(source), -1.0, 32767 / 32768)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    soundfile.write(str(temporary), samples, SAMPLE_RATE, subtype="PCM_16", format="WAV")
    temporary.replace(target)
    return len(samples) / SAMPLE_RATE
