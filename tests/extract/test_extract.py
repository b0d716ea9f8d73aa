"""Extraction on the tiny random model of every registered family (``extract.families.FAMILIES``;
the ZeroSwot one is a stand-in, see extract.families.zeroswot). A new family gets every test here;
the ones that compare with the model's own outputs ask for its entry in ``REFERENCE_STATES``."""

import json
import pickle

import h5py
import numpy as np
import pytest
import soundfile
import torch

from extract.families import FAMILIES, NonFiniteError, UnknownSiteError, tiny_extractor
from extract.hooks import Site, SiteNotCapturedError, capture
from extract.manifest import Utterance, write_manifest
from extract.runner import AudioLog, audio_batches, batches_by_seconds, run_extraction
from extract.stage_options import ExtractOptions
from extract.store import ShardReader, StoreError
from extract.store.folder import shard_slice
from tests.corpus import write_corpus

TINY_LAYERS = 2  # every family's tiny random model has two encoder layers (the conventions' test size)
# the sites besides encoder.layer.N, per family
OTHER_SITES = {
    "whisper": ["encoder.embed", "encoder.final"],
    "s2t": ["encoder.final"],
    "seamless": ["pre_adapter", "post_adapter"],
    "zeroswot": ["pre_adapter", "post_adapter", "post_adapter_no_special"],
    "ssl": ["encoder.cnn", "encoder.embed", "encoder.final"],
}


def _waves(seconds=(1.0, 1.6, 0.7), seed=0):
    rng = np.random.default_rng(seed)
    return [(0.1 * rng.standard_normal(int(s * 16_000))).astype(np.float32) for s in seconds]


def _whisper_states(model, inputs) -> dict:
    out = model.model.encoder(inputs["input_features"], output_hidden_states=True)
    states = {"encoder.embed": out.hidden_states[0], "encoder.final": out.last_hidden_state}
    return states | {f"encoder.layer.{i}": h for i, h in enumerate(out.hidden_states[1:-1])}  # HF normalises the last one


def _s2t_states(model, inputs) -> dict:
    out = model.model.encoder(inputs["input_features"], attention_mask=inputs["attention_mask"], output_hidden_states=True)
    return {f"encoder.layer.{i}": h for i, h in enumerate(out.hidden_states[1:-1])} | {"encoder.final": out.last_hidden_state}


def _seamless_states(model, inputs) -> dict:
    encoder = model.speech_encoder
    inner = encoder.encoder(encoder.feature_projection(inputs["input_features"]), attention_mask=inputs["attention_mask"], output_hidden_states=True)
    if isinstance(inner, torch.Tensor):
        # transformers 5: the conformer encoder returns its last state alone, and the speech encoder's
        # hidden_states record its layers' outputs incompletely, so only pre_adapter is checked here
        # (its layer sites are checked against the batched/one-by-one extraction and on 4.57)
        states = {"pre_adapter": inner}
    else:
        states = {f"encoder.layer.{i}": h for i, h in enumerate(inner.hidden_states[1:])}
        states["pre_adapter"] = inner.last_hidden_state
    states["post_adapter"] = encoder(inputs["input_features"], attention_mask=inputs["attention_mask"]).last_hidden_state
    return states


def _zeroswot_states(model, inputs) -> dict:
    out = model.wav2vec2.wav2vec2(inputs["input_values"], attention_mask=inputs["attention_mask"], output_hidden_states=True)
    states = {f"encoder.layer.{i}": h for i, h in enumerate(out.hidden_states[1:-1])}
    states["pre_adapter"] = out.last_hidden_state
    states["post_adapter"] = model(inputs["input_values"], attention_mask=inputs["attention_mask"])[0]
    return states


def _ssl_states(model, inputs) -> dict:
    from tests.extract.test_ssl import reference_states

    return reference_states(model, inputs)


