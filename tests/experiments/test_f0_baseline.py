"""The F0-only baseline (issue 23, item 2): F0 statistics as a store, probed with the hidden-state probes' code and splits."""

import json
import math

import numpy as np
import pytest
import soundfile

from experiments import f0_baseline
from experiments.analysis.f0 import F0_FEATURES, F0_LABEL, F0_SITE, f0_statistics
from extract.manifest import Utterance, write_manifest
from extract.store import ShardReader
from probing.run import ProbeConfig, run_probe

RATE = 16_000


def _voice(path, f0, seconds=0.6):
    """A harmonic tone at ``f0`` Hz with a slight vibrato (five harmonics, falling amplitude)."""
    t = np.arange(int(seconds * RATE)) / RATE
    phase = 2 * np.pi * f0 * (t + 0.002 * np.sin(2 * np.pi * 5 * t) / (2 * np.pi * 5))
    samples = sum(np.sin(k * phase) / k for k in range(1, 6)) * 0.2
    soundfile.write(path, samples.astype(np.float32), RATE, subtype="PCM_16")
    return path


def _corpus(folder, pitches, speakers=3, utterances=4, seed=0):
    """``pitches[gender](speaker, utterance, rng)`` Hz per record; 3 speakers per gender, 4 records each."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    records = []
    for gender in ("female", "male"):
        for s in range(speakers):
            for u in range(utterances):
                name = f"{gender}-{s}-{u}"
                audio = _voice(folder / f"{name}.wav", pitches[gender](s, u, rng))
                records.append(Utterance(name, str(audio), "en", "a text", gender, f"{gender}-{s}", dataset="tones"))
    return write_manifest(folder / "manifest.jsonl", records)


def _probe(store, **options):
    return run_probe(ProbeConfig(str(store), F0_SITE, probe="mean", **options)).row


def test_f0_statistics_by_hand():
    values = f0_statistics(np.array([100.0, 200.0, 400.0]))
    assert values.dtype == np.float32 and values.shape == (len(F0_FEATURES),)
    assert values == pytest.approx([math.log(200), math.log(200), math.log(2) * math.sqrt(2 / 3)], rel=1e-6)


def test_two_pitch_groups_are_read_at_ceiling_across_speakers(tmp_path, capsys):
    pitches = {"female": lambda s, u, rng: 200 + 15 * s + 4 * u, "male": lambda s, u, rng: 100 + 10 * s + 3 * u}
    manifest = _corpus(tmp_path / "audio", pitches)
    store = tmp_path / "f0"
    assert f0_baseline.main(["--manifest", str(manifest), "--out", str(store), "--quiet"]) == 0
    assert "24 records stored, 0 without F0" in capsys.readouterr().out
    reader = ShardReader(store)
    assert reader.sites == [F0_SITE] and reader.dim(F0_SITE) == 3 and len(reader) == 24
    female = reader.get(F0_SITE, "female-0-0")[0]
    assert female[0] == pytest.approx(math.log(200), abs=0.01) and female[2] < 0.02  # ln median F0; a steady tone barely moves
    row = _probe(store, split="loso")
    assert row["f1_macro"] == 100.0 and [fold["accuracy"] for fold in row["folds"]] == [100.0] * 6
    assert row["subject"]["model"] == F0_LABEL and row["subject"]["family"] == "praat" and row["config"]["site"] == F0_SITE
    assert _probe(store, split="loso", control="shuffled")["f1_macro"] < 75  # the control still reads chance
    assert f0_baseline.main(["--manifest", str(manifest), "--out", str(store), "--quiet"]) == 0
    assert "already holds this F0 store" in capsys.readouterr().out
    assert f0_baseline.main(["--manifest", str(manifest), "--out", str(store), "--range-by", "record", "--quiet"]) == 2
    assert capsys.readouterr().err.startswith(f"error: {store} holds an F0 store written with another configuration")


def test_equal_pitches_are_read_at_chance(tmp_path):
    same = lambda s, u, rng: 150 * (1 + 0.05 * rng.standard_normal())  # noqa: E731 - both genders draw from one distribution
    store = tmp_path / "f0"
    assert f0_baseline.main(["--manifest", str(_corpus(tmp_path / "audio", {"female": same, "male": same})), "--out", str(store), "--quiet"]) == 0
    row = _probe(store, split="loso")
    # at or below chance: holding a speaker out moves its class's training mean away from its own
    # values, so on features without signal leave-one-speaker-out errs against the held-out class
    # (measured here: F1 24.5, accuracy 25 on 6 speakers)
    assert row["f1_macro"] < 55 and row["accuracy"] <= 55


def test_records_without_f0_are_listed_not_stored(tmp_path, capsys):
    pitches = {"female": lambda s, u, rng: 210.0, "male": lambda s, u, rng: 110.0}
    manifest = _corpus(tmp_path / "audio", pitches, speakers=2, utterances=2)
    noise = 0.1 * np.random.default_rng(0).standard_normal(RATE // 2).astype(np.float32)
    soundfile.write(tmp_path / "audio" / "noise.wav", noise, RATE)
    soundfile.write(tmp_path / "audio" / "short.wav", noise[: RATE // 20], RATE)
    lines = manifest.read_text().splitlines()
    for name in ("noise", "short"):
        record = {"id": name, "audio": str(tmp_path / "audio" / f"{name}.wav"), "language": "en", "text": "t", "gender": "male", "speaker": name}
        lines.append(json.dumps(record))
    manifest.write_text("\n".join(lines) + "\n")
    store = tmp_path / "f0"
    assert f0_baseline.main(["--manifest", str(manifest), "--out", str(store), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "8 records stored, 2 without F0" in printed and "short: too short (0.050 s < 0.1 s)" in printed
    reader = ShardReader(store)
    assert len(reader) == 8
    skipped = {entry["id"]: entry["reason"] for entry in reader.skipped()}
    assert skipped["noise"].startswith("too few voiced frames for a pitch range (0 < 20")


def test_an_empty_result_and_a_foreign_folder_are_refused(tmp_path, capsys):
    soundfile.write(tmp_path / "noise.wav", 0.1 * np.random.default_rng(0).standard_normal(RATE).astype(np.float32), RATE)
    manifest = write_manifest(tmp_path / "m.jsonl", [Utterance("a", str(tmp_path / "noise.wav"), "en", "t", "female", "s")])
    assert f0_baseline.main(["--manifest", str(manifest), "--out", str(tmp_path / "f0"), "--quiet"]) == 2
    assert capsys.readouterr().err.startswith(f"error: no record of {manifest} has F0 (e.g. a: too few voiced frames")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    assert f0_baseline.main(["--manifest", str(manifest), "--out", str(tmp_path / "other"), "--quiet"]) == 2
    assert "is not empty and holds no F0 store" in capsys.readouterr().err
