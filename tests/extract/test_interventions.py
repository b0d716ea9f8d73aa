"""Intervention files and the hook that applies them (extract.interventions), on a tiny random Whisper.

The hook must change exactly the requested site, rows and frames: checked against the states of an
unedited run and against a manual forward of the layers after the site. A file fitted on another
model is refused; steering with alpha 0 is the identity; records reach the store config and the
transcription settings, where a rerun with other interventions is refused."""

import inspect
import json

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.numpy import save_file

from experiments import extract as extract_cli
from experiments import transcribe as transcribe_cli
from extract.families import tiny_extractor
from extract.hooks import Site, capture
from extract.interventions import Intervener, Intervention, InterventionError, load_intervention, runtime_model_identity, store_content_hash
from extract.jobs import TranscriptionJob
from extract.manifest import Utterance, write_manifest
from extract.runner import SettingsMismatchError, check_settings, run_extraction, run_transcription
from extract.spec import ModelSpec
from extract.stage_options import ExtractOptions
from extract.store import ShardReader, StoreError
from tests.commands import one_line_error
from tests.tiny_whisper import tiny_whisper_generator

DIM = 16  # the tiny Whisper's d_model
RATE = 16_000


def _audios(seconds=(1.0, 0.6)):
    rng = np.random.default_rng(0)
    return [rng.normal(0, 0.1, int(s * RATE)).astype(np.float32) for s in seconds]


def _identity(extractor, site):
    return runtime_model_identity(extractor, site) | {"hidden_size": DIM}


def _steer(extractor, site="encoder.layer.0", alpha=1.0, target="female", direction=None):
    direction = np.linspace(-1, 1, DIM) if direction is None else direction
    return Intervention(
        "steer",
        site,
        _identity(extractor, site),
        {"path": "s", "content_sha256": "x"},
        {"direction": direction},
        alpha=alpha,
        target=target,
        fit={"method": "mean-diff"},
    )


def _eraser(extractor, site="encoder.layer.0", kind="erase", dim=DIM, seed=0):
    rng = np.random.default_rng(seed)
    direction = rng.standard_normal(dim)
    unit = direction / np.linalg.norm(direction)
    tensors = {"proj_left": unit[:, None], "proj_right": unit[None, :], "bias": rng.standard_normal(dim)}
    method = {"erase": "leace", "random-erase": "random"}[kind]
    return Intervention(kind, site, _identity(extractor, site), {"path": "s", "content_sha256": "x"}, tensors, fit={"method": method})


def _saved(tmp_path, intervention, name="i.safetensors"):
    return intervention.save(tmp_path / name)


def _states(extractor, sites, intervener=None, genders=("female", "male")):
    audios = _audios()
    if intervener is None:
        return extractor.extract(audios, sites)
    with intervener.installed(extractor), intervener.batch(list(genders), [len(a) for a in audios]):
        return extractor.extract(audios, sites)


def test_a_file_round_trips_with_its_record(tmp_path):
    extractor = tiny_extractor("whisper")
    for intervention in (_steer(extractor, alpha=0.5), _eraser(extractor), _eraser(extractor, kind="random-erase")):
        loaded = load_intervention(_saved(tmp_path, intervention))
        assert loaded.header() == json.loads(json.dumps(intervention.header()))
        for name, value in intervention.tensors.items():
            np.testing.assert_allclose(loaded.tensors[name], value, rtol=1e-6)
        states = np.random.default_rng(1).standard_normal((3, DIM))
        np.testing.assert_allclose(loaded.apply(states), intervention.apply(states), rtol=1e-5, atol=1e-6)


def test_malformed_files_are_refused_with_their_path(tmp_path):
    extractor = tiny_extractor("whisper")
    with pytest.raises(InterventionError, match="no such intervention file"):
        load_intervention(tmp_path / "missing.safetensors")
    bare = tmp_path / "bare.safetensors"
    save_file({"direction": np.zeros(DIM, dtype=np.float32)}, str(bare))
    with pytest.raises(InterventionError, match="without an intervention record"):
        load_intervention(bare)
    good = _saved(tmp_path, _steer(extractor))
    header = json.loads(safe_open(str(good), framework="numpy").metadata()["intervention"])
    for change, expected in (({"kind": "amplify"}, "unknown intervention kind"), ({"target": None}, "needs a target gender"), ({"version": 9}, "version 9")):
        broken = tmp_path / "broken.safetensors"
        save_file({"direction": np.zeros(DIM, dtype=np.float32)}, str(broken), metadata={"intervention": json.dumps(header | change)})
        with pytest.raises(InterventionError, match=expected):
            load_intervention(broken)
    with pytest.raises(InterventionError, match=r"tensor proj_left has shape \(16, 1\), expected \(3, 'r'\)"):
        Intervention("erase", "encoder.layer.0", {}, {}, {"proj_left": np.zeros((DIM, 1)), "proj_right": np.zeros((1, DIM)), "bias": np.zeros(3)})