# family -> the states of one utterance from the model's own outputs (output_hidden_states), no hooks of ours
REFERENCE_STATES = {"whisper": _whisper_states, "s2t": _s2t_states, "seamless": _seamless_states, "zeroswot": _zeroswot_states, "ssl": _ssl_states}


def _reference_states(extractor, audio: np.ndarray) -> dict[str, np.ndarray]:
    if extractor.family not in REFERENCE_STATES:
        pytest.fail(f"family {extractor.family!r} has no entry in REFERENCE_STATES: add how its model's own outputs give its sites")
    with torch.inference_mode():
        states = REFERENCE_STATES[extractor.family](extractor.model, extractor.prepare([audio]).inputs)
    return {site: value[0].float().numpy() for site, value in states.items() if value is not None}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_layer_site_is_listed(family):
    extractor = tiny_extractor(family)
    sites = extractor.resolve_sites("all")
    layers = [s for s in sites if s.startswith("encoder.layer.")]
    assert layers == [f"encoder.layer.{i}" for i in range(TINY_LAYERS)]
    assert set(sites) - set(layers) == set(OTHER_SITES.get(family, ())), f"list {family}'s other sites in OTHER_SITES"
    with pytest.raises(UnknownSiteError, match=f"valid sites: {sites[0]}"):
        extractor.resolve_sites(["encoder.layer.99"])


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_family_record_is_complete(family):
    """The registry key is the family's name; reports can name it (and its tiny model, which the
    demo labels); the sites the demo probes exist on its tiny model."""
    from experiments.demo.report import tiny_labels

    record = FAMILIES[family]
    assert record.name == family and record.display_name and record.tiny_label.startswith(record.display_name)
    assert set(record.demo_sites) <= set(tiny_extractor(family).resolve_sites("all"))
    assert tiny_labels().get(family) == (record.tiny_label if record.demo_sites else None)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_stored_states_equal_the_models_own_outputs(family, tmp_path):
    extractor = tiny_extractor(family)
    audio = _waves((1.3,))[0]
    (states,) = extractor.extract([audio], extractor.resolve_sites("all"))
    reference = _reference_states(extractor, audio)
    assert reference, family
    for site, expected in reference.items():
        got = states[site]
        assert got.shape[0] <= expected.shape[0]
        np.testing.assert_allclose(got, expected[: got.shape[0]], atol=1e-4, err_msg=f"{family} {site}")


def test_stored_lengths_follow_the_stride_formulas():
    samples = [16_000, 24_321, 11_200]
    waves = [np.full(n, 0.05, dtype=np.float32) for n in samples]
    whisper = tiny_extractor("whisper")
    lengths = [s["encoder.final"].shape[0] for s in whisper.extract(waves, ["encoder.final"])]
    assert lengths == [50, 77, 35]  # ceil(n / 320)
    padded = tiny_extractor("whisper", keep_padding=True).extract(waves[:1], ["encoder.final"])[0]["encoder.final"]
    assert padded.shape[0] == 1500
    seamless = tiny_extractor("seamless")
    out = seamless.extract(waves, ["pre_adapter", "post_adapter"])
    for state in out:  # adaptor: kernel 8, stride 8, padding 4 -> floor((n + 8 - 8) / 8) + 1
        assert state["post_adapter"].shape[0] == state["pre_adapter"].shape[0] // 8 + 1


