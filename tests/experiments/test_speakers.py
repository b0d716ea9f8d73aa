"""Speaker ids by HDBSCAN clustering (issue 15): groups recovered, noise as singletons, ARI and purity, sources, CLI."""

import importlib.util
import json

import numpy as np
import pytest
import soundfile

from experiments import speakers as speakers_cli
from experiments.analysis.speakers import (
    HdbscanSettings,
    ResemblyzerEncoder,
    Source,
    SpeakerError,
    agreement,
    assign_speakers,
    cluster,
    known_speakers,
    mfcc_statistics,
    parse_source,
    purity,
    speechbrain_encoder,
    store_embeddings,
)
from extract.manifest import Utterance, read_manifest, write_manifest
from extract.store import PartWriter

SETTINGS = HdbscanSettings(min_cluster_size=3)


def separated(per_group: int = 8, groups: int = 3, dim: int = 6, seed: int = 0) -> tuple[np.ndarray, list[str]]:
    """Tight groups around orthogonal directions and one outlier in a direction of its own."""
    rng = np.random.default_rng(seed)
    centres = np.eye(dim)
    points = [centres[g] + rng.normal(0, 0.02, (per_group, dim)) for g in range(groups)]
    outlier = np.zeros((1, dim))
    outlier[0, -2:] = [0.7, -0.7]
    labels = [f"spk{g}" for g in range(groups) for _ in range(per_group)] + ["outlier"]
    return np.concatenate([*points, outlier]), labels


def test_well_separated_groups_are_recovered_and_the_outlier_is_noise():
    x, truth = separated()
    labels = cluster(x, SETTINGS)
    assert labels[-1] == -1 and (labels[:-1] >= 0).all()
    assert agreement(truth, [str(label) if label >= 0 else "noise-0" for label in labels])["adjusted_rand_index"] == 1.0


def test_assigned_ids_give_noise_its_own_singleton():
    x, truth = separated()
    utterances = [Utterance(f"u{i}", "a.wav", "fr", "t", "female", name, dataset="fleurs") for i, name in enumerate(truth)]
    assigned = assign_speakers(utterances, x, SETTINGS)
    speakers = [a["speaker"] for a in assigned]
    assert speakers[-1] == "fleurs-fr-female-noise000" and assigned[-1]["noise"] and assigned[-1]["cluster"] == -1
    assert len(set(speakers[:8])) == 1 and speakers[0].startswith("fleurs-fr-female-spk")
    score = agreement(truth, speakers)
    assert score["adjusted_rand_index"] == 1.0 and score["purity"] == 1.0 and score["clusters"] == 4


def test_scopes_split_genders_and_a_lone_record_is_noise():
    x, _ = separated(per_group=4, groups=2)
    genders = ["female"] * 4 + ["male"] * 4 + ["male"]
    utterances = [Utterance(f"u{i}", "a.wav", "fr", "t", g, "s") for i, g in enumerate(genders)]
    utterances[-1].language = "es"  # a scope of its own with a single record
    assigned = assign_speakers(utterances, x, SETTINGS)
    assert {a["scope"] for a in assigned} == {"nodataset-fr-female", "nodataset-fr-male", "nodataset-es-male"}
    assert assigned[-1]["speaker"] == "nodataset-es-male-noise000"
    assert len({a["speaker"] for a in assign_speakers(utterances, x, SETTINGS, per_gender=False)[:8]}) == 2


def test_purity_by_hand():
    true = ["a", "a", "a", "b", "b", "c"]
    predicted = ["x", "x", "y", "y", "y", "z"]
    assert purity(true, predicted) == pytest.approx((2 + 2 + 1) / 6)
    assert agreement(true, predicted)["inverse_purity"] == pytest.approx((2 + 2 + 1) / 6)


def test_known_speakers_skip_per_recording_ids():
    utterances = [Utterance("a", "a.wav", "fr", "t", "female", "s1"), Utterance("b", "b.wav", "fr", "t", "female", "rec-b", extra={"speaker_ids_known": False})]
    assert known_speakers(utterances) == [0]


def test_sources():
    assert parse_source("mfcc").kind == "mfcc"
    assert parse_source("speechbrain:speechbrain/spkrec-ecapa-voxceleb").location == "speechbrain/spkrec-ecapa-voxceleb"
    store = parse_source("store:/x/y@encoder.layer.3")
    assert (store.location, store.site) == ("/x/y", "encoder.layer.3")
    assert parse_source("store:/x/y").site is None
    assert parse_source("resemblyzer") == Source("resemblyzer")
    for bad in ("ecapa", "store:", "speechbrain", "mfcc:x", "resemblyzer:x"):
        with pytest.raises(SpeakerError, match="expected speechbrain:HUB_ID, store:PATH\\[@SITE\\], mfcc or resemblyzer"):
            parse_source(bad)