def test_steering_with_alpha_zero_is_the_identity(tmp_path):
    extractor = tiny_extractor("whisper")
    sites = ["encoder.layer.0", "encoder.layer.1", "encoder.final"]
    plain = _states(extractor, sites)
    steered = _states(extractor, sites, Intervener([_saved(tmp_path, _steer(extractor, alpha=0.0))]))
    for before, after in zip(plain, steered):
        for site in sites:
            np.testing.assert_array_equal(after[site], before[site])


def test_the_hook_edits_exactly_the_requested_site_rows_and_speech_frames(tmp_path):
    """Steer female rows at layer 0: layer 0's female speech frames move by alpha * d (padding and the
    male row untouched), the embedding before it is unchanged, and layer 1 equals a manual forward of
    layer 1 on the edited layer-0 states."""
    extractor = tiny_extractor("whisper", keep_padding=True)  # all 1500 frames, to see the padding
    sites = ["encoder.embed", "encoder.layer.0", "encoder.layer.1"]
    steer = _steer(extractor, alpha=0.7)
    plain = _states(extractor, sites)
    edited = _states(extractor, sites, Intervener([_saved(tmp_path, steer)], gender="female"))
    speech = extractor.speech_frames("encoder.layer.0", len(_audios()[0]), 1500)
    assert 0 < speech < 1500
    female, male = 0, 1
    for site in sites:
        np.testing.assert_array_equal(edited[male][site], plain[male][site])
    np.testing.assert_array_equal(edited[female]["encoder.embed"], plain[female]["encoder.embed"])
    layer0 = edited[female]["encoder.layer.0"]
    np.testing.assert_allclose(layer0[:speech], plain[female]["encoder.layer.0"][:speech] + 0.7 * np.linspace(-1, 1, DIM), atol=1e-5)
    np.testing.assert_array_equal(layer0[speech:], plain[female]["encoder.layer.0"][speech:])
    with torch.inference_mode():
        layer = extractor.encoder.layers[1]
        head_mask = {"layer_head_mask": None} if "layer_head_mask" in inspect.signature(layer.forward).parameters else {}  # gone in transformers 5
        output = layer(torch.from_numpy(layer0)[None], None, **head_mask)
        manual = (output if isinstance(output, torch.Tensor) else output[0])[0].numpy()  # transformers 5's layers return the tensor alone
    np.testing.assert_allclose(edited[female]["encoder.layer.1"], manual, atol=1e-4)
    assert not np.allclose(edited[female]["encoder.layer.1"], plain[female]["encoder.layer.1"], atol=1e-3)


def test_an_eraser_at_the_embedding_site_edits_the_input_of_layer_zero(tmp_path):
    extractor = tiny_extractor("whisper")
    eraser = _eraser(extractor, site="encoder.embed")
    plain = _states(extractor, ["encoder.embed"])
    edited = _states(extractor, ["encoder.embed"], Intervener([_saved(tmp_path, eraser)]))
    for before, after in zip(plain, edited):  # every row: no gender given
        np.testing.assert_allclose(after["encoder.embed"], eraser.apply(before["encoder.embed"]), atol=1e-5)


def test_interventions_apply_in_the_order_given(tmp_path):
    extractor = tiny_extractor("whisper")
    eraser, steer = _eraser(extractor), _steer(extractor)
    plain = _states(extractor, ["encoder.layer.0"])
    both = _states(extractor, ["encoder.layer.0"], Intervener([_saved(tmp_path, eraser, "e.safetensors"), _saved(tmp_path, steer, "s.safetensors")]))
    expected = steer.apply(eraser.apply(plain[0]["encoder.layer.0"]))
    np.testing.assert_allclose(both[0]["encoder.layer.0"], expected, atol=1e-5)


