"""``python -m experiments.decoder_states`` on the tiny random Whisper and a synthetic corpus: one row
per generated token at each decoder site, the tokens and the hypothesis beside them, a run that
resumes to the same store, refuses another configuration, and fails in one line."""

from __future__ import annotations

import json
from functools import partial

import numpy as np
import pytest

from experiments import decoder_states as decoder_cli
from experiments import transcribe as transcribe_cli
from extract.manifest import write_manifest
from extract.store import ShardReader, StoreError, part_ids
from tests.commands import one_line_error
from tests.corpus import write_corpus
from tests.synthetic_store import write_store


def _manifest(tmp_path, count=4):
    rng = np.random.default_rng(0)
    waves = [(0.1 * rng.standard_normal(int(16000 * (0.5 + 0.1 * index)))).astype(np.float32) for index in range(count)]
    manifest = tmp_path / "m.jsonl"
    write_manifest(manifest, write_corpus(tmp_path, waves))
    return manifest


BASE = ["--family", "whisper", "--checkpoint", "tiny-random", "--device", "cpu", "--task", "asr", "--max-new-tokens", "5", "--quiet"]


_cli_error = partial(one_line_error, decoder_cli.main)  # (argv, capsys): the command's one-line refusal


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    folder = tmp_path_factory.mktemp("decoder")
    manifest = _manifest(folder)
    out = folder / "store"
    assert decoder_cli.main([*BASE, "--manifest", str(manifest), "--out", str(out), "--utterances-per-part", "2"]) == 0
    hypotheses = folder / "h.jsonl"
    assert transcribe_cli.main([*BASE, "--manifest", str(manifest), "--out", str(hypotheses)]) == 0
    return manifest, out, {row["id"]: row["hypothesis"] for row in map(json.loads, hypotheses.read_text().splitlines())}


def test_rows_are_generated_tokens_carrying_their_ids_pieces_and_the_transcribe_hypothesis(store):
    _, out, transcripts = store
    reader = ShardReader(out)
    assert reader.sites == ["decoder.layer.0", "decoder.final"]
    assert reader.ids == ["u0", "u1", "u2", "u3"]
    assert reader.info.config["kind"] == "decoder_states" and reader.info.config["task"] == "asr"
    assert reader.info.config["decoding"]["overrides"] == {"max_new_tokens": 5}
    for utterance in reader.ids:
        tokens = reader.tokens(utterance)
        assert 1 <= len(tokens) <= 5
        for site in reader.sites:
            assert reader.get(site, utterance).shape == (len(tokens), 16)
        assert reader.speech_lengths("decoder.final", [utterance])[0] == len(tokens)
        assert tokens.hypothesis.strip() == transcripts[utterance]
        assert "".join(tokens.pieces) == tokens.hypothesis
    assert np.isnan(reader.info.frame_rate("decoder.final"))


def test_a_rerun_resumes_to_the_same_store_and_another_configuration_is_refused(store, tmp_path, capsys):
    manifest, out, _ = store
    parts = sorted(out.glob("*.h5"))
    assert len(parts) == 2
    before = {u: (ShardReader(out).tokens(u), ShardReader(out).get("decoder.final", u)) for u in ShardReader(out).ids}
    parts[1].unlink()  # as if the run had been killed while writing its second part
    assert decoder_cli.main([*BASE, "--manifest", str(manifest), "--out", str(out), "--utterances-per-part", "2"]) == 0
    assert "2 utterances" in capsys.readouterr().out and part_ids(parts[1]) == ["u2", "u3"]
    after = ShardReader(out)
    for utterance, (tokens, states) in before.items():
        assert after.tokens(utterance) == tokens
        np.testing.assert_array_equal(after.get("decoder.final", utterance), states)
    refused = _cli_error([*BASE, "--manifest", str(manifest), "--out", str(out), "--utterances-per-part", "2", "--num-beams", "2"], capsys)
    assert "were written with another configuration" in refused and "decoding" in refused


