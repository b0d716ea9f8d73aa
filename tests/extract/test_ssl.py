"""The ``ssl`` family on tiny random models of each architecture (extract.families.ssl): sites from
the config, stored states against the model's own outputs, lengths from the model's formula,
padding, CTC transcription, MMS adapters. The family's conformance tests are in test_extract.py."""

import json

import numpy as np
import pytest
import torch
import transformers

from extract.families.generation import GenerationError, GenerationOptions
from extract.families.ssl import ARCHITECTURES, TINY_VOCABULARY, SSLExtractor, SSLGenerator, mms_code, tiny_ssl_model
from extract.spec import ModelSpec, load_extractor, load_generator

NORMS = {"group": {"feat_extract_norm": "group", "do_stable_layer_norm": False}, "layer": {"feat_extract_norm": "layer", "do_stable_layer_norm": True}}
# every architecture in each configuration its checkpoints come in: (model_type, config fields)
VARIANTS = [
    ("wav2vec2", NORMS["group"]),  # wav2vec2-base
    ("wav2vec2", NORMS["layer"]),  # wav2vec2-large-lv60, XLS-R, MMS, LeBenchmark large
    ("wav2vec2-conformer", {}),
    ("hubert", NORMS["group"]),  # hubert-base
    ("hubert", NORMS["layer"]),  # hubert-large
    ("wavlm", NORMS["group"]),
    ("wavlm", NORMS["layer"]),
    ("data2vec-audio", {}),
    ("wav2vec2-bert", {}),
]
IDS = [f"{model_type}-{fields.get('feat_extract_norm', 'own')}" for model_type, fields in VARIANTS]
LEGACY_HIDDEN_STATES = int(transformers.__version__.split(".")[0]) < 5  # 4.x: a pre-LN model's last hidden_states entry is after its final norm


def _waves(seconds=(1.0, 1.6, 0.7), seed=0):
    rng = np.random.default_rng(seed)
    return [(0.1 * rng.standard_normal(int(s * 16_000))).astype(np.float32) for s in seconds]


def _extractor(model_type, fields, ctc=True):
    model, processor = tiny_ssl_model(model_type, ctc=ctc, **fields)
    return SSLExtractor(model, processor, checkpoint=f"tiny-{model_type}")


def reference_states(model, inputs) -> dict:
    """One utterance's sites from the model's own outputs: ``hidden_states[0]`` is ``encoder.embed``,
    ``hidden_states[i + 1]`` is ``encoder.layer.i`` (for a pre-LN model on transformers 4.x the last
    entry is after the final norm, i.e. ``encoder.final``), ``last_hidden_state`` is ``encoder.final``
    where there is one, and the convolutional encoder's output, transposed, is ``encoder.cnn``."""
    extractor = SSLExtractor(model, None)
    base, key = extractor.base, extractor.input_key
    out = base(inputs[key], attention_mask=inputs["attention_mask"], output_hidden_states=True)
    names = extractor.site_names(extractor.config_dict)
    layers = len(out.hidden_states) - 1
    states = {"encoder.embed": out.hidden_states[0]}
    states |= {f"encoder.layer.{index}": out.hidden_states[index + 1] for index in range(layers)}
    if "encoder.final" in names:
        states["encoder.final"] = out.last_hidden_state
        if LEGACY_HIDDEN_STATES and ARCHITECTURES[extractor.config_dict["model_type"]].stable_variant:
            del states[f"encoder.layer.{layers - 1}"]  # that entry is the final norm's output there
    if "encoder.cnn" in names:
        states["encoder.cnn"] = base.feature_extractor(inputs[key]).transpose(1, 2)
    return states


