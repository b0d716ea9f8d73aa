from pathlib import Path

import numpy as np
import pytest
import soundfile


def write_tone(path: Path, seconds: float = 1.0, rate: int = 16_000, channels: int = 1, amplitude: float = 0.3) -> Path:
    """A sine tone: real, decodable audio for format tests (no speech needed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    t = np.arange(int(seconds * rate)) / rate
    tone = (amplitude * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
    data = np.stack([tone] * channels, axis=1) if channels > 1 else tone
    soundfile.write(path, data, rate, subtype="PCM_16")
    return path


@pytest.fixture
def tone(tmp_path):
    return lambda name, **kwargs: write_tone(tmp_path / name, **kwargs)