def test_bad_input_is_refused_in_one_line_before_anything_is_written(tmp_path, capsys):
    manifest = _manifest(tmp_path, count=1)
    out = tmp_path / "out"
    assert _cli_error([*BASE, "--manifest", str(manifest), "--out", str(out), "--sites", "encoder.layer.0"], capsys).startswith(
        "error: unknown decoder site(s) encoder.layer.0 for whisper; valid sites: decoder.layer.0, decoder.final"
    )
    st = ["--family", "whisper", "--checkpoint", "tiny-random", "--task", "st", "--quiet"]
    assert _cli_error([*st, "--manifest", str(manifest), "--out", str(out)], capsys) == "error: --task st needs --tgt-lang"
    assert _cli_error([*BASE, "--manifest", str(tmp_path), "--out", str(out)], capsys).startswith("error: --manifest")
    zeroswot = ["--family", "zeroswot", "--checkpoint", "tiny-random", "--device", "cpu", "--task", "asr", "--quiet"]
    assert _cli_error([*zeroswot, "--manifest", str(manifest), "--out", str(out)], capsys).startswith(
        "error: zeroswot has no text decoder in its model (ZeroSwot's decoder is a separate NLLB model its generator loads); "
        "decoder states are extracted for whisper, seamless, s2t"
    )
    assert not list(out.glob("*.h5"))


def test_a_store_of_encoder_sites_has_no_tokens_and_reads_as_before(tmp_path):
    folder = tmp_path / "s"
    write_store(folder, speakers_per_gender=2, utterances_per_speaker=1)
    reader = ShardReader(folder)
    with pytest.raises(StoreError, match="not a decoder-state store"):
        reader.tokens(reader.ids[0])


@pytest.mark.parametrize("family", ["seamless", "s2t"])
def test_seamless_and_s2t_translations_store_a_row_per_generated_token(family, tmp_path):
    """The prompt and forced tokens left out is checked token by token in tests/extract/test_decoder.py."""
    from extract.decoder_run import DecoderStatesJob, run_decoder_states
    from extract.spec import ModelSpec
    from tests.extract.test_decoder import _s2t, _seamless

    generator = {"seamless": _seamless, "s2t": _s2t}[family]()
    manifest = _manifest(tmp_path, count=3)
    job = DecoderStatesJob(spec=ModelSpec(family, "tiny-random"), manifest=manifest, out=tmp_path / "store", task="st", tgt_lang="es", max_new_tokens=5)
    report = run_decoder_states(job, show_progress=False, generator=generator)
    assert report.written == 3
    reader = ShardReader(tmp_path / "store")
    assert reader.sites == ["decoder.layer.0", "decoder.final"] and reader.info.config["tgt_lang"] == "es"
    for utterance in reader.ids:
        tokens = reader.tokens(utterance)
        assert 1 <= len(tokens) <= 5 and reader.get("decoder.final", utterance).shape[0] == len(tokens)
        assert tokens.hypothesis == " ".join(f"t{token}" for token in tokens.ids)  # the stand-in tokenizer's text of exactly these ids


def test_a_rerun_with_other_decoding_names_the_setting_that_differs_and_offers_no_flag_the_command_lacks(store, tmp_path, capsys):
    manifest, out, _ = store
    error = _cli_error([*BASE, "--manifest", str(manifest), "--out", str(out), "--utterances-per-part", "2", "--num-beams", "2"], capsys)
    assert "decoding.overrides.num_beams: None vs 2" in error
    assert "lang_to_id" not in error and len(error) < 400, error  # the differing leaf, not the whole generation config
    assert "--overwrite" not in error and "use a new --out folder" in error


def test_differing_keys_name_nested_leaves():
    from extract.store import differing_keys

    first = {"decoding": {"overrides": {"max_new_tokens": 5}, "generation_config": {"big": list(range(50))}}, "task": "asr"}
    second = {"decoding": {"overrides": {"max_new_tokens": 6}, "generation_config": {"big": list(range(50))}}, "task": "st"}
    assert differing_keys(first, second) == "decoding.overrides.max_new_tokens: 5 vs 6, task: 'asr' vs 'st'"
    assert differing_keys({"a": {"b": 1}}, {"a": None}) == "a: {'b': 1} vs None"


