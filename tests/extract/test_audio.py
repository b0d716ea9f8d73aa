import numpy as np
import pytest
import soundfile

from extract.audio import (
    SAMPLE_RATE,
    AudioCorruptError,
    AudioEmptyError,
    AudioMissingError,
    AudioSilentError,
    load_audio,
)


def test_resamples_downmixes_and_slices(tone):
    path = tone("stereo.wav", seconds=3.0, rate=44_100, channels=2)
    audio = load_audio(path, offset=1.0, duration=1.5)
    assert audio.samples.dtype == np.float32 and audio.samples.ndim == 1
    assert abs(len(audio.samples) - 1.5 * SAMPLE_RATE) <= 2
    assert 0.25 < np.abs(audio.samples).max() < 0.35


def test_slice_starts_at_the_offset(tmp_path):
    rate = 16_000
    ramp = np.linspace(0, 0.5, 2 * rate, dtype=np.float32)
    soundfile.write(tmp_path / "ramp.wav", ramp, rate, subtype="FLOAT")
    audio = load_audio(tmp_path / "ramp.wav", offset=1.0, duration=0.5)
    assert audio.samples[0] == pytest.approx(ramp[rate], abs=1e-6)
    assert len(audio.samples) == rate // 2


def test_trims_to_max_seconds(tone):
    audio = load_audio(tone("long.wav", seconds=5.0), max_seconds=2.0)
    assert len(audio.samples) == 2 * SAMPLE_RATE and "trimmed" in audio.notes and audio.source_seconds == pytest.approx(5.0)
    assert "trimmed" not in load_audio(tone("short.wav", seconds=1.0), max_seconds=2.0).notes


def test_bad_files_raise_typed_errors_naming_the_file(tmp_path, tone):
    with pytest.raises(AudioMissingError, match="nope.wav: file not found"):
        load_audio(tmp_path / "nope.wav")
    corrupt = tmp_path / "corrupt.wav"
    corrupt.write_bytes(b"RIFF\x00\x00\x00\x00WAVEnot really audio")
    with pytest.raises(AudioCorruptError, match="corrupt.wav: cannot decode"):
        load_audio(corrupt)
    empty = tmp_path / "empty.wav"
    soundfile.write(empty, np.zeros(0, dtype=np.float32), 16_000)
    with pytest.raises(AudioEmptyError, match="empty.wav"):
        load_audio(empty)
    silent = tmp_path / "silent.wav"
    soundfile.write(silent, np.zeros(16_000, dtype=np.float32), 16_000)
    with pytest.raises(AudioSilentError, match="silent.wav"):
        load_audio(silent)
    with pytest.raises(AudioEmptyError, match="past the end"):
        load_audio(tone("one.wav", seconds=1.0), offset=5.0)


def _truncated_wav(tmp_path, seconds=1.0, keep=0.5):
    path = tmp_path / "truncated.wav"
    soundfile.write(path, 0.2 * np.ones(int(seconds * SAMPLE_RATE), dtype=np.float32), SAMPLE_RATE, subtype="PCM_16")
    size = path.stat().st_size
    with open(path, "r+b") as handle:
        handle.truncate(44 + int((size - 44) * keep))  # a 44-byte header promising the full second
    return path


def test_clean_audio_carries_no_notes(tone):
    assert load_audio(tone("clean.wav", seconds=1.0), max_seconds=2.0).notes == {}


def test_trimming_is_noted_with_both_lengths(tone):
    notes = load_audio(tone("long.wav", seconds=5.0), max_seconds=2.0).notes
    assert notes == {"trimmed": {"from_seconds": 5.0, "to_seconds": 2.0}}


def test_a_file_holding_less_than_its_header_promises_is_kept_and_noted(tmp_path):
    from extract.audio import wav_header_frames

    path = _truncated_wav(tmp_path)
    assert wav_header_frames(path) == SAMPLE_RATE
    audio = load_audio(path)
    assert len(audio.samples) == SAMPLE_RATE // 2
    assert audio.notes == {"shorter_than_header": {"header_seconds": 1.0, "read_seconds": 0.5}}
    sliced = load_audio(path, offset=0.25, duration=0.5)  # the slice asks for 0.25 s more than the file holds
    assert sliced.notes == {"shorter_than_header": {"header_seconds": 0.5, "read_seconds": 0.25}}
    assert load_audio(path, offset=0.1, duration=0.2).notes == {}  # a slice inside what the file holds


def test_float_samples_outside_unit_range_are_kept_and_noted(tmp_path):
    loud = np.linspace(-3.5, 2.0, SAMPLE_RATE, dtype=np.float32)
    soundfile.write(tmp_path / "loud.wav", loud, SAMPLE_RATE, subtype="FLOAT")
    audio = load_audio(tmp_path / "loud.wav")
    assert audio.notes == {"outside_unit_range": {"peak": 3.5}}
    assert audio.samples.min() == pytest.approx(-3.5)
    soundfile.write(tmp_path / "full.wav", loud / 3.5, SAMPLE_RATE, subtype="FLOAT")
    assert load_audio(tmp_path / "full.wav").notes == {}