@pytest.mark.parametrize("family", list(FAMILIES))
def test_batched_equals_one_by_one(family):
    """Stated tolerance: Whisper is exact (every input is padded to 30 s anyway). Elsewhere padding
    enters the receptive field of strided convolutions at the end of an utterance, so all frames but
    the last two agree within 2e-3 (absolute, states of scale ~1) and the last two may differ more;
    ``--batch-seconds 0`` extracts one utterance at a time when that matters.

    SeamlessM4T's post_adapter is the exception at 4e-3: its adapter attends over the pooled sequence,
    so the pooled frame that holds padding moves every other frame a little. Measured on these waves
    (max over frames but the last two): 1.85e-3 with transformers 4.57.6, 3.18e-3 with 5.24, whose
    adapter attention computes in another order; the last frame differs by 0.9-1.4 on both."""
    extractor = tiny_extractor(family)
    sites = extractor.resolve_sites("all")
    waves = _waves()
    batched = extractor.extract(waves, sites)
    for wave, together in zip(waves, batched):
        (alone,) = extractor.extract([wave], sites)
        for site in sites:
            if family == "zeroswot" and site.startswith("post_adapter"):
                continue  # CTC compression groups frames by argmax: padding could move a boundary
            assert alone[site].shape == together[site].shape, (family, site)
            if family == "whisper":
                np.testing.assert_array_equal(alone[site], together[site])
            else:
                tolerance = 4e-3 if (family, site) == ("seamless", "post_adapter") else 2e-3
                assert np.abs(alone[site][:-2] - together[site][:-2]).max() < tolerance, (family, site)


def test_hooks_are_removed_and_forward_stops_after_the_last_site():
    extractor = tiny_extractor("whisper")
    model = extractor.model
    fired = []
    probe = model.model.encoder.layers[1].register_forward_hook(lambda *a: fired.append("layer1"))
    try:
        states = extractor.extract(_waves((0.5,)), ["encoder.layer.0"])
    finally:
        probe.remove()
    assert fired == [] and states[0]["encoder.layer.0"].shape[0] == 25
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())
    with pytest.raises(RuntimeError, match="boom"):
        with capture(model, {"x": Site("model.encoder.layers.0")}):
            raise RuntimeError("boom")
    assert all(not m._forward_hooks for m in model.modules())


def test_a_site_that_never_fires_is_an_error():
    extractor = tiny_extractor("whisper")
    features = extractor.prepare(_waves((0.5,))).inputs["input_features"]
    with torch.inference_mode(), capture(extractor.model, {"dec": Site("model.decoder.layers.0")}) as (_, run):
        with pytest.raises(SiteNotCapturedError, match="sites not captured: dec"):
            run(extractor.encode, {"input_features": features})


def test_non_finite_states_name_the_utterance():
    extractor = tiny_extractor("s2t")
    with torch.no_grad():
        extractor.model.model.encoder.layer_norm.bias.fill_(float("nan"))
    with pytest.raises(NonFiniteError, match="site encoder.final for utterance utt-7"):
        extractor.extract(_waves((0.5,)), ["encoder.final"], ids=["utt-7"])


def _corpus(tmp_path, count=7):
    return write_corpus(tmp_path, [_waves((seconds,), seed=index)[0] for index, seconds in enumerate(np.linspace(0.5, 1.5, count))], speakers=3)


def _store_arrays(folder):
    reader = ShardReader(folder)
    return reader.ids, {site: [reader.get(site, i) for i in reader.ids] for site in reader.sites}


