"""``experiments.figures`` reads result files through their records (``extract.records``): a file
written before formats were versioned draws as before, a newer version or another kind is one line."""

import json

from experiments.figures import main as figures_main

# a gap report as experiments.asr_gap wrote it before reports recorded schema and kind
OLD_GAP = {
    "languages": {
        "en": {"metric": "wer", "error_distribution": {"female": [100.0, 60.0, 40.0], "male": [100.0, 30.0, 20.0]}},
    }
}


def test_an_old_gap_report_draws_and_a_newer_one_is_refused_in_one_line(tmp_path, capsys):
    gap = tmp_path / "gap.json"
    gap.write_text(json.dumps(OLD_GAP))
    assert figures_main(["error-distribution", "--gap", str(gap), "--language", "en", "--out", str(tmp_path / "old")]) == 0
    assert (tmp_path / "old.png").stat().st_size > 0
    capsys.readouterr()
    gap.write_text(json.dumps(OLD_GAP | {"schema": 2, "kind": "asr_gap"}))
    assert figures_main(["gaps", "--gap", f"fleurs={gap}", "--out", str(tmp_path / "new")]) == 2
    assert capsys.readouterr().err.splitlines() == [f"error: {gap}: a gap report of schema 2, newer than this code reads (1); update the package"]


def test_a_result_of_another_kind_is_not_taken_for_a_gap_report(tmp_path, capsys):
    scores = tmp_path / "mustshe.json"
    scores.write_text(json.dumps({"schema": 1, "kind": "mustshe", "category_1": {}}))
    assert figures_main(["error-distribution", "--gap", str(scores), "--language", "en", "--out", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err.splitlines() == [f"error: {scores}: a mustshe result, not a gap report"]