def test_a_file_fitted_on_another_model_or_site_is_refused(tmp_path):
    whisper = tiny_extractor("whisper")
    path = _saved(tmp_path, _steer(whisper))
    with pytest.raises(InterventionError, match="family: file 'whisper' vs loaded 'seamless'"):
        Intervener([path]).check(tiny_extractor("seamless"))
    other = tiny_extractor("whisper")
    other.checkpoint = "openai/whisper-small"
    with pytest.raises(InterventionError, match="checkpoint: file 'tiny-random-whisper' vs loaded 'openai/whisper-small'"):
        Intervener([path]).check(other)
    with pytest.raises(InterventionError, match="random_init: file False vs loaded True"):
        Intervener([path]).check(whisper, random_init=True, seed=0)
    elsewhere = _steer(whisper, site="encoder.layer.7")
    with pytest.raises(InterventionError, match="site 'encoder.layer.7', which whisper does not have"):
        Intervener([_saved(tmp_path, elsewhere, "l7.safetensors")]).check(whisper)


def test_a_file_of_another_hidden_size_is_refused_before_any_state_changes(tmp_path):
    extractor = tiny_extractor("whisper")
    narrow = _eraser(extractor, dim=8)
    intervener = Intervener([_saved(tmp_path, narrow)])
    with pytest.raises(InterventionError, match="fitted on states of size 8; site encoder.layer.0 of the loaded model has 16"):
        _states(extractor, ["encoder.layer.0"], intervener)


def _utterances(tone, count=4):
    return [
        Utterance(id=f"u{i}", audio=str(tone(f"u{i}.wav", seconds=0.5 + 0.1 * i)), language="en", text="x", gender=("female", "male")[i % 2], speaker=f"s{i}")
        for i in range(count)
    ]


def test_extraction_records_the_interventions_and_refuses_a_rerun_with_others(tmp_path, tone):
    extractor = tiny_extractor("whisper")
    utterances = _utterances(tone)
    steer, other = _saved(tmp_path, _steer(extractor), "a.safetensors"), _saved(tmp_path, _steer(extractor, alpha=2.0), "b.safetensors")
    out = tmp_path / "store"
    run = dict(config={"model": "tiny"}, show_progress=False, options=ExtractOptions(storage_dtype="float32"))
    run_extraction(extractor, utterances, ["encoder.layer.0"], out, intervener=Intervener([steer], gender="male"), **run)
    plain = tmp_path / "plain"
    run_extraction(extractor, utterances, ["encoder.layer.0"], plain, **run)
    reader, baseline = ShardReader(out), ShardReader(plain)
    recorded = reader.info.config["interventions"]
    assert recorded == [Intervener([steer], gender="male").records()[0]]
    assert recorded[0]["gender"] == "male" and recorded[0]["kind"] == "steer" and len(recorded[0]["sha256"]) == 64
    for utterance in utterances:
        changed = not np.allclose(reader.get("encoder.layer.0", utterance.id), baseline.get("encoder.layer.0", utterance.id))
        assert changed == (utterance.gender == "male")
    for intervener in (Intervener([other], gender="male"), None):
        with pytest.raises(StoreError, match="another configuration"):
            run_extraction(extractor, utterances, ["encoder.layer.0"], out, intervener=intervener, **run)


def test_an_intervention_after_the_last_extracted_site_is_refused(tmp_path, tone):
    extractor = tiny_extractor("whisper")
    late = Intervener([_saved(tmp_path, _steer(extractor, site="encoder.layer.1"))])
    with pytest.raises(InterventionError, match="never ran"):
        run_extraction(extractor, _utterances(tone), ["encoder.layer.0"], tmp_path / "s", config={}, show_progress=False, intervener=late)
    assert not list((tmp_path / "s").glob("*.h5"))


def _tiny_generator():
    return tiny_whisper_generator(max_new_tokens=3, max_length=8)


def test_generation_edits_the_encoder_once_per_batch_for_the_chosen_gender(tmp_path):
    generator = _tiny_generator()
    extractor = generator.extractor
    steer = _steer(extractor, alpha=0.5)
    audios = _audios()
    sites = {"layer0": Site("model.encoder.layers.0")}
    with torch.inference_mode(), capture(extractor.model, sites, stop_early=False) as (plain, run):
        run(generator.generate, audios, "en", "asr")
    intervener = Intervener([_saved(tmp_path, steer)], gender="male")
    with intervener.installed(extractor), intervener.batch(["female", "male"], [len(a) for a in audios]):
        with torch.inference_mode(), capture(extractor.model, sites, stop_early=False) as (edited, run):
            run(generator.generate, audios, "en", "asr")
    assert intervener._fired == {"encoder.layer.0": 1}
    before, after = plain.tensors["layer0"].numpy(), edited.tensors["layer0"].numpy()
    speech = extractor.speech_frames("encoder.layer.0", len(audios[1]), 1500)
    np.testing.assert_array_equal(after[0], before[0])
    np.testing.assert_allclose(after[1, :speech], before[1, :speech] + 0.5 * np.linspace(-1, 1, DIM), atol=1e-5)
    np.testing.assert_array_equal(after[1, speech:], before[1, speech:])


