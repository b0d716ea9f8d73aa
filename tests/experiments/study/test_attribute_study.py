"""A study file whose probe grid names an attribute task (issue 32 item 1): planned (a missing
attribute refused by --dry-run, in one line) and run end to end with a tiny random Whisper."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import soundfile

from experiments.study.__main__ import main
from extract.manifest import Utterance, write_manifest

RATE = 16_000
STUDY = """\
name: accents
out: runs/accents
device: cpu
models:
  - {{name: tiny, family: whisper, checkpoint: tiny-random, sites: [encoder.final], transcribe: false}}
corpora:
  - {{name: toy, task: asr, manifests: {{en: toy-en.jsonl}}}}
probes: {{probes: [mean], controls: [none], seeds: [0], task: "{task}"}}
"""


def write_accents(root: Path) -> Path:
    """Eight speakers, two half-second tones each; accent north or south, each with two female and two male speakers."""
    rows = []
    for number in range(8):
        speaker, accent = f"s{number}", ("north", "south")[number % 2]
        gender = ("female", "male")[(number // 2) % 2]
        for clip in range(2):
            path = root / "audio" / f"{speaker}-{clip}.wav"
            path.parent.mkdir(parents=True, exist_ok=True)
            t = np.arange(RATE // 2) / RATE
            soundfile.write(path, (0.3 * np.sin(2 * np.pi * (140.0 + 20 * number) * t)).astype(np.float32), RATE)
            rows.append(Utterance(path.stem, str(path), "en", "one two", gender, speaker, dataset="toy", extra={"accent": accent}))
    return write_manifest(root / "toy-en.jsonl", rows)


def test_a_study_probes_an_attribute(tmp_path, capsys):
    write_accents(tmp_path)
    missing = tmp_path / "missing.yaml"
    missing.write_text(STUDY.format(task="attribute:age"))
    assert main(["run", str(missing), "--dry-run"]) == 2
    error = capsys.readouterr().err
    assert "probes: tiny toy-en" in error and "no utterance has a value of extra.age" in error and error.count("\n") == 1
    study = tmp_path / "accents.yaml"
    study.write_text(STUDY.format(task="attribute:accent"))
    assert main(["run", str(study), "--quiet"]) == 0
    (row,) = [json.loads(line) for line in (tmp_path / "runs/accents/probes/probes.jsonl").read_text().splitlines()]
    assert row["config"]["task"] == "attribute:accent" and row["classes"] == ["north", "south"] and row["labels"]["unlabelled"] == 0


def test_the_pages_study_file_plans(tmp_path, capsys):
    """docs/attributes.md's study file, as written, planned with --dry-run on a placeholder corpus with extra.engine."""
    import re

    from tests.paths import CHECKOUT

    page = (CHECKOUT / "docs" / "attributes.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```yaml\n(.*?)```", page, re.S)
    rows = []
    for number in range(8):
        speaker, engine, gender = f"v{number}", ("espeak", "kokoro")[number % 2], ("female", "male")[(number // 2) % 2]
        path = tmp_path / "DATA" / "audio" / f"{speaker}.wav"
        path.parent.mkdir(parents=True, exist_ok=True)
        soundfile.write(path, np.zeros(RATE // 2, dtype=np.float32), RATE)
        rows.append(Utterance(speaker, str(path), "en", "one two", gender, speaker, dataset="demo", extra={"engine": engine}))
    write_manifest(tmp_path / "DATA" / "manifest.jsonl", rows)
    study = tmp_path / "engines.yaml"
    study.write_text(block, encoding="utf-8")
    assert main(["run", str(study), "--dry-run"]) == 0, capsys.readouterr().err
    planned = capsys.readouterr().out
    assert "wb demo-all encoder.final mean control=none seed=0 task=attribute:engine" in planned
    assert "wb demo-all encoder.layer.3 positional control=shuffled seed=0 task=attribute:engine:espeak,kokoro" in planned