def test_random_init_decodes_with_the_checkpoint_s_generation_config_into_a_store_of_its_own(tmp_path, capsys):
    """The random-weights control: the bundled tiny.en's architecture with random weights, decoding
    with the checkpoint's generation config and tokenizer (which force language and task), stores
    other states than the trained model, with its tokens, and is recorded as random init."""
    manifest = _manifest(tmp_path, count=2)
    common = ["--family", "whisper", "--checkpoint", "bundled-tiny.en", "--device", "cpu", "--task", "asr", "--max-new-tokens", "4", "--quiet"]
    common += ["--manifest", str(manifest), "--sites", "decoder.final"]
    assert decoder_cli.main([*common, "--out", str(tmp_path / "trained")]) == 0
    assert decoder_cli.main([*common, "--out", str(tmp_path / "random"), "--random-init", "--seed", "3"]) == 0
    trained, random = ShardReader(tmp_path / "trained"), ShardReader(tmp_path / "random")
    assert random.info.config["random_init"] is True and random.info.config["seed"] == 3 and trained.info.config["random_init"] is False
    assert random.info.config["label"] == "whisper-tiny.en-random"
    assert random.info.config["decoding"]["generation_config"] == trained.info.config["decoding"]["generation_config"]
    for utterance in random.ids:
        tokens = random.tokens(utterance)
        assert 1 <= len(tokens) <= 4 and random.get("decoder.final", utterance).shape[0] == len(tokens)
        assert "".join(tokens.pieces) == tokens.hypothesis
    first = random.ids[0]
    assert random.tokens(first) != trained.tokens(first) or not np.allclose(random.get("decoder.final", first), trained.get("decoder.final", first))
    refused = _cli_error([*common, "--out", str(tmp_path / "random"), "--random-init", "--seed", "4"], capsys)
    assert "seed: 3 vs 4" in refused


def test_random_weights_keep_the_checkpoint_s_generation_config():
    from extract.spec import ModelSpec, load_extractor

    trained = load_extractor(ModelSpec("whisper", "bundled-tiny.en", device="cpu"))
    random = load_extractor(ModelSpec("whisper", "bundled-tiny.en", device="cpu", random_init=True))
    assert random.model.generation_config.to_diff_dict() == trained.model.generation_config.to_diff_dict()
    assert random.model.generation_config.no_timestamps_token_id == trained.model.generation_config.no_timestamps_token_id is not None


TERMINATED = r"""
import sys
from pathlib import Path
import extract.decoder_run
from experiments import decoder_states as cli
from tests.terminated import hanging_at_third_call

extract.decoder_run.decoder_states = hanging_at_third_call(extract.decoder_run.decoder_states, Path(sys.argv[1]))
sys.exit(cli.main(sys.argv[2:]))
"""


def test_sigterm_discards_the_open_part_and_a_rerun_completes_the_store(tmp_path):
    from tests.terminated import terminate_halfway

    manifest = _manifest(tmp_path)
    out = tmp_path / "s"
    argv = [*BASE, "--manifest", str(manifest), "--out", str(out), "--utterances-per-part", "2", "--batch-size", "1"]
    terminate_halfway(TERMINATED, argv, tmp_path / "started", out)
    assert decoder_cli.main(argv) == 0
    reader = ShardReader(out)
    assert reader.ids == ["u0", "u1", "u2", "u3"] and all(len(reader.tokens(u)) == len(reader.get("decoder.final", u)) for u in reader.ids)


def test_random_init_of_the_tiny_random_model_is_refused_in_one_line(tmp_path, capsys):
    from experiments import extract as extract_cli

    manifest = _manifest(tmp_path, count=1)
    argv = [*BASE, "--manifest", str(manifest), "--out", str(tmp_path / "out"), "--random-init", "--seed", "2"]
    assert _cli_error(argv, capsys) == (
        "error: --checkpoint tiny-random has random weights already, drawn from a fixed seed: random init (and its seed) would change nothing; "
        "give a trained checkpoint (bundled-base) for the random-weights baseline"
    )
    with pytest.raises(SystemExit):
        extract_cli.main(["--family", "whisper", "--checkpoint", "tiny-random", "--manifest", str(manifest), "--out", str(tmp_path / "e"), "--random-init"])
    assert capsys.readouterr().err.startswith("error: --checkpoint tiny-random has random weights already")
    assert not (tmp_path / "out").exists() and not (tmp_path / "e").exists()