@pytest.mark.parametrize(("model_type", "fields"), VARIANTS, ids=IDS)
def test_the_site_table_comes_from_the_config(model_type, fields):
    extractor = _extractor(model_type, fields)
    table = extractor.site_table()
    assert list(table) == SSLExtractor.site_names(extractor.config_dict)
    has_final = model_type == "wav2vec2-conformer" or fields.get("do_stable_layer_norm", False)
    expected = [*(["encoder.cnn"] if model_type != "wav2vec2-bert" else []), "encoder.embed", "encoder.layer.0", "encoder.layer.1"]
    assert list(table) == expected + (["encoder.final"] if has_final else [])
    bare = _extractor(model_type, fields, ctc=False)  # a bare encoder: the same sites, module paths without the prefix
    assert list(bare.site_table()) == list(table) and bare.site_table()["encoder.layer.1"].module == "encoder.layers.1"
    assert table["encoder.layer.1"].module == f"{extractor.model.base_model_prefix}.encoder.layers.1"


def test_site_names_need_a_known_model_type_and_a_layer_count():
    assert SSLExtractor.site_names({"model_type": "whisper", "num_hidden_layers": 2}) is None
    assert SSLExtractor.site_names({"model_type": "wav2vec2"}) is None
    assert SSLExtractor.site_names({"model_type": "wav2vec2", "num_hidden_layers": 24, "do_stable_layer_norm": True})[-2:] == [
        "encoder.layer.23",
        "encoder.final",
    ]


@pytest.mark.parametrize(("model_type", "fields"), VARIANTS, ids=IDS)
def test_stored_states_equal_the_models_own_hidden_states(model_type, fields):
    extractor = _extractor(model_type, fields)
    audio = _waves((1.3,))[0]
    (states,) = extractor.extract([audio], extractor.resolve_sites("all"))
    with torch.inference_mode():
        reference = reference_states(extractor.model, extractor.prepare([audio]).inputs)
    assert set(reference) >= set(states) - {f"encoder.layer.{1}"} and "encoder.layer.0" in reference
    for site, expected in reference.items():
        np.testing.assert_allclose(states[site], expected[0].numpy(), atol=1e-5, err_msg=site)
    if "encoder.final" in states:  # the final norm is a real step: it is not the last layer's output
        assert np.abs(states["encoder.final"] - states["encoder.layer.1"]).max() > 1e-3 or model_type == "wav2vec2-conformer"


