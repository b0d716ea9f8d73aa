"""``experiments.embedding_store``: speaker embeddings (Resemblyzer's GE2E, MFCC statistics) as a
one-frame store, probed leave-one-speaker-out like any model's, its rows a baseline in collect's tables."""

import json

import numpy as np
import pytest
import soundfile

from experiments.collect import main as collect_main
from experiments.embedding_store import main
from experiments.results.collect import read_csv
from extract.manifest import Utterance, write_manifest
from extract.store import ShardReader
from probing.results import load_rows, save_result
from probing.run import ProbeConfig, run_probe


def _voices(folder, speakers=3, clips=3):
    """Buzzes (harmonics of one F0 per speaker, 1 s at 16 kHz): female speakers near 220 Hz, male near 110 Hz."""
    rng = np.random.default_rng(0)
    rows, t = [], np.arange(16000) / 16000
    for gender, base in (("female", 220.0), ("male", 110.0)):
        for s in range(speakers):
            f0 = base * (1 + 0.05 * s)
            for c in range(clips):
                wave = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, 8)) * 0.1 + rng.normal(0, 0.005, t.size)
                path = folder / f"{gender}{s}-{c}.wav"
                soundfile.write(path, wave.astype(np.float32), 16000)
                rows.append(Utterance(f"{gender}{s}-{c}", str(path), "en", "text", gender, f"{gender}{s}", dataset="buzz"))
    return write_manifest(folder / "manifest.jsonl", rows)


@pytest.mark.parametrize("source", ["mfcc", "resemblyzer"])
def test_an_embedding_store_is_probed_leave_one_speaker_out_and_collected_as_a_baseline(tmp_path, capsys, source):
    manifest = _voices(tmp_path)
    store = tmp_path / "stores" / source
    assert main(["--manifest", str(manifest), "--embeddings", source, "--out", str(store), "--quiet"]) == 0
    printed = capsys.readouterr().out
    dim = {"mfcc": 26, "resemblyzer": 256}[source]
    assert f"18 records of {manifest}: {dim}-d {source} embeddings" in printed
    reader = ShardReader(store)
    assert reader.sites == ["embedding"] and reader.dim("embedding") == dim and len(reader.ids) == 18
    assert all(reader.length("embedding", i) == 1 for i in reader.ids) and reader.info.family == "speaker-embedding"
    result = run_probe(ProbeConfig(str(store), "embedding", probe="mean", split="loso"))
    label = {"mfcc": "mfcc-stats", "resemblyzer": "resemblyzer-ge2e"}[source]
    assert result.row["subject"]["model"] == label and result.row["splits"]["folds"] == 6
    assert result.row["f1_macro"] > 80  # a pitch an octave apart is read across speakers
    save_result(result, tmp_path / "probes.jsonl")
    assert collect_main(["--probes", str(tmp_path / "probes.jsonl"), "--out", str(tmp_path / "collected")]) == 0
    long = [r for r in read_csv(tmp_path / "collected" / "long.csv") if r["metric"] == "f1_macro"]
    assert [(r["model"], r["site"], r["site_role"], r["split"]) for r in long] == [(label, "embedding", "baseline", "loso")]
    assert list(load_rows(tmp_path / "probes.jsonl").values())[0]["config"]["site"] == "embedding"
    assert json.loads(json.dumps(reader.info.config))["embeddings"] == source


def test_a_store_source_or_a_used_folder_is_refused_in_one_line(tmp_path, capsys):
    manifest = _voices(tmp_path, speakers=1, clips=1)
    assert main(["--manifest", str(manifest), "--embeddings", "store:elsewhere", "--out", str(tmp_path / "s")]) == 2
    assert "is a store already: probe it directly" in capsys.readouterr().err
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "x").write_text("")
    assert main(["--manifest", str(manifest), "--embeddings", "mfcc", "--out", str(tmp_path / "used")]) == 2
    assert "is not empty; give a new folder" in capsys.readouterr().err