def test_transcription_runs_with_interventions_and_the_settings_refuse_other_ones(tmp_path, tone):
    generator = _tiny_generator()
    path = _saved(tmp_path, _steer(generator.extractor))
    intervener = Intervener([path], gender="female")
    out = tmp_path / "hyps.jsonl"
    manifest = write_manifest(tmp_path / "m.jsonl", _utterances(tone))
    job = TranscriptionJob(ModelSpec("whisper", device="cpu"), manifest, out, "asr", interventions=(path,), intervene_gender="female")
    settings = job.settings("ckpt", {}, intervener.records(), fingerprint=None)
    assert settings["interventions"][0]["path"] == str(path.resolve()) and settings["interventions"][0]["gender"] == "female"
    assert "interventions" not in job.settings("ckpt", {}, fingerprint=None)  # absent without any: older settings files still match
    check_settings(job.settings_path, settings, out)  # written before the first row, as extract.jobs.transcribe does
    written, _, _ = run_transcription(generator, _utterances(tone), out, "asr", None, "tiny", 60.0, 30.0, False, intervener)
    assert written == 4
    check_settings(job.settings_path, settings, out)
    with pytest.raises(SettingsMismatchError, match="interventions"):
        check_settings(job.settings_path, job.settings("ckpt", {}, fingerprint=None), out)


def test_the_store_content_hash_follows_the_parts(tmp_path, tone):
    extractor = tiny_extractor("whisper")
    run = dict(config={}, show_progress=False, options=ExtractOptions(storage_dtype="float32", utterances_per_part=2))
    run_extraction(extractor, _utterances(tone), ["encoder.layer.0"], tmp_path / "a", **run)
    run_extraction(extractor, _utterances(tone)[:2], ["encoder.layer.0"], tmp_path / "b", **run)
    assert store_content_hash(tmp_path / "a") != store_content_hash(tmp_path / "b")
    assert store_content_hash(tmp_path / "a") == store_content_hash(tmp_path / "a")


def test_cli_refuses_a_missing_file_and_a_gender_without_files(tmp_path, capsys):
    manifest = tmp_path / "m.jsonl"
    write_manifest(manifest, [Utterance(id="a", audio="a.wav", language="en", text="x", gender="female", speaker="s")])
    base = ["--family", "whisper", "--manifest", str(manifest), "--device", "cpu"]
    missing = tmp_path / "missing.safetensors"
    error = one_line_error(extract_cli.main, [*base, "--out", str(tmp_path / "s"), "--intervene", str(missing)], capsys)
    assert error == f"error: {missing}: no such intervention file"
    error = one_line_error(extract_cli.main, [*base, "--out", str(tmp_path / "s"), "--intervene-gender", "male"], capsys)
    assert error == "error: --intervene-gender needs at least one --intervene FILE"
    error = one_line_error(transcribe_cli.main, [*base, "--task", "asr", "--out", str(tmp_path / "h.jsonl"), "--intervene", str(missing)], capsys)
    assert error == f"error: {missing}: no such intervention file"
    error = one_line_error(transcribe_cli.main, [*base, "--task", "asr", "--out", str(tmp_path / "h.jsonl"), "--intervene-gender", "female"], capsys)
    assert error == "error: --intervene-gender needs at least one --intervene FILE"


def test_cli_refuses_a_file_fitted_on_another_model(tmp_path, capsys, tone, monkeypatch):
    manifest = tmp_path / "m.jsonl"
    write_manifest(manifest, _utterances(tone, 2))
    path = _saved(tmp_path, _steer(tiny_extractor("whisper")))
    monkeypatch.setattr("extract.spec.load_extractor", lambda spec, keep_padding=False: tiny_extractor("seamless"))
    argv = ["--family", "seamless", "--manifest", str(manifest), "--device", "cpu", "--out", str(tmp_path / "s"), "--intervene", str(path), "--quiet"]
    error = one_line_error(extract_cli.main, argv, capsys)
    assert error.startswith(f"error: {path} was fitted on another model or site (family: file 'whisper' vs loaded 'seamless'"), error