@pytest.mark.skipif(importlib.util.find_spec("speechbrain") is not None, reason="speechbrain is installed")
def test_speechbrain_missing_is_one_clear_line():
    with pytest.raises(SpeakerError, match="speechbrain is not installed"):
        speechbrain_encoder("speechbrain/spkrec-ecapa-voxceleb")


def test_mfcc_statistics_separate_two_timbres():
    t = np.arange(16_000) / 16_000
    low = (0.1 * np.sin(2 * np.pi * 120 * t)).astype(np.float32)
    high = (0.1 * np.sin(2 * np.pi * 2500 * t)).astype(np.float32)
    a, b = mfcc_statistics(low), mfcc_statistics(high)
    assert a.shape == (26,) and np.linalg.norm(a - b) > 1.0


def _speaker_store(folder, speakers=3, per_speaker=5, dim=8, seed=0):
    """States whose mean over frames sits at a speaker-specific direction; some frames past the speech length are padding."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    writer = PartWriter(folder / "part-00000.h5", {"encoder.final": dim}, "float32", {"model_id": "synthetic", "config": "{}", "skipped": "[]"})
    utterances = []
    for s in range(speakers):
        for u in range(per_speaker):
            states = np.eye(dim)[s] * 5 + rng.normal(0, 0.1, (20, dim))
            states[15:] = -100.0  # stored padding beyond the 15 speech frames: pooling must not read it
            record_id = f"spk{s}-{u}"
            writer.add(
                record_id,
                {"encoder.final": states.astype(np.float32)},
                {"gender": "female", "speaker": f"spk{s}", "language": "en", "split": "", "dataset": "toy", "duration": 0.3},
                speech_frames={"encoder.final": 15},
            )
            utterances.append(Utterance(record_id, "a.wav", "en", "t", "female", f"spk{s}", dataset="toy"))
    writer.close()
    return folder, utterances


def test_store_embeddings_pool_speech_frames(tmp_path):
    store, utterances = _speaker_store(tmp_path / "store")
    embeddings, site = store_embeddings(str(store), None, [u.id for u in utterances])
    assert site == "encoder.final" and embeddings.shape == (15, 8) and embeddings.min() > -1.0
    with pytest.raises(SpeakerError, match="not in the store"):
        store_embeddings(str(store), None, ["nope"])
    with pytest.raises(SpeakerError, match="no site"):
        store_embeddings(str(store), "encoder.layer.9", [utterances[0].id])


def test_cli_rewrites_the_manifest(tmp_path, capsys):
    store, utterances = _speaker_store(tmp_path / "store")
    manifest = write_manifest(tmp_path / "m.jsonl", utterances)
    out = tmp_path / "clustered.jsonl"
    assert speakers_cli.main(["--manifest", str(manifest), "--embeddings", f"store:{store}", "--out", str(out), "--min-cluster-size", "3"]) == 0
    rewritten = read_manifest(out)
    assert len({u.speaker for u in rewritten}) == 3 and all(u.speaker.startswith("toy-en-female-spk") for u in rewritten)
    assert rewritten[0].extra["speaker_cluster"]["original_speaker"] == "spk0" and rewritten[0].extra["speaker_cluster"]["noise"] is False
    report = json.loads(out.with_suffix(".clustering.json").read_text())
    assert report["against_known_speakers"]["adjusted_rand_index"] == 1.0 and report["clustering"]["hdbscan"]["min_cluster_size"] == 3
    assert "ARI 1.000" in capsys.readouterr().out
    assert speakers_cli.main(["--manifest", str(manifest), "--embeddings", f"store:{tmp_path / 'none'}", "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error:") and len(error.strip().splitlines()) == 1
    assert speakers_cli.main(["--manifest", str(manifest), "--embeddings", "ecapa", "--out", str(out)]) == 2
    with pytest.raises(SystemExit) as exit_info:
        speakers_cli.main(["--manifest", str(manifest), "--embeddings", "mfcc", "--out", str(out), "--min-cluster-size", "1"])
    assert exit_info.value.code == 2


def test_embeddings_without_spread_are_refused():
    """Identical embeddings give HDBSCAN nothing to separate: it made every record its own speaker (#113)."""
    utterances = [Utterance(f"u{i}", "a.wav", "fr", "t", "female", "s", dataset="fleurs") for i in range(4)]
    with pytest.raises(SpeakerError, match=r"^fleurs-fr-female: the 4 records have identical embeddings"):
        assign_speakers(utterances, np.ones((4, 6)), SETTINGS)
    lone = [Utterance("u0", "a.wav", "fr", "t", "female", "s")]
    assert assign_speakers(lone, np.ones((1, 6)), SETTINGS)[0]["noise"]  # a lone record is noise, as before


def test_cli_refuses_records_that_all_read_the_same_audio(tmp_path, tone, capsys):
    wav = tone("same.wav")
    utterances = [Utterance(f"u{i}", str(wav), "en", "t", gender, f"{gender}{i % 2}", dataset="toy") for i, gender in enumerate(["female", "male"] * 3)]
    manifest = write_manifest(tmp_path / "same.jsonl", utterances)
    out = tmp_path / "sp.jsonl"
    assert speakers_cli.main(["--manifest", str(manifest), "--embeddings", "mfcc", "--out", str(out), "--quiet"]) == 2
    assert capsys.readouterr().err == (
        "error: toy-en-female: the 3 records have identical embeddings (no spread: the same audio?), e.g. u0, u2, u4; "
        "clustering them would make each record its own speaker\n"
    )
    assert not out.exists()


def test_resemblyzer_missing_is_one_clear_line(tmp_path, monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: None if name == "resemblyzer" else real(name, *args))
    with pytest.raises(SpeakerError, match=r"^resemblyzer is not installed: `pip install 'speech-gender-probing\[speakers\]'`"):
        ResemblyzerEncoder()
    manifest = write_manifest(tmp_path / "m.jsonl", [Utterance("u0", "a.wav", "en", "t", "female", "s")])
    assert speakers_cli.main(["--manifest", str(manifest), "--embeddings", "resemblyzer", "--out", str(tmp_path / "o.jsonl"), "--quiet"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: resemblyzer is not installed") and len(error.strip().splitlines()) == 1


def _voice(path, f0, tilt, seconds=1.5, seed=0):
    """A synthetic voice: harmonics of ``f0`` falling as k ** -tilt, in syllable-like bursts, with a little noise."""
    rate = 16_000
    t = np.arange(int(seconds * rate)) / rate
    phase = 2 * np.pi * f0 * (t + 0.003 * np.sin(2 * np.pi * 5 * t) / (2 * np.pi * 5))
    voiced = sum(np.sin(k * phase) / k**tilt for k in range(1, 16)) * (0.5 + 0.5 * np.sin(2 * np.pi * 3 * t) ** 2)
    noise = np.random.default_rng(seed).normal(0, 0.01, len(t))
    soundfile.write(path, (0.2 * voiced + noise).astype(np.float32), rate, subtype="PCM_16")
    return path


needs_resemblyzer = pytest.mark.skipif(importlib.util.find_spec("resemblyzer") is None, reason="resemblyzer is not installed (the speakers extra)")


@pytest.mark.slow  # the first embedding compiles librosa's mel spectrogram with numba: minutes on a cold cache
@needs_resemblyzer
def test_resemblyzer_embeds_synthetic_audio_and_the_cli_clusters_it(tmp_path, capsys):
    voices = {"low": (110.0, 1.0), "high": (240.0, 2.5)}
    utterances = []
    for name, (f0, tilt) in voices.items():
        for k in range(4):
            path = _voice(tmp_path / f"{name}-{k}.wav", f0 * (1 + 0.02 * k), tilt, seed=k)
            utterances.append(Utterance(f"{name}-{k}", str(path), "en", "t", "female", name, dataset="toy"))
    encoder = ResemblyzerEncoder()
    from extract.audio import load_audio

    embeddings = np.stack([encoder(load_audio(u.audio).samples) for u in utterances])
    assert embeddings.shape == (8, 256) and np.isfinite(embeddings).all() and np.allclose(np.linalg.norm(embeddings, axis=1), 1.0, atol=1e-4)
    assert encoder.calls == 8 and set(encoder.untrimmed) <= set(range(8))  # webrtcvad may find no speech in a synthetic voice
    within = [float(embeddings[i] @ embeddings[j]) for group in (range(4), range(4, 8)) for i in group for j in group if i < j]
    across = [float(embeddings[i] @ embeddings[j]) for i in range(4) for j in range(4, 8)]
    assert min(within) > max(across)  # a voice is nearer to itself than to the other
    manifest = write_manifest(tmp_path / "m.jsonl", utterances)
    out = tmp_path / "clustered.jsonl"
    argv = ["--manifest", str(manifest), "--embeddings", "resemblyzer", "--out", str(out), "--min-cluster-size", "3", "--quiet"]
    assert speakers_cli.main(argv) == 0
    report = json.loads(out.with_suffix(".clustering.json").read_text())
    assert report["clustering"]["source"] == "Resemblyzer 0.1.4 GE2E voice encoder (256-d)"
    assert report["against_known_speakers"]["adjusted_rand_index"] == 1.0
    assert report.get("embedded_untrimmed", []) == [utterances[i].id for i in encoder.untrimmed]
