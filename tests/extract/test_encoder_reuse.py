"""Whisper's encoder run once for extraction and transcription (extract.encoder_reuse), on the tiny
random Whisper: a transcription decodes from the outputs an extraction kept, gives the hypotheses
of a transcription that runs its own encoder, and never takes another model's outputs, a partly
kept batch, outputs kept under interventions or past the memory bound."""

import numpy as np
import pytest
import torch

from extract import encoder_reuse
from extract.encoder_reuse import reused, reusing_encoder_outputs, suspended

RATE = 16_000
SITES = ["encoder.final"]


@pytest.fixture(scope="module")
def models():
    from extract.families.generation import GenerationOptions
    from extract.spec import ModelSpec, load_extractor, load_generator

    spec = ModelSpec("whisper", "tiny-random", device="cpu")
    return load_extractor(spec), load_generator(spec, GenerationOptions(max_new_tokens=6, num_beams=1))


def _audios(seconds, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(0, 0.1, int(s * RATE)).astype(np.float32) for s in seconds]


def _encoder_refuses(monkeypatch, generator):
    def refuse(*args, **kwargs):
        raise AssertionError("the encoder ran")

    monkeypatch.setattr(generator.extractor.encoder, "forward", refuse)


def test_a_transcription_decodes_from_the_kept_outputs_and_gives_the_same_hypotheses(models, monkeypatch):
    extractor, generator = models
    audios = _audios((1.0, 0.6, 0.8))
    recomputed = generator.generate(audios, "en", "asr")
    with reusing_encoder_outputs():
        extractor.extract(audios, SITES)
        with monkeypatch.context() as patched:
            _encoder_refuses(patched, generator)
            assert generator.generate(audios[:2], "en", "asr") == recomputed[:2]  # a batch of its own: any grouping of kept clips
            assert generator.generate(audios[2:], "en", "asr") == recomputed[2:]
        assert reused() == 3
        assert not encoder_reuse._ACTIVE.kept and encoder_reuse._ACTIVE.bytes == 0  # each output is handed over once


def test_nothing_is_kept_outside_the_block_or_reused_after_it(models):
    extractor, generator = models
    audios = _audios((0.7,))
    extractor.extract(audios, SITES)
    with reusing_encoder_outputs():
        generator.generate(audios, "en", "asr")
        assert reused() == 0
    assert reused() == 0


def test_a_batch_with_one_clip_not_kept_runs_the_encoder(models):
    extractor, generator = models
    kept, other = _audios((0.9,)), _audios((0.9,), seed=1)
    with reusing_encoder_outputs():
        extractor.extract(kept, SITES)
        generator.generate(kept + other, "en", "asr")
        assert reused() == 0 and len(encoder_reuse._ACTIVE.kept) == 1


def test_another_models_outputs_are_never_taken(models):
    from extract.families.base import seeded

    extractor, generator = models
    audios = _audios((0.8,))
    with reusing_encoder_outputs():
        extractor.extract(audios, SITES)
        with torch.no_grad(), seeded(3):  # the generator's encoder redrawn in place: other weights
            saved = {name: value.clone() for name, value in generator.extractor.encoder.state_dict().items()}
            for parameter in generator.extractor.encoder.parameters():
                parameter.normal_(0, 0.02)
        try:
            generator.generate(audios, "en", "asr")
            assert reused() == 0
        finally:
            generator.extractor.encoder.load_state_dict(saved)
        generator.generate(audios, "en", "asr")  # its own weights again: a new digest of the same bytes
        assert reused() == 1


def test_nothing_is_kept_under_interventions_or_past_the_bound(models):
    extractor, _ = models
    audios = _audios((0.5, 0.5))
    with reusing_encoder_outputs():
        with suspended():
            extractor.extract(audios, SITES)
        assert not encoder_reuse._ACTIVE.kept
    one_clip = 1500 * extractor.encoder.config.d_model * 4  # 30 s of float32 encoder frames
    with reusing_encoder_outputs(max_bytes=one_clip):
        extractor.extract(audios, SITES)
        assert len(encoder_reuse._ACTIVE.kept) == 1 and encoder_reuse._ACTIVE.bytes == one_clip
    with reusing_encoder_outputs():
        extractor.extract(audios[:1], SITES)
        extractor.extract(audios[:1], SITES)  # the same clip again: kept, and counted, once
        assert len(encoder_reuse._ACTIVE.kept) == 1 and encoder_reuse._ACTIVE.bytes == one_clip


def test_an_extraction_stopped_before_the_encoders_end_or_of_random_weights_keeps_nothing(models, monkeypatch):
    extractor, _ = models
    with reusing_encoder_outputs():
        extractor.extract(_audios((0.5,)), ["encoder.layer.0"])
        assert not encoder_reuse._ACTIVE.kept
        monkeypatch.setattr(extractor, "random_init", True)
        extractor.extract(_audios((0.5,)), SITES)
        assert not encoder_reuse._ACTIVE.kept


def test_a_run_with_interventions_installed_neither_keeps_nor_reuses():
    from contextlib import nullcontext

    from extract.runner import intervened

    class Installs:
        def installed(self, extractor, random_init, seed):
            return nullcontext()

    with reusing_encoder_outputs():
        with intervened(Installs(), extractor=None):
            assert encoder_reuse._active() is None
        assert encoder_reuse._active() is not None
        with intervened(None, extractor=None):
            assert encoder_reuse._active() is not None
