"""Probes across real speakers and the offline speaker encoder on real clips (issue 23, items 2 and 4).

A few clips per voice of the real-voice recipe (French, Italian, Russian: 4 female and 3 male
speakers), fetched with apt-get into the cache; skipped, with the reason, where apt-get cannot reach
its archive (no network, no package lists, not Debian), as tests/experiments/realvoices/test_realvoices_real.py is.
"""

import importlib.util
import json

import numpy as np
import pytest

from experiments import f0_baseline
from experiments import speakers as speakers_cli
from extract.audio import load_audio
from extract.manifest import read_manifest, write_manifest
from probing.run import ProbeConfig, run_probe

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def corpus(real_voices):
    return real_voices[1]


def test_f0_alone_reads_gender_across_real_speakers(corpus, tmp_path):
    store = tmp_path / "f0"
    assert f0_baseline.main(["--manifest", str(corpus), "--out", str(store), "--quiet"]) == 0
    row = run_probe(ProbeConfig(str(store), "f0", probe="mean", split="loso")).row
    assert row["splits"]["folds"] == 7 and row["splits"]["speakers"] == {"male": 3, "female": 4}
    assert row["f1_macro"] >= 70, row["folds"]  # measured: 88.9 (the Italian male voice 50, the 8 kHz Italian female 75)
    control = run_probe(ProbeConfig(str(store), "f0", probe="mean", split="loso", control="shuffled")).row
    assert control["f1_macro"] <= 65 and control["selectivity"] >= 15


@pytest.mark.skipif(importlib.util.find_spec("resemblyzer") is None, reason="resemblyzer is not installed (the speakers extra)")
def test_resemblyzer_tells_real_speakers_apart(corpus, tmp_path):
    from experiments.analysis.speakers import ResemblyzerEncoder

    utterances = read_manifest(corpus)
    encoder = ResemblyzerEncoder()
    embeddings = np.stack([encoder(load_audio(u.audio).samples) for u in utterances])
    assert embeddings.shape == (len(utterances), 256) and np.isfinite(embeddings).all()
    speakers = np.array([u.speaker for u in utterances])
    similarity = embeddings @ embeddings.T
    same = speakers[:, None] == speakers[None, :]
    np.fill_diagonal(similarity, -np.inf)
    nearest = speakers[similarity.argmax(axis=1)]
    assert np.mean(nearest == speakers) >= 0.75  # measured: 0.86 here, 0.96 over 10 clips of each of the 15 speakers
    off_diagonal = ~np.eye(len(utterances), dtype=bool)
    assert similarity[same & off_diagonal].mean() > similarity[~same].mean() + 0.1
    for utterance in utterances:  # one scope, so that clustering has to tell all the voices apart
        utterance.dataset, utterance.language = "real", "xx"
    manifest = write_manifest(tmp_path / "one-scope.jsonl", utterances)
    out = tmp_path / "clustered.jsonl"
    assert speakers_cli.main(["--manifest", str(manifest), "--embeddings", "resemblyzer", "--out", str(out), "--quiet"]) == 0
    report = json.loads(out.with_suffix(".clustering.json").read_text())
    assert report["against_known_speakers"]["purity"] >= 0.7  # another draw of 4 clips a voice: 0.86 (ARI 0.52: HDBSCAN splits voices)