# ---------------------------------------------------------------- the demo stage's tables


def test_the_translation_table_shows_the_none_share_so_each_row_sums_to_100():
    """Science audit D6: feminine 20 + masculine 30 + mixed 0 left half of She's sentences unshown."""
    from experiments.demo.extras.interventions import mustshe_table, translation_shares

    kinds = {"She": ["feminine"] * 2 + ["masculine"] * 3 + ["none"] * 5, "He": ["feminine"] * 3 + ["masculine"] * 3 + ["mixed", *["none"] * 3]}
    sentences = [{"gender": g, "category": "1F", "translation_gender": k} for g, ks in kinds.items() for k in ks]
    sentences.append({"gender": "She", "category": "2F", "translation_gender": "feminine"})  # not category 1
    lines = mustshe_table({"before": {"result": {"category_1": {"accuracy": 42.1}}, "shares": translation_shares(sentences)}})
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    row = [cell.strip() for cell in lines[2].strip("|").split("|")]
    assert header[2:] == [f"{g} {k} (%)" for g in ("She", "He") for k in ("feminine", "masculine", "mixed", "none")]
    assert row == ["before", "42.1", "20.0", "30.0", "0.0", "50.0", "30.0", "30.0", "10.0", "30.0"]
    assert sum(map(float, row[2:6])) == pytest.approx(100.0) and sum(map(float, row[6:10])) == pytest.approx(100.0)
    assert len(lines[1].split("|")) == len(lines[0].split("|"))


def test_the_asr_table_names_its_estimate_and_an_undefined_e_is_not_zero():
    from experiments.demo.extras.interventions import asr_table

    def entry(female, male):
        return {
            "metric": "wer",
            "error_rate_all": (female + male) / 2,
            "groups": {"female": {"error_rate": female}, "male": {"error_rate": male}},
            "gap_estimate": "resampled",
            "gap_relative": None if male == 0 else 100 * (female - male) / male,
            "bootstrap": {"ci95": [None, None]},
        }

    lines = asr_table({"before": {"languages": {"en": entry(0.0, 0.0), "es": entry(10.0, 8.0)}}})
    assert "| E(F, M) (%, resampled) |" in lines[0]
    assert lines[2].startswith("| before | en (WER) | 0.00 | 0.00 | 0.00 | – |") and "| +25.0 |" in lines[3]


def _rewritten(tmp_path, source, name, change=None, tensors=None):
    """``source`` saved again as ``name`` with its record changed by ``change`` (a function of the
    record) or other ``tensors``, its digest left as it was: a file edited by hand."""
    from safetensors.numpy import load_file

    header = json.loads(safe_open(str(source), framework="numpy").metadata()["intervention"])
    if change is not None:
        change(header)
    target = tmp_path / name
    save_file(tensors or load_file(str(source)), str(target), metadata={"intervention": json.dumps(header)})
    return target


def test_the_digest_binds_the_record_to_its_tensors(tmp_path):
    """#75: an eraser relabelled to another site (its site module too) and #84: a tensor byte flipped
    to another finite value are refused; the file as fitted loads."""
    extractor = tiny_extractor("whisper")
    path = _saved(tmp_path, _eraser(extractor, site="encoder.layer.1"))
    assert load_intervention(path).site == "encoder.layer.1"

    def relabel(header):
        header["site"] = "encoder.layer.0"
        header["model"]["site_module"] = runtime_model_identity(extractor, "encoder.layer.0")["site_module"]

    relabelled = _rewritten(tmp_path, path, "relabelled.safetensors", relabel)
    data = bytearray(path.read_bytes())
    data[8 + int.from_bytes(data[:8], "little") + 3] ^= 1  # the first tensor's first value
    flipped = tmp_path / "flipped.safetensors"
    flipped.write_bytes(bytes(data))
    from safetensors.numpy import load_file

    assert all(np.isfinite(value).all() for value in load_file(str(flipped)).values())
    for edited in (relabelled, flipped):
        with pytest.raises(InterventionError, match="its digest does not match") as refused:
            Intervener([edited])
        assert str(refused.value).startswith(f"{edited}: ") and len(str(refused.value).splitlines()) == 1


