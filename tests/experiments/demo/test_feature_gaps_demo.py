"""The demo stage ``analyses`` (issue 15) on a tiny stand-in for the demo's work folder: four
periodic "voices", a store whose first site separates them, and gap reports from hand-made hypotheses."""

import numpy as np
import pytest
import soundfile

from experiments.demo.extras import analyses
from experiments.demo.work import Work
from experiments.recipes.democorpus.build import DemoCorpus
from experiments.scoring.gaps import gap_report, save_gap_report
from extract.audio import SAMPLE_RATE
from extract.manifest import Utterance, write_manifest
from extract.store import PartWriter

VOICES = {"f-low": ("female", 210.0), "f-high": ("female", 240.0), "m-low": ("male", 105.0), "m-high": ("male", 125.0)}
SENTENCES = ("one five nine", "four five six seven", "eight nine")


def _voice(f0: float, seconds: float) -> np.ndarray:
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    return (0.1 * sum(np.sin(2 * np.pi * k * f0 * t) / k for k in range(1, 6))).astype(np.float32)


def _work(tmp_path) -> Work:
    corpus_root, root = tmp_path / "corpus", tmp_path / "work"
    (corpus_root / "audio").mkdir(parents=True)
    utterances, hypotheses = [], {"whisper-base": [], "whisper-tiny.en": []}
    for v, (voice, (gender, f0)) in enumerate(VOICES.items()):
        for language in ("en", "es"):
            for s, text in enumerate(SENTENCES):
                record_id = f"{voice}-{language}-{s}"
                soundfile.write(corpus_root / "audio" / f"{record_id}.wav", _voice(f0, 0.5 + 0.1 * s), SAMPLE_RATE, subtype="FLOAT")
                utterances.append(Utterance(record_id, f"audio/{record_id}.wav", language, text, gender, voice, dataset="demo"))
                row = {"id": record_id, "reference": text, "gender": gender, "speaker": voice, "language": language}
                wrong = (s + v) % 2 == 0 or gender == "female"  # the female voices err more
                hypotheses["whisper-base"].append(row | {"hypothesis": text.replace("five", "fife") if wrong else text})
                if language == "en":
                    hypotheses["whisper-tiny.en"].append(row | {"hypothesis": "x " + text if wrong else text})
    write_manifest(corpus_root / "manifest.jsonl", utterances)
    for name, rows in hypotheses.items():
        report, counts = gap_report(rows, ("female", "male"), iterations=50, seed=0)
        save_gap_report(report, counts, root / "behaviour" / name / "gap-demo-all.json")  # where the demo's study writes them
    store = root / "stores" / "whisper-base" / "demo-all"
    store.mkdir(parents=True)
    sites = {"encoder.layer.0": 4, "encoder.final": 4}
    writer = PartWriter(store / "part-00000.h5", sites, "float32", {"model_id": "synthetic", "config": "{}"})
    rng = np.random.default_rng(0)
    for u in utterances:
        voice = list(VOICES).index(u.speaker)
        separated = np.eye(4)[voice] * 5 + rng.normal(0, 0.05, (10, 4))
        states = {"encoder.layer.0": separated.astype(np.float32), "encoder.final": rng.normal(0, 1, (10, 4)).astype(np.float32)}
        writer.add(u.id, states, {"gender": u.gender, "speaker": u.speaker, "language": u.language, "split": "", "dataset": "demo", "duration": 0.2})
    writer.close()
    return Work(root, DemoCorpus(corpus_root), root / "report", "float32", 1)


@pytest.mark.slow
def test_stage_reports_synthetic_tables_and_reruns_from_its_files(tmp_path, monkeypatch):
    """The whole stage (about 10 s on an idle 2-core machine, plus importing the demo)."""
    monkeypatch.setattr(analyses, "WORKERS", 1)
    monkeypatch.setattr(analyses, "SPEECH", "duration")  # periodic tones are not speech to silero-vad
    monkeypatch.setattr(analyses, "_token_counter", lambda: lambda text: len(text.split()))
    work = _work(tmp_path)
    lines = analyses.run(work)
    text = "\n".join(lines)
    assert lines[0].startswith("## What explains a gap") and "(synthetic voices)" in lines[0]
    assert "**Three points: a correlation over 3 setups means nothing**" in text
    rows = {line.split(" | ")[0].strip("| "): line for line in lines if line.startswith("| f-") or line.startswith("| m-")}
    assert set(rows) == set(VOICES)
    f0 = {voice: float(rows[voice].split(" | ")[4]) for voice in VOICES}
    assert all(abs(f0[voice] - VOICES[voice][1]) < 2 for voice in VOICES)
    assert "| demo/en/whisper-base |" in text and "| demo/es/whisper-base |" in text and "| demo/en/whisper-tiny.en |" in text
    cluster_rows = {line.split(" | ")[0].strip("| "): line.split(" | ") for line in lines if line.startswith("| encoder.") or line.startswith("| MFCC")}
    assert float(cluster_rows["encoder.layer.0"][4]) == pytest.approx(1.0)  # ARI: the first site separates the four voices
    assert (work.out / "analyses_f0.png").is_file() and (work.root / "analyses" / "results.json").is_file()
    timing = (work.root / "analyses" / "acoustic.timing.json").stat().st_mtime
    assert analyses.run(work) == lines  # a rerun reads its files back
    assert (work.root / "analyses" / "acoustic.timing.json").stat().st_mtime == timing
