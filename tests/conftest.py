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


REAL_VOICE_LANGUAGES = ("fr", "it", "ru")  # every codec (G.722, GSM 06.10, 8 kHz PCM, 44.1 kHz Ogg) and both genders
REAL_CLIPS_PER_VOICE = 4


@pytest.fixture(scope="session")
def real_voices(tmp_path_factory):
    """A few clips per voice of the real-voice recipe, fetched with apt-get into the cache and built once
    per session: (the voice rows, the manifest's path). Skipped, with the reason, where apt-get cannot
    reach its archive (no network, no package lists, not Debian)."""
    import warnings

    from experiments.recipes.realvoices.build import build_realvoices
    from experiments.recipes.realvoices.fetch import FetchError

    out = tmp_path_factory.mktemp("realvoices")
    try:
        rows = build_realvoices(out, REAL_VOICE_LANGUAGES, REAL_CLIPS_PER_VOICE, seed=0, show_progress=False)
    except FetchError as error:
        reason = f"the real voices cannot be fetched here: {error}"
        warnings.warn(reason, stacklevel=1)
        pytest.skip(reason)
    return rows, out / "manifest.jsonl"