@pytest.mark.parametrize(("model_type", "fields"), VARIANTS, ids=IDS)
def test_frames_come_from_the_models_length_formula(model_type, fields):
    extractor = _extractor(model_type, fields)
    waves = [np.full(n, 0.05, dtype=np.float32) + np.linspace(0, 0.01, n, dtype=np.float32) for n in (16_000, 24_321, 11_200)]
    out = extractor.extract(waves, extractor.resolve_sites("all"))
    if model_type == "wav2vec2-bert":  # filterbank frames: 10 ms, stacked in pairs (the feature extractor's mask counts them)
        expected = [int(extractor.prepare([wave]).inputs["attention_mask"].sum()) for wave in waves]
        assert abs(expected[0] - 50) <= 1 and extractor.frame_rate("encoder.layer.0") == 50.0
    else:  # conv kernels (10, 8), strides (5, 4): floor((floor((n - 10) / 5) + 1 - 8) / 4) + 1
        expected = [((n - 10) // 5 + 1 - 8) // 4 + 1 for n in (16_000, 24_321, 11_200)]
        assert extractor.frame_rate("encoder.layer.0") == 16_000 / 20
    for states, frames in zip(out, expected):
        assert {site: array.shape[0] for site, array in states.items()} == dict.fromkeys(states, frames)


@pytest.mark.parametrize(("model_type", "fields"), VARIANTS, ids=IDS)
def test_batched_equals_one_by_one(model_type, fields):
    """Exact within float rounding for both norm types (group norm: each utterance's convolutions
    run alone; conformer and data2vec-audio: their time convolutions see zeros past each utterance),
    at every site and frame."""
    extractor = _extractor(model_type, fields)
    sites, waves = extractor.resolve_sites("all"), _waves()
    batched = extractor.extract(waves, sites)
    for wave, together in zip(waves, batched):
        (alone,) = extractor.extract([wave], sites)
        for site in sites:
            np.testing.assert_allclose(together[site], alone[site], atol=1e-5, err_msg=site)


def test_a_zero_padded_group_norm_batch_would_change_the_states():
    """Why group-norm convolutions run per utterance: on the padded batch, the short utterance's states move."""
    extractor = _extractor("wav2vec2", NORMS["group"])
    waves = _waves((1.0, 0.5))
    inputs = extractor.prepare(waves).inputs
    site = extractor.site_table()["encoder.cnn"]
    from extract.hooks import capture

    with torch.inference_mode(), capture(extractor.model, {"cnn": site}) as (padded, run):
        run(extractor.base, inputs["input_values"], attention_mask=inputs["attention_mask"])
    frames = extractor.output_lengths(extractor.prepare(waves[1:]).inputs)[0]
    (alone,) = extractor.extract(waves[1:], ["encoder.cnn"])
    assert np.abs(padded.tensors["cnn"][1, :frames].numpy() - alone["encoder.cnn"]).max() > 1e-2


def test_the_conformer_and_data2vec_audio_would_read_the_padding_without_their_zeroed_frames():
    """Why their convolutions over time get zeros past each utterance: without, a short utterance's states move."""
    from contextlib import nullcontext

    from extract.hooks import capture

    for model_type in ("wav2vec2-conformer", "data2vec-audio"):
        extractor = _extractor(model_type, {})
        waves = _waves((1.0, 0.5))
        (alone,) = extractor.extract(waves[1:], ["encoder.layer.1"])
        inputs = extractor.prepare(waves).inputs
        per_utterance = extractor._convolutions_per_utterance(inputs) if extractor.group_norm else nullcontext()  # only the zeroing left out
        site = {"layer": extractor.site_table()["encoder.layer.1"]}
        with torch.inference_mode(), per_utterance, capture(extractor.model, site) as (padded, run):
            run(extractor.base, inputs["input_values"], attention_mask=inputs["attention_mask"])
        frames = alone["encoder.layer.1"].shape[0]
        # ten times the batched-vs-one-by-one tolerance (1e-5): the tiny models' redrawn weights (scale 0.02) make
        # the leak small (2.8e-4 for the conformer), but it is there and the zeroing removes it
        assert np.abs(padded.tensors["layer"][1, :frames].numpy() - alone["encoder.layer.1"]).max() > 1e-4, model_type


# --- CTC transcription --------------------------------------------------------------------------


def _tiny_generator(model_type="wav2vec2", fields=NORMS["layer"], **options):
    extractor = _extractor(model_type, fields)
    return SSLGenerator(extractor, SSLGenerator.tiny_tokenizer(extractor), **options)


def _greedy_alone(generator, wave):
    inputs = generator.extractor.prepare([wave]).inputs
    with torch.inference_mode():
        ids = generator.model(inputs[generator.extractor.input_key], attention_mask=inputs["attention_mask"]).logits.argmax(-1)[0]
    merged = [int(token) for index, token in enumerate(ids) if index == 0 or token != ids[index - 1]]
    return (
        "".join(TINY_VOCABULARY[token] for token in merged if token != 0).replace("|", " ").replace("<s>", "").replace("</s>", "").replace("<unk>", "").strip()
    )


@pytest.mark.parametrize(("model_type", "fields"), [("wav2vec2", NORMS["group"]), ("wav2vec2", NORMS["layer"]), ("data2vec-audio", {}), ("wav2vec2-bert", {})])
def test_ctc_decoding_is_greedy_and_a_batch_decodes_as_each_utterance_alone(model_type, fields):
    generator = _tiny_generator(model_type, fields)
    waves = _waves((1.0, 0.4, 0.7), seed=3)
    texts = generator.generate(waves, "en", "asr")
    assert texts == [generator.generate([wave], "en", "asr")[0] for wave in waves]
    if model_type != "wav2vec2-bert":
        assert texts == [_greedy_alone(generator, wave) for wave in waves] and any(texts)


def test_frames_past_an_utterances_length_are_blanked():
    """A padded batch's extra frames hold logits too; decoded, they would add letters to the short utterance."""
    generator = _tiny_generator()
    with torch.no_grad():
        generator.model.lm_head.bias[5] = 50.0  # 'a' wins every frame: padded frames included
    waves = _waves((1.0, 0.4))
    inputs = generator.extractor.on_device(generator.extractor.prepare(waves).inputs)
    tokens = generator._generate(inputs, "en", "asr", "en")
    frames = generator.extractor.output_lengths(generator.extractor.prepare(waves[1:]).inputs)[0]
    assert (tokens[1, :frames] == 5).all() and (tokens[1, frames:] == 0).all() and tokens.shape[1] > frames


def test_translation_decoding_options_and_a_bare_encoder_are_refused_in_one_line():
    generator = _tiny_generator()
    refusals = [
        (lambda: generator.generate(_waves((0.5,)), "en", "st", "fr"), "a CTC model has no text decoder and cannot translate: --task asr only"),
        (lambda: _tiny_generator(num_beams=4).check("asr", None), "CTC decoding is greedy and frame-synchronous: num_beams do not apply"),
        (lambda: _tiny_generator(adapter="fra").check("asr", None), "--adapter fra: tiny-wav2vec2 has no language adapters"),
        (lambda: SSLGenerator.load(_extractor("hubert", NORMS["group"], ctc=False), GenerationOptions()), "is a bare HubertModel without a CTC head"),
    ]
    for refuse, message in refusals:
        with pytest.raises(GenerationError, match=message) as refused:
            refuse()
        assert "\n" not in str(refused.value)


def test_decoder_states_are_refused_naming_why():
    from extract.decoder import DecoderError, check_family

    with pytest.raises(DecoderError, match="ssl has no text decoder in its model \\(a CTC head reads the encoder's frames") as refused:
        check_family("ssl")
    assert "\n" not in str(refused.value)


def test_the_tiny_random_checkpoint_transcribes_offline_and_records_its_decoding():
    generator = load_generator(ModelSpec("ssl", "tiny-random", device="cpu"))
    assert isinstance(generator.generate(_waves((0.6,)), "fr", "asr")[0], str)
    settings = generator.settings()
    assert settings["decoding"].startswith("greedy CTC") and settings["adapter"] is None and settings["overrides"] == {}


# --- checkpoints on disk: the loading code users run, MMS adapters, random init --------------------


@pytest.fixture(scope="module")
def mms_folder(tmp_path_factory):
    """A tiny MMS-like checkpoint: a Wav2Vec2ForCTC with language adapters, a nested (per-language)
    CTC vocabulary for fra and eng, and adapter weights for fra only."""
    from safetensors.torch import save_file

    folder = tmp_path_factory.mktemp("mms")
    model, processor = tiny_ssl_model("wav2vec2", adapter_attn_dim=4, **NORMS["layer"])
    model.config.architectures = ["Wav2Vec2ForCTC"]
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    vocabulary = {token: index for index, token in enumerate(TINY_VOCABULARY)}
    (folder / "nested.json").write_text(json.dumps({"fra": vocabulary, "eng": vocabulary}))
    transformers.Wav2Vec2CTCTokenizer(str(folder / "nested.json"), target_lang="eng").save_pretrained(folder)
    adapters = {name: value.clone() + 0.5 for name, value in model._get_adapters().items()}
    adapters |= {name: value.clone() for name, value in model.lm_head.state_dict().items() for name in [f"lm_head.{name}"]}
    save_file({name: tensor.contiguous() for name, tensor in adapters.items()}, str(folder / "adapter.fra.safetensors"))
    return folder


def test_a_saved_ctc_checkpoint_loads_with_its_class_and_feature_extractor(mms_folder):
    extractor = load_extractor(ModelSpec("ssl", str(mms_folder), device="cpu"))
    assert type(extractor.model).__name__ == "Wav2Vec2ForCTC" and extractor.is_ctc
    assert ModelSpec("ssl", str(mms_folder)).offline_sites() == list(extractor.site_table())
    random = load_extractor(ModelSpec("ssl", str(mms_folder), device="cpu", random_init=True, seed=1))
    trained = extractor.model.state_dict()
    assert list(random.site_table()) == list(extractor.site_table())
    assert not torch.equal(
        random.model.state_dict()["wav2vec2.encoder.layers.0.attention.q_proj.weight"], trained["wav2vec2.encoder.layers.0.attention.q_proj.weight"]
    )


def test_mms_takes_the_adapter_of_the_manifests_language_and_refuses_a_missing_one(mms_folder):
    generator = load_generator(ModelSpec("ssl", str(mms_folder), device="cpu"))
    before = generator.model.wav2vec2.encoder.layers[0].adapter_layer.linear_1.weight.clone()
    generator.generate(_waves((0.5,)), "fr", "asr")
    assert generator.loaded_adapter == "fra" and generator.tokenizer.target_lang == "fra"
    assert not torch.equal(before, generator.model.wav2vec2.encoder.layers[0].adapter_layer.linear_1.weight)
    with pytest.raises(
        GenerationError, match="has no adapter 'deu' \\(from the manifest's language 'de'\\); it has 2, e.g. eng, fra: pass --adapter CODE"
    ) as refused:
        generator.generate(_waves((0.5,)), "de", "asr")
    assert "\n" not in str(refused.value)
    chosen = load_generator(ModelSpec("ssl", str(mms_folder), device="cpu"), GenerationOptions(adapter="eng"))
    with pytest.raises(GenerationError, match="the weights of adapter 'eng' \\(from --adapter\\) cannot be loaded") as refused:
        chosen.generate(_waves((0.5,)), "fr", "asr")
    assert "\n" not in str(refused.value) and chosen.settings()["adapter"] == "eng"


def test_mms_codes_are_iso_639_3():
    assert (mms_code("fr"), mms_code("en"), mms_code("zh"), mms_code("fra"), mms_code("cmn-script_simplified")) == (
        "fra",
        "eng",
        "cmn-script_simplified",
        "fra",
        "cmn-script_simplified",
    )


def test_mean_pooling_and_leading_positions_cut_each_utterances_own_frames():
    extractor = _extractor("wav2vec2", NORMS["group"])
    waves = _waves((0.6, 0.3))
    full = extractor.extract(waves, ["encoder.layer.1"])
    pooled = extractor.extract(waves, ["encoder.layer.1"], pool="mean")
    leading = extractor.extract(waves, ["encoder.layer.1"], positions=100)
    for whole, mean, first in zip(full, pooled, leading):
        np.testing.assert_allclose(mean["encoder.layer.1"][0], whole["encoder.layer.1"].mean(axis=0), atol=1e-5)
        np.testing.assert_array_equal(first["encoder.layer.1"], whole["encoder.layer.1"][:100])


def test_a_checkpoint_of_another_architecture_is_refused_in_one_line(tmp_path, capsys):
    from experiments import extract as extract_cli
    from extract.families import tiny_extractor

    whisper = tiny_extractor("whisper")
    whisper.model.save_pretrained(tmp_path / "whisper")
    whisper.processor.save_pretrained(tmp_path / "whisper")
    argv = ["--family", "ssl", "--checkpoint", str(tmp_path / "whisper"), "--manifest", str(tmp_path / "m.jsonl"), "--out", str(tmp_path / "s")]
    from extract.manifest import Utterance, write_manifest

    write_manifest(tmp_path / "m.jsonl", [Utterance(id="a", audio=str(tmp_path / "a.wav"), language="fr", text="x", gender="female", speaker="s")])
    try:
        code = extract_cli.main([*argv, "--device", "cpu", "--quiet"])
    except SystemExit as stopped:
        code = stopped.code
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2 and error.startswith("error: model_type 'whisper' is not a self-supervised speech encoder the ssl family runs; it runs wav2vec2,")