def test_kill_and_resume_gives_an_identical_store(tmp_path, monkeypatch):
    utterances = _corpus(tmp_path)
    extractor = tiny_extractor("s2t")
    sites = extractor.resolve_sites("all")
    options = dict(config={"test": 1}, show_progress=False, options=ExtractOptions(storage_dtype="float32", batch_seconds=2.0, utterances_per_part=3))
    run_extraction(extractor, utterances, sites, tmp_path / "clean", **options)

    real_extract, calls = extractor.extract, {"n": 0}

    def dies_on_the_fourth_batch(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt
        return real_extract(*args, **kwargs)

    monkeypatch.setattr(extractor, "extract", dies_on_the_fourth_batch)
    with pytest.raises(KeyboardInterrupt):
        run_extraction(extractor, utterances, sites, tmp_path / "killed", **options)
    assert not list((tmp_path / "killed").glob("*.tmp"))  # the cut part was discarded
    first = ShardReader(tmp_path / "killed")
    assert 0 < len(first) < len(utterances)
    monkeypatch.setattr(extractor, "extract", real_extract)
    report = run_extraction(extractor, utterances, sites, tmp_path / "killed", **options)
    assert report.resumed == len(first) and report.written == len(utterances) - len(first)
    clean_ids, clean = _store_arrays(tmp_path / "clean")
    resumed_ids, resumed = _store_arrays(tmp_path / "killed")
    assert clean_ids == resumed_ids and len(set(resumed_ids)) == len(utterances)
    for site in sites:
        for a, b in zip(clean[site], resumed[site]):
            np.testing.assert_array_equal(a, b)
    with pytest.raises(RuntimeError, match="another configuration"):
        run_extraction(extractor, utterances, sites, tmp_path / "killed", **{**options, "config": {"test": 2}})


def test_bad_audio_is_skipped_and_counted(tmp_path):
    utterances = _corpus(tmp_path, count=3)
    silent = tmp_path / "audio" / "silent.wav"
    soundfile.write(silent, np.zeros(8000, dtype=np.float32), 16_000)
    corrupt = tmp_path / "audio" / "corrupt.wav"
    corrupt.write_bytes(b"RIFF....WAVEjunk")
    utterances += [
        Utterance(id="silent", audio=str(silent), language="en", text="x", gender="female", speaker="s9", split="train"),
        Utterance(id="corrupt", audio=str(corrupt), language="en", text="x", gender="male", speaker="s9", split="train"),
    ]
    extractor = tiny_extractor("whisper")
    report = run_extraction(extractor, utterances, ["encoder.final"], tmp_path / "store", config={}, show_progress=False)
    assert report.written == 3 and sorted(s["id"] for s in report.skipped) == ["corrupt", "silent"]
    assert {s["error"] for s in report.skipped} == {"AudioSilentError", "AudioCorruptError"}
    reader = ShardReader(tmp_path / "store")
    assert sorted(reader.ids) == ["u0", "u1", "u2"]
    (part,) = reader.parts
    with h5py.File(part) as handle:
        assert len(json.loads(handle.attrs["skipped"])) == 2


def test_cli_end_to_end_with_metadata_and_provenance(tmp_path, monkeypatch):
    from experiments import extract as cli

    utterances = _corpus(tmp_path, count=4)
    manifest = write_manifest(tmp_path / "m.jsonl", utterances)
    monkeypatch.setattr("extract.spec.load_extractor", lambda spec, **options: tiny_extractor("seamless"))
    assert (
        cli.main(
            [
                "--family",
                "seamless",
                "--manifest",
                str(manifest),
                "--sites",
                "pre_adapter,post_adapter",
                "--out",
                str(tmp_path / "s"),
                "--quiet",
                "--storage-dtype",
                "float32",
            ]
        )
        == 0
    )
    assert cli.main(["--family", "seamless", "--manifest", str(manifest), "--sites", "nope", "--out", str(tmp_path / "x"), "--quiet"]) == 2
    reader = ShardReader(tmp_path / "s")
    assert reader.sites == ["pre_adapter", "post_adapter"]
    meta = reader.meta("u1")
    assert (meta["gender"], meta["speaker"], meta["split"], meta["language"]) == ("female", "s1", "train", "en")
    assert meta["duration"] == pytest.approx(0.5 + 1 / 3, abs=1e-3)
    for key in ("model_id", "revision", "site_modules", "frame_rates", "storage_dtype", "package_version", "git_commit"):
        assert getattr(reader.info, key) is not None, key
    assert reader.info.config["sites"] == ["pre_adapter", "post_adapter"]
    assert reader.info.site_modules["post_adapter"] == "speech_encoder.inner_layer_norm:output"
    assert reader.get("post_adapter", "u1").dtype == np.float32


def test_reader_bulk_access_matches_get_and_survives_pickling(tmp_path):
    utterances = _corpus(tmp_path, count=5)
    run_extraction(
        tiny_extractor("whisper"),
        utterances,
        ["encoder.layer.0", "encoder.final"],
        tmp_path / "st",
        config={},
        show_progress=False,
        options=ExtractOptions(storage_dtype="float32", utterances_per_part=2),
    )
    reader = ShardReader(tmp_path / "st")
    assert len(reader.parts) == 3 and len(reader) == 5
    stacked, lengths = reader.leading("encoder.final", 40)
    means = reader.means("encoder.final")
    for row, utterance_id in enumerate(reader.ids):
        full = reader.get("encoder.final", utterance_id)
        assert lengths[row] == min(40, len(full))
        np.testing.assert_array_equal(stacked[row, : lengths[row]], full[:40])
        assert not stacked[row, lengths[row] :].any()
        np.testing.assert_allclose(means[row], full.mean(axis=0), rtol=1e-5, atol=1e-6)
    clone = pickle.loads(pickle.dumps(reader))
    np.testing.assert_array_equal(clone.get("encoder.layer.0", "u3"), reader.get("encoder.layer.0", "u3"))
    with pytest.raises(KeyError, match="no site 'encoder.layer.5'"):
        reader.get("encoder.layer.5", "u3")


def test_incomplete_files_are_never_read(tmp_path):
    utterances = _corpus(tmp_path, count=2)
    run_extraction(tiny_extractor("whisper"), utterances, ["encoder.final"], tmp_path / "st", config={}, show_progress=False)
    (part,) = list((tmp_path / "st").glob("*.h5"))
    with h5py.File(part, "a") as handle:
        handle.attrs["complete"] = False
    with pytest.raises(StoreError, match="damaged part \\(not marked complete\\)"):  # refused, never left out
        ShardReader(tmp_path / "st")


def test_shards_partition_the_manifest_and_batches_respect_seconds():
    items = list(range(10))
    parts = [shard_slice(items, 3, i) for i in range(3)]
    assert sorted(sum(parts, [])) == items and parts[1] == [1, 4, 7]
    with pytest.raises(ValueError):
        shard_slice(items, 3, 3)
    batches = batches_by_seconds([5.0, 1.0, 3.0, 2.0, 9.0], 6.0)
    assert batches == [[1, 3, 2], [0], [4]]


def test_the_audio_batch_loop_groups_by_language_sorts_by_length_and_logs_bad_audio(tmp_path):
    """The one loop of extraction, transcription and the corpus card: chunked loading, then batches
    under the budget of model-input seconds, shortest first, each batch of one language."""
    utterances = _corpus(tmp_path, count=6)  # 0.5, 0.7, ..., 1.5 s
    for index in (1, 4):
        utterances[index] = Utterance(**{**vars(utterances[index]), "language": "es"})
    utterances.insert(2, Utterance(id="bad", audio=str(tmp_path / "missing.wav"), language="en", text="x", gender="male", speaker="s9"))
    log = AudioLog()
    batches = audio_batches(list(reversed(utterances)), max_seconds=1.0, batch_seconds=2.0, log=log, by_language=True, chunk=4)
    got = [([u.id for u in batch.utterances], [len(a) for a in batch.audios]) for batch in batches]
    # chunk 1 = u5 u4 u3 u2 (u4 is es; u5, u4, u3 trimmed to 1 s = 16000 samples), chunk 2 = bad u1 u0 (u1 is es);
    # within a language shortest first, equal lengths in input order, a new batch once 2 s would be exceeded
    assert got == [(["u2", "u5"], [14_400, 16_000]), (["u3"], [16_000]), (["u4"], [16_000]), (["u0"], [8_000]), (["u1"], [11_200])]
    assert [s["id"] for s in log.skipped] == ["bad"] and set(log.notes) == {"u3", "u4", "u5"}
    whisper_like = audio_batches(utterances[:3], max_seconds=30.0, batch_seconds=60.0, log=AudioLog(), input_seconds=lambda s: 30.0)
    assert [[u.id for u in batch.utterances] for batch in whisper_like] == [["u0", "u1"]]  # each costs 30 s: two per batch
