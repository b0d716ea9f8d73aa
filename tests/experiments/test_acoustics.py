"""Acoustic features (issue 15): Praat pitch, intensity, rates, the per-speaker range, nulls, resume, CLI."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import soundfile

from experiments import acoustics as acoustics_cli
from experiments.analysis import acoustic
from experiments.analysis.acoustic import AcousticError, compute_acoustics, first_pass_f0, mean_intensity_db, pitch_range, pitch_values, rate, syllable_nuclei
from extract.audio import SAMPLE_RATE
from extract.manifest import Utterance, write_manifest
from tests.paths import CHECKOUT


def harmonic(f0: float, seconds: float = 1.0, amplitude: float = 0.1, harmonics: int = 5) -> np.ndarray:
    """A periodic signal at ``f0`` with decaying harmonics (voice-like: Praat finds its period)."""
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    return (amplitude * sum(np.sin(2 * np.pi * k * f0 * t) / k for k in range(1, harmonics + 1))).astype(np.float32)


@pytest.mark.parametrize("f0", [110.0, 220.0])
def test_praat_pitch_of_a_periodic_signal(f0):
    values = first_pass_f0(harmonic(f0))
    assert len(values) > 80  # voiced nearly throughout the second
    assert abs(values.mean() - f0) < 2.0
    found = pitch_range(values)
    _, second = pitch_values(harmonic(f0), found.floor, found.ceiling)
    assert abs(second[second > 0].mean() - f0) < 2.0


def test_pitch_range_is_three_quarters_of_q25_and_one_and_a_half_q75():
    values = np.arange(100.0, 201.0)  # q25 = 125, q75 = 175 (linear interpolation)
    found = pitch_range(values)
    assert found.floor == pytest.approx(0.75 * 125) and found.ceiling == pytest.approx(1.5 * 175) and found.frames == 101
    assert pitch_range(np.full(acoustic.MIN_RANGE_FRAMES - 1, 120.0)) is None


def test_intensity_of_a_known_rms():
    t = np.arange(2 * SAMPLE_RATE) / SAMPLE_RATE
    for amplitude in (0.1, 0.01):
        sine = (amplitude * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
        rms = amplitude / math.sqrt(2)
        assert mean_intensity_db(sine) == pytest.approx(20 * math.log10(rms / 2e-5), abs=0.05)  # 70.97 dB and 50.97 dB


def test_rates_by_hand():
    assert rate(15, 3.0) == 5.0
    assert rate(7, 2.5) == pytest.approx(2.8)
    with pytest.raises(ValueError):
        rate(3, 0.0)


def test_syllable_nuclei_count_voiced_bursts():
    burst, gap = harmonic(150.0, 0.15), np.zeros(int(0.15 * SAMPLE_RATE), dtype=np.float32)
    samples = np.concatenate([gap, burst, gap, burst, gap, burst, gap, burst, gap])
    pitch, _ = pitch_values(samples, 100.0, 300.0)
    assert syllable_nuclei(samples, pitch) == 4
    noise = np.random.default_rng(0).normal(0, 0.05, len(samples)).astype(np.float32) * np.repeat([0, 1, 0, 1, 0, 1, 0, 1, 0], len(gap))
    pitch, _ = pitch_values(noise, 100.0, 300.0)
    assert syllable_nuclei(noise, pitch) == 0  # loud but unvoiced: no nucleus


def _corpus(tmp_path):
    """Two voiced speakers (110 Hz, 220 Hz) with two records each, a noise-only speaker, a silent and a too-short record."""
    rng = np.random.default_rng(0)
    records = {
        "m-0": ("m", "male", harmonic(110.0, 1.0), "one five nine"),
        "m-1": ("m", "male", harmonic(110.0, 0.8), "four five"),
        "f-0": ("f", "female", harmonic(220.0, 1.2), "six seven eight nine"),
        "f-1": ("f", "female", harmonic(220.0, 0.5), "ten"),
        "noise-0": ("n", "female", rng.normal(0, 0.05, SAMPLE_RATE).astype(np.float32), "eleven twelve"),
        "silent-0": ("f", "female", np.zeros(SAMPLE_RATE, dtype=np.float32), "thirteen"),
        "short-0": ("m", "male", harmonic(110.0, 0.05), "fourteen"),
    }
    utterances = []
    for record_id, (speaker, gender, samples, text) in records.items():
        soundfile.write(tmp_path / f"{record_id}.wav", samples, SAMPLE_RATE, subtype="FLOAT")
        utterances.append(Utterance(record_id, str(tmp_path / f"{record_id}.wav"), "en", text, gender, speaker, dataset="toy"))
    return utterances


def _words(text: str) -> int:
    return len(text.split())


def _rows(path):
    return {row["id"]: row for row in map(json.loads, path.read_text().splitlines())}


def test_compute_acoustics_values_nulls_and_resume(tmp_path):
    utterances = _corpus(tmp_path)
    out = tmp_path / "out" / "features.jsonl"
    summary = compute_acoustics(utterances, out, _words, "words", speech="duration", workers=1, show_progress=False)
    rows = _rows(out)
    assert summary["records"] == 7 and summary["computed_now"] == 7
    assert abs(rows["m-0"]["features"]["f0_mean_hz"] - 110) < 2 and abs(rows["f-1"]["features"]["f0_mean_hz"] - 220) < 2
    assert rows["m-0"]["features"]["rate_tokens_per_second"] == pytest.approx(3 / 1.0)  # 3 words over the whole 1.0 s clip
    assert rows["f-0"]["features"]["rate_tokens_per_second"] == pytest.approx(4 / 1.2)
    assert rows["m-0"]["features"]["intensity_mean_db"] > 60
    ranges = json.loads(out.with_suffix(".ranges.json").read_text())["ranges"]
    assert ranges["f"]["floor"] == pytest.approx(0.75 * 220, abs=2) and ranges["f"]["ceiling"] == pytest.approx(1.5 * 220, abs=3)
    assert rows["noise-0"]["features"]["f0_mean_hz"] is None and "too few voiced frames" in rows["noise-0"]["null_reasons"]["f0_mean_hz"]
    assert rows["noise-0"]["features"]["intensity_mean_db"] is not None
    assert all(v is None for v in rows["silent-0"]["features"].values())
    assert rows["silent-0"]["null_reasons"]["f0_mean_hz"].startswith("no usable audio (AudioSilentError")
    assert all(v is None for v in rows["short-0"]["features"].values()) and rows["short-0"]["null_reasons"]["f0_mean_hz"].startswith("too short")
    assert summary["nulls"]["f0_mean_hz"] == {
        rows["noise-0"]["null_reasons"]["f0_mean_hz"]: 1,
        rows["silent-0"]["null_reasons"]["f0_mean_hz"]: 1,
        rows["short-0"]["null_reasons"]["f0_mean_hz"]: 1,
    }
    # resume: nothing to do; a lost row (and a line cut off by a killed run) is recomputed once
    assert compute_acoustics(utterances, out, _words, "words", speech="duration", show_progress=False)["computed_now"] == 0
    lines = out.read_text().splitlines()
    out.write_text("\n".join(line for line in lines if '"m-1"' not in line) + "\n" + '{"id": "f-')
    again = compute_acoustics(utterances, out, _words, "words", speech="duration", show_progress=False)
    assert again["computed_now"] == 1 and again["records"] == 7
    assert _rows(out)["m-1"]["features"] == rows["m-1"]["features"]
    with pytest.raises(AcousticError, match="other settings"):
        compute_acoustics(utterances, out, _words, "words", speech="duration", range_by="record", show_progress=False)
    with pytest.raises(AcousticError, match="not in the manifest"):
        compute_acoustics(utterances[:3], out, _words, "words", speech="duration", show_progress=False)


def test_a_constant_waveform_has_no_intensity_and_says_why(tmp_path):
    """Praat reports -300 dB (its floor) for a DC waveform: that is no level, so the feature is null with its reason."""
    soundfile.write(tmp_path / "dc.wav", np.full(SAMPLE_RATE, 0.5, np.float32), SAMPLE_RATE, subtype="FLOAT")
    soundfile.write(tmp_path / "tone.wav", harmonic(110.0), SAMPLE_RATE, subtype="FLOAT")
    utterances = [Utterance(name, str(tmp_path / f"{name}.wav"), "en", "one two", "male", name, dataset="toy") for name in ("dc", "tone")]
    out = tmp_path / "features.jsonl"
    summary = compute_acoustics(utterances, out, _words, "words", speech="duration", workers=1, show_progress=False)
    rows = _rows(out)
    assert rows["dc"]["features"]["intensity_mean_db"] is None
    assert rows["dc"]["null_reasons"]["intensity_mean_db"].startswith("no energy once the mean is subtracted (a constant waveform)")
    assert summary["nulls"]["intensity_mean_db"] == {rows["dc"]["null_reasons"]["intensity_mean_db"]: 1}
    assert rows["tone"]["features"]["intensity_mean_db"] == pytest.approx(mean_intensity_db(harmonic(110.0)))


def test_parallel_workers_give_the_same_rows(tmp_path):
    utterances = _corpus(tmp_path)[:4]
    compute_acoustics(utterances, tmp_path / "one.jsonl", _words, "words", speech="duration", workers=1, show_progress=False)
    compute_acoustics(utterances, tmp_path / "two.jsonl", _words, "words", speech="duration", workers=2, show_progress=False)
    assert _rows(tmp_path / "one.jsonl") == _rows(tmp_path / "two.jsonl")


@pytest.mark.slow
def test_cli_counts_whisper_tokens(tmp_path, capsys):
    """The bundled Whisper tokenizer (about 10 s to load here)."""
    utterances = _corpus(tmp_path)[:2]
    manifest = write_manifest(tmp_path / "m.jsonl", utterances)
    out = tmp_path / "features.jsonl"
    assert acoustics_cli.main(["--manifest", str(manifest), "--out", str(out), "--speech", "duration", "--workers", "1", "--quiet"]) == 0
    rows = _rows(out)
    assert set(rows) == {"m-0", "m-1"}
    assert rows["m-0"]["details"]["tokens"] == 3  # "one five nine": one Whisper token per word
    assert rows["m-0"]["features"]["rate_tokens_per_second"] == pytest.approx(3.0)
    assert "wrote" in capsys.readouterr().out


def test_cli_fails_in_one_line(tmp_path, capsys):
    manifest = write_manifest(tmp_path / "m.jsonl", _corpus(tmp_path)[:1])
    out = tmp_path / "features.jsonl"
    assert acoustics_cli.main(["--manifest", str(tmp_path / "missing.jsonl"), "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error:") and len(error.strip().splitlines()) == 1
    with pytest.raises(SystemExit) as exit_info:
        acoustics_cli.main(["--manifest", str(manifest), "--out", str(out), "--workers", "0"])
    assert exit_info.value.code == 2


def _descendants(pid: int) -> set[int]:
    """Every live process below ``pid``, from /proc (zombies count as ended)."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.add(pid)
    return alive


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process tree from /proc")
@pytest.mark.parametrize("signal_name", ["SIGKILL", "SIGTERM"])
def test_killing_a_parallel_run_leaves_no_worker_behind(tmp_path, signal_name):
    """``kill -9`` of ``acoustics --workers 2`` left its fork server and both workers running, blocked
    for ever on a queue whose writer they held themselves. The workers end with the main process,
    then the fork server and the resource tracker, whose last users they were."""
    import os
    import signal
    import subprocess
    import sys
    import time

    soundfile.write(tmp_path / "a.wav", harmonic(150.0, 4.0), SAMPLE_RATE)
    out = tmp_path / "features.jsonl"
    script = (
        "from experiments.analysis.acoustic import compute_acoustics\n"
        "from extract.manifest import Utterance\n"
        f"records = [Utterance(f'u{{i}}', {str(tmp_path / 'a.wav')!r}, 'en', 'a b', 'female', f's{{i % 4}}') for i in range(2000)]\n"
        f"compute_acoustics(records, {str(out)!r}, lambda text: 2, 'words', speech='duration', workers=2, show_progress=False)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", script], cwd=CHECKOUT)
    workers: set[int] = set()
    try:
        deadline = time.monotonic() + 120
        while len(workers) < 4:  # the resource tracker, the fork server and two workers
            assert process.poll() is None and time.monotonic() < deadline, "the run ended or never started its workers"
            time.sleep(0.2)
            workers = _descendants(process.pid)
        time.sleep(1.0)  # the workers are computing
        os.kill(process.pid, getattr(signal, signal_name))
        process.wait(timeout=30)
        deadline = time.monotonic() + 30
        while _alive(workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _alive(workers) == set()
    finally:
        for pid in _alive(workers) | ({process.pid} if process.poll() is None else set()):
            os.kill(pid, signal.SIGKILL)