@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda h: h.update(alpha="1"), r"needs a finite alpha \(a number\), got '1'"),  # #77
        (lambda h: h.update(alpha=True), r"needs a finite alpha \(a number\), got True"),
        (lambda h: h.update(model=None), "the record's model must be a mapping, got None"),  # #80
        (lambda h: h["model"].pop("site_module"), "the record's model lacks site_module"),
        (lambda h: h.update(site=3), "the record's site must be a site name, got 3"),
        (lambda h: h.update(store=[]), r"the record's store must be a mapping, got \[\]"),
        (lambda h: h.update(fit={"method": "leace"}), "fitting method 'leace' does not make a steer intervention"),
        (lambda h: h.update(version=1), "version 1, expected .* version 2; fit it again"),
        (lambda h: h.pop("digest"), "the intervention record lacks digest"),
    ],
)
def test_a_malformed_record_is_one_line_naming_the_file(tmp_path, change, expected):
    path = _rewritten(tmp_path, _saved(tmp_path, _steer(tiny_extractor("whisper"))), "edited.safetensors", change)
    with pytest.raises(InterventionError, match=expected) as refused:
        load_intervention(path)
    assert str(refused.value).startswith(f"{path}: ") and len(str(refused.value).splitlines()) == 1


def test_an_eraser_takes_no_alpha(tmp_path):
    path = _rewritten(tmp_path, _saved(tmp_path, _eraser(tiny_extractor("whisper"))), "e.safetensors", lambda h: h.update(alpha=1.0))
    with pytest.raises(InterventionError, match="alpha and target are for steering vectors, not erase"):
        load_intervention(path)


def test_cli_malformed_records_and_folders_are_one_line(tmp_path, capsys, tone):
    """#77 (erase show and extract --intervene), #80 and #86 through the command lines."""
    from experiments import erase as erase_cli

    steer = _saved(tmp_path, _steer(tiny_extractor("whisper")))
    text_alpha = _rewritten(tmp_path, steer, "alpha.safetensors", lambda h: h.update(alpha="1"))
    no_model = _rewritten(tmp_path, steer, "model.safetensors", lambda h: h.update(model=None))
    error = one_line_error(erase_cli.main, ["show", str(text_alpha)], capsys)
    assert error == f"error: {text_alpha}: a steering vector needs a finite alpha (a number), got '1'"
    error = one_line_error(erase_cli.main, ["show", str(tmp_path)], capsys)
    assert error == f"error: {tmp_path} is a folder; give an intervention file (python -m experiments.erase fit --out FILE)"
    manifest = tmp_path / "m.jsonl"
    write_manifest(manifest, _utterances(tone, 2))
    base = ["--family", "whisper", "--manifest", str(manifest), "--device", "cpu", "--out", str(tmp_path / "s")]
    for path, message in ((text_alpha, "needs a finite alpha"), (no_model, "the record's model must be a mapping, got None")):
        error = one_line_error(extract_cli.main, [*base, "--intervene", str(path)], capsys)
        assert error.startswith(f"error: {path}: ") and message in error, error


def test_a_steering_step_beyond_float32_is_refused_when_fitted():
    """#68: alpha 1e39 is finite in float64, but the edit computes in float32."""
    extractor = tiny_extractor("whisper")
    with pytest.raises(InterventionError, match=r"alpha 1e\+39 times the direction reaches 1e\+39, beyond float32"):
        _steer(extractor, alpha=1e39, direction=np.ones(DIM))
    _steer(extractor, alpha=1e30, direction=np.ones(DIM))


def test_an_edit_that_overflows_at_run_time_names_its_files(tmp_path):
    """#68 at run time: two steps that each fit float32 overflow together at their site; one step
    that fits makes the next layer non-finite. Both errors name the files."""
    from extract.families import NonFiniteError

    extractor = tiny_extractor("whisper")
    huge = np.full(DIM, 3e38)
    first, second = (_saved(tmp_path, _steer(extractor, alpha=1.0, direction=huge), name) for name in ("a.safetensors", "b.safetensors"))
    with pytest.raises(InterventionError, match=f"{first}, {second}: the edit at encoder.layer.0 made the states non-finite in float32"):
        _states(extractor, ["encoder.layer.0"], Intervener([first, second]))
    with pytest.raises(NonFiniteError, match=f"non-finite values at site encoder.layer.1 .*, with the states edited by {first}"):
        intervener = Intervener([first])
        with intervener.installed(extractor), intervener.batch(["female", "male"], [len(a) for a in _audios()]):
            extractor.extract(_audios(), ["encoder.layer.0", "encoder.layer.1"], ids=["a", "b"])
