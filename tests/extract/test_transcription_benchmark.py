"""benchmarks/transcription.py: the subset it picks, its rows, its refusals (a tiny random Whisper, offline)."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import soundfile

from tests.paths import CHECKOUT

SPEC = importlib.util.spec_from_file_location("transcription_benchmark", CHECKOUT / "benchmarks" / "transcription.py")
bench = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(bench)


def write_manifest(folder: Path, languages: list[str]) -> Path:
    rows = []
    for index, language in enumerate(languages):
        path = folder / f"u{index}.wav"
        seconds = 1.0 + 0.25 * index
        t = np.arange(int(16_000 * seconds)) / 16_000
        soundfile.write(path, (0.1 * np.sin(2 * np.pi * (120 + 40 * index) * t)).astype(np.float32), 16_000)
        gender = "female" if index % 2 else "male"
        rows.append({"id": f"u{index}", "audio": str(path), "language": language, "text": "hello world", "gender": gender, "speaker": f"s{index}"})
    manifest = folder / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return manifest


def test_the_subset_is_the_first_n_of_each_language_in_manifest_order(tmp_path):
    manifest = write_manifest(tmp_path, ["en", "en", "es", "en", "es", "es"])
    assert [u.id for u in bench.chosen_utterances(manifest, 1)] == ["u0", "u2"]
    assert [u.id for u in bench.chosen_utterances(manifest, 2)] == ["u0", "u1", "u2", "u4"]
    assert [u.id for u in bench.chosen_utterances(manifest, None)] == [f"u{index}" for index in range(6)]


def test_every_batch_size_gives_a_row_with_its_rate_error_rates_and_differences(tmp_path, capsys):
    manifest = write_manifest(tmp_path, ["en", "es", "en", "es"])
    out = tmp_path / "rows.json"
    argv = ["--manifest", str(manifest), "--checkpoint", "tiny-random", "--dtype", "float32", "--threads", "1"]
    assert bench.main([*argv, "--batch-sizes", "1", "4", "1", "--max-new-tokens", "3", "--rounds", "2", "--json", str(out)]) == 0
    written = json.loads(out.read_text())
    assert written["settings"]["max_new_tokens"] == 3 and written["settings"]["checkpoint"] == "tiny-random"
    rows = written["rows"]
    assert [row["batch_size"] for row in rows] == [1, 4]  # a size given twice is measured once
    for row in rows:
        assert row["utterances"] == 4 and row["seconds"] > 0
        assert row["utterances_per_second"] == pytest.approx(4 / row["seconds"], rel=0.05)  # both rounded
        assert set(row["error_rate"]) == {"en", "es"} and all(rate >= 0 for rate in row["error_rate"].values())
        assert isinstance(row["hypotheses_differing_from_batch_1"], list)
    assert rows[0]["hypotheses_differing_from_batch_1"] == []
    printed = capsys.readouterr().out
    assert "| batch | utt/s | seconds | CPU seconds |" in printed and "round 2 batch 4:" in printed


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--batch-sizes", "4", "0"], "--batch-sizes must be at least 1, got 0"),
        (["--limit", "0"], "--limit must be at least 1, got 0"),
        (["--rounds", "0"], "--rounds must be at least 1, got 0"),
    ],
)
def test_bad_options_are_one_error_line(tmp_path, capsys, argv, message):
    manifest = write_manifest(tmp_path, ["en"])
    with pytest.raises(SystemExit) as exit_info:
        bench.parse_args(["--manifest", str(manifest), *argv])
    assert exit_info.value.code == 2 and f"error: {message}" in capsys.readouterr().err


def test_a_missing_manifest_says_how_to_build_it(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench.parse_args(["--manifest", str(tmp_path / "none.jsonl")])
    assert exit_info.value.code == 2 and "build the demo corpus first" in capsys.readouterr().err
