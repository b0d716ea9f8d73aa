"""Transcription and translation with the four model families.

A generator wraps the family's extractor (same loading, same input preparation, layerdrop off,
eval mode) and adds the tokenizer and the language forcing each family needs:

- Whisper: ``language`` and ``task`` (``transcribe``; ``translate`` only into English);
- SeamlessM4T v2: ``tgt_lang`` (its 3-letter codes; for ASR the source language);
- fairseq S2T: the target-language token as forced BOS when the tokenizer has language codes
  (the multilingual MuST-C model); bilingual models generate unforced;
- ZeroSwot: its compressed embeddings go to the NLLB decoder as ``inputs_embeds``, with the
  FLORES-200 target code as forced BOS. The decoder is the NLLB model the checkpoint's config names
  (``nllb_model_name_or_path``), and beam search uses 5 beams, as in the model card's example, the
  authors' fairseq evaluation (``--beam 5``) and Fucci et al.'s code.

Decoding uses each model's own generation config (plus the family's published defaults above);
``num_beams`` and ``max_new_tokens`` override it when given. ``settings()`` returns what was used,
for the output's settings file.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np
import torch

from experiments.languages import nllb_code, seamless_code
from extract.families.base import Extractor

# the default decoder, in words: transcribe's --decoder help prints it
ZEROSWOT_DECODER = "the NLLB model named by the checkpoint's config (nllb_model_name_or_path)"


class GenerationError(ValueError):
    pass


class Generator(ABC):
    family: ClassVar[str]
    family_defaults: ClassVar[dict] = {}  # the authors' decoding settings where the hub config lacks them

    def __init__(self, extractor: Extractor, tokenizer, num_beams: int | None = None, max_new_tokens: int | None = None):
        self.extractor, self.tokenizer = extractor, tokenizer
        given = {key: value for key, value in {"num_beams": num_beams, "max_new_tokens": max_new_tokens}.items() if value is not None}
        self.overrides = self.family_defaults | given

    @property
    def model(self):
        return self.extractor.model

    @property
    def generation_config(self):
        return self.model.generation_config

    def settings(self) -> dict:
        """The decoding settings in force: the model's generation config as it differs from the
        library defaults, plus the overrides."""
        config = self.generation_config.to_diff_dict()
        config.pop("transformers_version", None)
        return {"generation_config": _jsonable(config), "overrides": dict(self.overrides)}

    def check(self, task: str, tgt_lang: str | None) -> None:
        """Raise ``GenerationError`` for a task or target this family cannot do."""

    def generate(self, audios: list[np.ndarray], language: str, task: str, tgt_lang: str | None = None) -> list[str]:
        """Hypotheses for a batch of 16 kHz waveforms that share a source language and task."""
        if task not in ("asr", "st"):
            raise GenerationError(f"task must be 'asr' or 'st', got {task!r}")
        if task == "st" and not tgt_lang:
            raise GenerationError("speech translation needs a target language (--tgt-lang)")
        self.check(task, tgt_lang)
        inputs = self.extractor.on_device(self.extractor.prepare(audios).inputs)
        with torch.inference_mode():
            tokens = self._generate(inputs, language, task, tgt_lang if task == "st" else language)
        return [text.strip() for text in self.tokenizer.batch_decode(tokens, skip_special_tokens=True)]

    @abstractmethod
    def _generate(self, inputs: dict[str, torch.Tensor], language: str, task: str, target: str) -> torch.Tensor:
        """Token ids [batch, length]; ``target`` is the output language (the source language for ASR)."""


class WhisperGenerator(Generator):
    """``translate_by_forcing``: for ST into a language other than English, run the ``transcribe``
    task with the *target* language forced. Whisper then often answers in that language; it is a
    known side effect, not a trained translation direction (the demo uses it to have Spanish
    output from the bundled model, and says so)."""

    family = "whisper"

    def __init__(self, *args, translate_by_forcing: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.translate_by_forcing = translate_by_forcing

    def settings(self) -> dict:
        return super().settings() | {"translate_by_forcing": self.translate_by_forcing}

    @property
    def multilingual(self) -> bool:
        return bool(getattr(self.generation_config, "is_multilingual", True))

    def check(self, task: str, tgt_lang: str | None) -> None:
        if not self.multilingual and task == "st":
            raise GenerationError("an English-only Whisper (*.en) cannot translate")
        if task == "st" and tgt_lang != "en" and not self.translate_by_forcing:
            raise GenerationError(f"Whisper translates only into English, not {tgt_lang!r} (see --whisper-translate-by-forcing)")

    def _generate(self, inputs, language, task, target):
        if not self.multilingual:  # *.en models take no language or task token
            if language != "en":
                raise GenerationError(f"an English-only Whisper cannot transcribe {language!r}")
            return self.model.generate(inputs["input_features"], **self.overrides)
        if task == "st" and target != "en":  # translate_by_forcing, checked above
            return self.model.generate(inputs["input_features"], language=target, task="transcribe", **self.overrides)
        whisper_task = "transcribe" if task == "asr" else "translate"
        return self.model.generate(inputs["input_features"], language=language, task=whisper_task, **self.overrides)


class SeamlessGenerator(Generator):
    family = "seamless"

    def _generate(self, inputs, language, task, target):
        return self.model.generate(
            input_features=inputs["input_features"], attention_mask=inputs["attention_mask"], tgt_lang=seamless_code(target), **self.overrides
        )


class S2TGenerator(Generator):
    family = "s2t"

    def forced_bos(self, target: str) -> dict:
        codes = getattr(self.tokenizer, "lang_code_to_id", None)
        if not codes:
            return {}
        if target not in codes:
            raise GenerationError(f"this S2T tokenizer has no language token for {target!r}; it knows {sorted(codes)}")
        return {"forced_bos_token_id": codes[target]}

    def _generate(self, inputs, language, task, target):
        return self.model.generate(
            inputs["input_features"], attention_mask=inputs["attention_mask"], **self.forced_bos(target), **self.overrides
        )


class ZeroSwotGenerator(Generator):
    """The ZeroSwot encoder (the extractor's model) feeding an NLLB decoder model."""

    family = "zeroswot"
    family_defaults = {"num_beams": 5}

    def __init__(self, extractor: Extractor, tokenizer, decoder, decoder_checkpoint: str | None = None, **kwargs):
        super().__init__(extractor, tokenizer, **kwargs)
        self.decoder = decoder.to(extractor.device, dtype=extractor.dtype).eval()
        self.decoder_checkpoint = decoder_checkpoint

    @property
    def generation_config(self):
        return self.decoder.generation_config

    def settings(self) -> dict:
        return super().settings() | {"decoder": self.decoder_checkpoint}

    def _generate(self, inputs, language, task, target):
        code = nllb_code(target)
        token = self.tokenizer.convert_tokens_to_ids(code)
        if token is None or token == self.tokenizer.unk_token_id:
            raise GenerationError(f"the NLLB tokenizer has no language token {code!r}")
        embeddings, mask = self.model(inputs["input_values"], attention_mask=inputs["attention_mask"])
        return self.decoder.generate(inputs_embeds=embeddings, attention_mask=mask, forced_bos_token_id=token, **self.overrides)


GENERATORS: dict[str, type[Generator]] = {cls.family: cls for cls in (WhisperGenerator, SeamlessGenerator, S2TGenerator, ZeroSwotGenerator)}


def load_generator(extractor: Extractor, num_beams: int | None = None, max_new_tokens: int | None = None,
                   decoder_checkpoint: str | None = None, translate_by_forcing: bool = False) -> Generator:
    """The generator for a loaded extractor, with the tokenizer (and for ZeroSwot the NLLB decoder)
    from the hub or a local folder."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
    from transformers.utils import logging as transformers_logging

    transformers_logging.set_verbosity_error()  # generate() warns about each model's own default processors
    options = {"num_beams": num_beams, "max_new_tokens": max_new_tokens}
    if extractor.family == "zeroswot":
        checkpoint = zeroswot_decoder(extractor, decoder_checkpoint)
        decoder = AutoModelForSeq2SeqLM.from_pretrained(checkpoint)
        return ZeroSwotGenerator(extractor, AutoTokenizer.from_pretrained(checkpoint), decoder, checkpoint, **options)
    tokenizer = AutoTokenizer.from_pretrained(extractor.checkpoint, revision=extractor.revision)
    if extractor.family == "whisper":
        return WhisperGenerator(extractor, tokenizer, translate_by_forcing=translate_by_forcing, **options)
    return GENERATORS[extractor.family](extractor, tokenizer, **options)


def zeroswot_decoder(extractor: Extractor, given: str | None) -> str:
    """The NLLB checkpoint to decode with: ``given``, else the one the ZeroSwot config names."""
    checkpoint = given or getattr(extractor, "nllb_checkpoint", None)
    if not checkpoint:
        raise GenerationError(f"the config of {extractor.checkpoint or 'this ZeroSwot model'} names no NLLB model "
                              "(nllb_model_name_or_path): pass --decoder")
    return checkpoint


def _jsonable(value):
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)
