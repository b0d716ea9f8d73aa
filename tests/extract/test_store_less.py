"""Storing less at scale (docs/scale.md): the first N frames (``--positions``), one mean vector per
utterance (``--pool mean``), every K-th site (``--sites every:K``); probes refuse a store that lacks
what they need, in one line naming the option that would have stored it."""

import numpy as np
import pytest

from experiments import extract as cli
from extract.families import UnknownSiteError, tiny_extractor
from extract.manifest import write_manifest
from extract.store import ShardReader
from probing.data import ProbeError
from probing.run import ProbeConfig, run_probe
from tests.extract.test_extract import _corpus
from tests.synthetic_store import write_store

SITE = "encoder.final"


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    folder = tmp_path_factory.mktemp("less")
    manifest = write_manifest(folder / "m.jsonl", _corpus(folder, count=5))
    made = {}
    for name, extra in {"full": [], "first": ["--positions", "20"], "mean": ["--pool", "mean"]}.items():
        made[name] = folder / name
        code = cli.main(
            [
                "--family",
                "whisper",
                "--checkpoint",
                "tiny-random",
                "--manifest",
                str(manifest),
                "--sites",
                "all",
                "--out",
                str(made[name]),
                "--quiet",
                "--storage-dtype",
                "float32",
                *extra,
            ]
        )
        assert code == 0
    return made


def test_positions_keeps_the_first_frames_and_their_speech_lengths(stores):
    full, first = ShardReader(stores["full"]), ShardReader(stores["first"])
    assert first.info.config["positions"] == 20 and "positions" not in full.info.config
    for utterance in full.ids:
        whole = full.get(SITE, utterance)
        np.testing.assert_allclose(first.get(SITE, utterance), whole[:20], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(first.speech_lengths(SITE), np.minimum(full.speech_lengths(SITE), 20))


def test_pool_mean_keeps_one_vector_the_mean_over_the_speech_frames(stores):
    full, mean = ShardReader(stores["full"]), ShardReader(stores["mean"])
    assert mean.info.config["pool"] == "mean"
    for utterance in full.ids:
        assert mean.get(SITE, utterance).shape == (1, full.dim(SITE))
    np.testing.assert_allclose(mean.means(SITE), full.means(SITE), rtol=1e-4, atol=1e-5)


def test_every_k_sites_keeps_the_first_of_each_k_and_the_last():
    extractor = tiny_extractor("whisper")
    table = list(extractor.site_table())
    assert extractor.resolve_sites("every:2") == [name for i, name in enumerate(table) if i % 2 == 0 or i == len(table) - 1]
    assert extractor.resolve_sites(["every:1"]) == table
    with pytest.raises(UnknownSiteError, match="every:K with K a whole number"):
        extractor.resolve_sites("every:0")


@pytest.mark.parametrize(
    ("option", "probe", "extra", "message"),
    [
        ({"pool": "mean"}, "positional", {}, r"--probe positional needs each utterance's frames, .* \(extract --pool mean\): re-extract without --pool"),
        ({"pool": "mean"}, "attention", {}, r"--probe attention needs each utterance's frames"),
        ({"positions": 5}, "mean", {}, r"--probe mean reads whole utterances, but .* holds only the first 5 frames of each \(extract --positions 5\)"),
        (
            {"positions": 5},
            "positional",
            {"positions": 10},
            r"--positions 10 needs 10 frames .* holds the first 5 \(extract --positions 5\): probe with --positions 5",
        ),
    ],
)
def test_a_probe_refuses_a_store_without_what_it_needs(tmp_path, option, probe, extra, message):
    store = write_store(tmp_path / "s", speakers_per_gender=5, utterances_per_speaker=2, attributes={"config": option})
    with pytest.raises(ProbeError, match=message):
        run_probe(ProbeConfig(str(store), "encoder.layer.0", probe=probe, **extra))


def test_what_a_store_holds_is_enough_for_the_probes_it_names(tmp_path):
    pooled = write_store(tmp_path / "pooled", speakers_per_gender=5, utterances_per_speaker=2, attributes={"config": {"pool": "mean"}})
    assert run_probe(ProbeConfig(str(pooled), "encoder.layer.0", probe="mean")).row["f1_macro"] >= 0
    first = write_store(tmp_path / "first", speakers_per_gender=5, utterances_per_speaker=2, attributes={"config": {"positions": 5}})
    assert run_probe(ProbeConfig(str(first), "encoder.layer.0", probe="positional", positions=5)).row["f1_s"] >= 0


def test_positions_and_pool_together_are_refused_in_one_line(tmp_path, capsys):
    manifest = write_manifest(tmp_path / "m.jsonl", _corpus(tmp_path, count=2))
    with pytest.raises(SystemExit) as stopped:
        cli.main(["--family", "whisper", "--manifest", str(manifest), "--out", str(tmp_path / "s"), "--positions", "3", "--pool", "mean"])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.strip() == "error: --positions and --pool: give one (a pooled store keeps one vector per utterance, not positions)"
