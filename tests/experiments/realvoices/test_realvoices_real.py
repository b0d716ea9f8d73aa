"""The real-voice recipe on real packages: a few clips of every codec, fetched with apt-get into the cache.

Skipped, with the reason, where apt-get cannot reach its archive (no network, no package lists, not Debian).
French, Italian and Russian hold every codec: G.722 (asterisk core sounds), GSM 06.10 (Armelle
Desjardins), 8 kHz PCM (Paola Dal Zot) and 44.1 kHz Ogg (Tux Paint), and both genders.
"""

from statistics import median

import numpy as np
import pytest
import soundfile

from experiments.recipes.realvoices.decode import source_seconds
from experiments.recipes.realvoices.fetch import unpack
from extract.audio import SAMPLE_RATE, load_audio
from extract.manifest import read_manifest
from tests.conftest import REAL_CLIPS_PER_VOICE

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def corpus(real_voices):
    rows, manifest = real_voices
    return rows, read_manifest(manifest)


def test_every_codec_decodes_to_plausible_16k_speech(corpus):
    rows, utterances = corpus
    assert len(utterances) == REAL_CLIPS_PER_VOICE * len(rows) and len(rows) == 7
    assert {u.extra["source_file"].rsplit(".", 1)[1] for u in utterances} == {"g722", "gsm", "wav", "ogg"}
    for u in utterances:
        info = soundfile.info(u.audio)
        assert (info.samplerate, info.channels) == (SAMPLE_RATE, 1), u.id
        samples = load_audio(u.audio).samples
        assert np.all(np.isfinite(samples)) and np.abs(samples).max() > 0.05 and np.sqrt(np.mean(samples**2)) > 0.005, u.id
        source = unpack(u.extra["package"]).root / u.extra["source_file"]
        assert abs(len(samples) / SAMPLE_RATE - source_seconds(source)) < 0.05, u.id  # resampling kept the length
        assert 0.3 <= u.duration <= 30.0 and len(u.text) <= 30 * u.duration, u.id
        if source.suffix == ".g722":
            assert len(samples) == 2 * source.stat().st_size  # G.722: 4 bits a sample at 16 kHz, nothing lost


def test_female_voices_speak_higher_than_male_voices(corpus):
    rows, _ = corpus
    f0 = {gender: [r["median_f0_hz"] for r in rows if r["gender"] == gender] for gender in ("female", "male")}
    assert len(f0["female"]) == 4 and len(f0["male"]) == 3
    assert all(60 < value < 400 for values in f0.values() for value in values), f0
    assert median(f0["female"]) > median(f0["male"]) + 30, f0  # measured: about 200 against 140 Hz
