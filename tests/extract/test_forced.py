"""Teacher-forced log-probabilities (extract.forced) on the tiny random Whisper with its real tokenizer:
each token's score is the one a step-by-step decoder run gives, the hypotheses are those of plain
generation, and a patch hook at an encoder site fires once around it."""

import numpy as np
import pytest
import torch

from extract.decoder import DecoderError
from extract.forced import ForcedText, generate_scored

RATE = 16_000


@pytest.fixture(scope="module")
def generator():
    from extract.families.generation import GenerationOptions
    from extract.spec import ModelSpec, load_generator

    return load_generator(ModelSpec("whisper", "tiny-random", device="cpu"), GenerationOptions(max_new_tokens=4))


def _audios(seconds, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(0, 0.1, int(s * RATE)).astype(np.float32) for s in seconds]


def test_each_token_s_log_probability_is_that_of_a_step_by_step_decoder_run(generator):
    audios = _audios((1.0, 0.6))
    scored = generate_scored(generator, audios, "en", "asr", None, [["the cat sat", "a dog"], ["the cat sat"]])
    assert [len(group) for group in scored.texts] == [2, 1]
    model = generator.model
    inputs = generator.extractor.prepare(audios).inputs
    prompt = [model.generation_config.decoder_start_token_id, model.generation_config.lang_to_id["<|en|>"], model.generation_config.task_to_id["transcribe"]]
    prompt.append(model.generation_config.no_timestamps_token_id)
    for row, group in enumerate(scored.texts):
        for text, forced in zip(["the cat sat", "a dog"], group):
            ids = generator.tokenizer(" " + text, add_special_tokens=False)["input_ids"]
            assert list(forced.ids) == ids
            for j, token in enumerate(ids):
                with torch.inference_mode():
                    logits = model(input_features=inputs["input_features"][row : row + 1], decoder_input_ids=torch.tensor([prompt + ids[:j]])).logits
                expected = torch.log_softmax(logits[0, -1].float(), dim=-1)[token].item()
                assert forced.logprobs[j] == pytest.approx(expected, abs=1e-5)
    assert scored.texts[0][0].mean == pytest.approx(np.mean(scored.texts[0][0].logprobs))


def test_the_hypotheses_are_those_of_plain_generation_and_a_patch_hook_fires_once(generator):
    from extract.patching import capture_sources, patched_together

    audios = _audios((1.0, 0.6))
    assert generate_scored(generator, audios, "en", "asr", None, [[], []]).hypotheses == generator.generate(audios, "en", "asr")
    sources = capture_sources(generator.extractor, audios, ["encoder.layer.0"], None)
    plain = generate_scored(generator, audios, "en", "asr", None, [["the cat"], ["the cat"]])
    scored, reports = patched_together(
        generator, ["encoder.layer.0"], audios, sources, "en", "asr", None,
        generate=lambda targets: generate_scored(generator, targets, "en", "asr", None, [["the cat"], ["the cat"]]),
    )  # fmt: skip
    assert reports["encoder.layer.0"].replaced == [50, 30]
    assert scored.texts == plain.texts  # a self-patch: the same scores, bit for bit


def test_bad_input_is_refused_in_one_line(generator):
    with pytest.raises(ValueError, match="1 groups of texts for 2 utterances"):
        generate_scored(generator, _audios((0.5, 0.5)), "en", "asr", None, [[]])
    with pytest.raises(ValueError, match="speech translation needs a target language"):
        generate_scored(generator, _audios((0.5,)), "en", "st", None, [[]])
    zeroswot = type("G", (), {"family": "zeroswot"})()
    with pytest.raises(DecoderError, match="zeroswot has no text decoder in its model"):
        generate_scored(zeroswot, _audios((0.5,)), "en", "asr", None, [[]])
    assert np.isnan(ForcedText((), ()).mean)
