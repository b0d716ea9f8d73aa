"""What every family's generator shares: decoding overrides, the settings record, the language-code lookup.

A generator wraps the family's extractor (same loading, same input preparation, layerdrop off,
eval mode) and adds the tokenizer and the language forcing the family needs; each family module
holds its own subclass and language codes (NLLB's and SeamlessM4T's from :data:`FLORES_200`). Decoding uses each model's own generation config (plus
the family's published defaults); ``num_beams`` and ``max_new_tokens`` override it when given.
``settings()`` returns what was used, for the output's settings file.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from extract.errors import UserError
from extract.families.base import Extractor, tiny_checkpoint

# ISO 639-1 -> FLORES-200 (ISO 639-3 and script), the languages of Common Voice, Fleurs and VoxPopuli
# in Attanasio et al. 2024 and the MuST-C / MuST-SHE targets: NLLB's codes as they are, and the
# source of the families' own codes (SeamlessM4T's are the ISO 639-3 part).
FLORES_200: dict[str, str] = {
    "ar": "arb_Arab",
    "ca": "cat_Latn",
    "cs": "ces_Latn",
    "de": "deu_Latn",
    "en": "eng_Latn",
    "es": "spa_Latn",
    "et": "est_Latn",
    "fi": "fin_Latn",
    "fr": "fra_Latn",
    "hr": "hrv_Latn",
    "hu": "hun_Latn",
    "it": "ita_Latn",
    "ja": "jpn_Jpan",
    "lt": "lit_Latn",
    "nl": "nld_Latn",
    "pl": "pol_Latn",
    "pt": "por_Latn",
    "ro": "ron_Latn",
    "ru": "rus_Cyrl",
    "sk": "slk_Latn",
    "sl": "slv_Latn",
    "sr": "srp_Cyrl",
    "sv": "swe_Latn",
    "sw": "swh_Latn",
    "tr": "tur_Latn",
    "uk": "ukr_Cyrl",
    "yo": "yor_Latn",
    "zh": "zho_Hans",
}


class GenerationError(UserError, ValueError):
    pass


class LanguageCodeError(UserError, ValueError):
    pass


@dataclass(frozen=True)
class GenerationOptions:
    """Decoding choices; ``None`` keeps the model's own generation config. ``decoder`` (ZeroSwot's NLLB
    checkpoint), ``translate_by_forcing`` (Whisper) and ``adapter`` (MMS: the language adapter, else the
    manifest's language's) matter only to the family that has them."""

    num_beams: int | None = None
    max_new_tokens: int | None = None
    decoder: str | None = None
    translate_by_forcing: bool = False
    adapter: str | None = None
    engine: str = "transformers"
    compute_type: str | None = None


class Generator(ABC):
    family: ClassVar[str]
    engine: ClassVar[str] = "transformers"  # what runs the model; hooks (interventions, decoder states) exist only in transformers
    family_defaults: ClassVar[dict] = {}  # the authors' decoding settings where the hub config lacks them
    tiny_transcribes: ClassVar[bool] = False  # whether the family's tiny random model has a tokenizer offline (:meth:`tiny_tokenizer`)

    def __init__(self, extractor: Extractor, tokenizer, num_beams: int | None = None, max_new_tokens: int | None = None):
        self.extractor, self.tokenizer = extractor, tokenizer
        self.overrides = self.decoding_overrides(GenerationOptions(num_beams, max_new_tokens))

    @classmethod
    def decoding_overrides(cls, options: GenerationOptions) -> dict:
        """What decoding overrides the model's generation config with for ``options`` (the family's
        defaults, then the options given): what a settings file records as ``decoding.overrides``,
        known before the model loads."""
        given = {key: value for key, value in {"num_beams": options.num_beams, "max_new_tokens": options.max_new_tokens}.items() if value is not None}
        return cls.family_defaults | given

    @classmethod
    def load(cls, extractor: Extractor, options: GenerationOptions) -> Generator:
        """The generator for a loaded extractor, with the tokenizer of its checkpoint (hub or local
        folder; for the tiny random model, :meth:`tiny_tokenizer`, offline)."""
        from transformers import AutoTokenizer

        if extractor.checkpoint == tiny_checkpoint(cls.family):
            tokenizer = cls.tiny_tokenizer(extractor)
        else:
            tokenizer = AutoTokenizer.from_pretrained(extractor.checkpoint, revision=extractor.revision)
            check_tokenizer_fits(tokenizer, extractor.model)
        return cls(extractor, tokenizer, num_beams=options.num_beams, max_new_tokens=options.max_new_tokens, **cls.family_options(options))

    @classmethod
    def tiny_can_transcribe(cls, options: GenerationOptions) -> bool:
        """Whether the family's tiny random model transcribes with ``options`` (checked before
        anything loads: ``study run --dry-run``)."""
        return cls.tiny_transcribes

    @classmethod
    def tiny_tokenizer(cls, extractor: Extractor):
        """The tokenizer of the family's tiny random model, offline, fitting ``extractor``'s model to it;
        a family whose tiny model has none (:attr:`tiny_transcribes` false) refuses in one line."""
        raise GenerationError(tiny_refusal(cls.family))

    @classmethod
    def family_options(cls, options: GenerationOptions) -> dict:
        """The constructor's family-only keyword arguments taken from ``options``."""
        return {}

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

    def check(self, task: str, tgt_lang: str | None) -> None:  # noqa: B027 (an optional hook: most families take every task)
        """Raise ``GenerationError`` for a task or target this family cannot do."""

    def model_inputs(self, audios: Sequence[np.ndarray], task: str, tgt_lang: str | None) -> dict[str, torch.Tensor]:
        """The batch's model inputs on the model's device, once this family accepts ``task`` and ``tgt_lang`` (:meth:`check`)."""
        self.check(task, tgt_lang)
        return self.extractor.on_device(self.extractor.prepare(list(audios)).inputs)

    def generate(self, audios: list[np.ndarray], language: str, task: str, tgt_lang: str | None = None) -> list[str]:
        """Hypotheses for a batch of 16 kHz waveforms that share a source language and task."""
        check_task(task, tgt_lang)
        inputs = self.model_inputs(audios, task, tgt_lang)
        with torch.inference_mode(), quiet_transformers():
            tokens = self._generate(inputs, language, task, tgt_lang if task == "st" else language)
        return self.decode(tokens)

    def decode(self, tokens: torch.Tensor) -> list[str]:
        """The texts of :meth:`_generate`'s token ids, special tokens left out."""
        return [text.strip() for text in self.tokenizer.batch_decode(tokens, skip_special_tokens=True)]

    def text_ids(self, text: str) -> list[int]:
        """The token ids the decoder would emit for ``text`` (no special tokens): what
        :func:`extract.forced.generate_scored` teacher-forces and scores."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def forced_tokens(self, target: str) -> int:
        """How many tokens :meth:`_generate` forces at the start of its output for ``target`` through
        its logits (S2T's target-language BOS), after the prompt the decoder is given: not generated
        words (``extract.decoder`` leaves them out, as it leaves out the prompt)."""
        return 0

    @abstractmethod
    def _generate(self, inputs: dict[str, torch.Tensor], language: str, task: str, target: str) -> torch.Tensor:
        """Token ids [batch, length]; ``target`` is the output language (the source language for ASR)."""


def check_task(task: str, tgt_lang: str | None) -> None:
    """Refuse a task other than ASR and ST, and ST without a target language (any family)."""
    if task not in ("asr", "st"):
        raise GenerationError(f"task must be 'asr' or 'st', got {task!r}")
    if task == "st" and not tgt_lang:
        raise GenerationError("speech translation needs a target language (--tgt-lang)")


def tiny_refusal(family: str) -> str:
    """Why the tiny random model of ``family`` cannot transcribe, and what to do."""
    return (
        f"the tiny random {family} model (checkpoint tiny-random) has no tokenizer offline, so it extracts states but cannot transcribe: "
        "give it transcribe: false in a study, or transcribe with another checkpoint (whisper's tiny-random transcribes offline)"
    )


class IncompleteCheckpointError(UserError, ValueError):
    """A checkpoint whose tokenizer cannot be the model's (its files are missing)."""


def check_tokenizer_fits(tokenizer, model) -> None:
    """Refuse a tokenizer far smaller than the model's vocabulary: transformers 5 builds a tokenizer of
    one token from a folder without tokenizer files (4.57 raised), which would decode every output
    to nothing. Half the vocabulary allows for the unused rows some checkpoints pad it with."""
    vocabulary = getattr(getattr(model, "config", None), "vocab_size", None)
    if isinstance(vocabulary, int) and len(tokenizer) < vocabulary // 2:
        raise IncompleteCheckpointError(f"its tokenizer holds {len(tokenizer)} token(s) where the model's vocabulary has {vocabulary}: tokenizer files missing")


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' warnings off inside (``generate()`` warns about each model's own default
    processors, on every batch); the caller's verbosity is restored afterwards."""
    from transformers.utils import logging as transformers_logging

    previous = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()
    try:
        yield
    finally:
        transformers_logging.set_verbosity(previous)


def language_code(language: str, codes: dict[str, str], own_format: str, model: str, example: str) -> str:
    """``language`` if already in the model's format (the regex ``own_format``), else its entry in
    ``codes`` (keyed by ISO 639-1, the manifests' codes)."""
    if re.fullmatch(own_format, language):
        return language
    if language not in codes:
        raise LanguageCodeError(f"no {model} code known for {language!r}: pass the {example} instead")
    return codes[language]


def _jsonable(value):
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)
