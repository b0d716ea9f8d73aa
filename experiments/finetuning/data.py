"""Utterances as Whisper training examples: audio (through an optional GRAFN front end), log-mel
features and label ids, and the collator that pads them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from experiments.normalisation.corpus import check_mode, normalise_samples
from experiments.normalisation.filters import load_filters
from extract.audio import MAX_SECONDS, SAMPLE_RATE, load_audio
from extract.manifest import Utterance

IGNORED_LABEL = -100  # positions the loss skips


class GrafnFrontEnd:
    """GRAFN before feature extraction, for training and validation audio alike (the paper's pipeline)."""

    def __init__(self, filters_path: str | Path, mode: str = "gender"):
        self.filters_path, self.mode = Path(filters_path), mode
        self.filters = load_filters(filters_path)
        check_mode(self.filters, mode)

    def __call__(self, samples: np.ndarray, gender: str) -> np.ndarray:
        return normalise_samples(self.filters, self.mode, gender, samples)[0]


class UtteranceDataset(Dataset):
    """Each item: the utterance and its 16 kHz audio (trimmed to 30 s, after the front end)."""

    def __init__(self, utterances: list[Utterance], front_end: GrafnFrontEnd | None = None):
        self.utterances, self.front_end = utterances, front_end

    def __len__(self) -> int:
        return len(self.utterances)

    def __getitem__(self, index: int) -> tuple[Utterance, np.ndarray]:
        utterance = self.utterances[index]
        samples = load_audio(utterance.audio, utterance.offset, utterance.duration, max_seconds=MAX_SECONDS["asr"]).samples
        if self.front_end is not None:
            samples = self.front_end(samples, utterance.gender)
        return utterance, samples


def prefix_ids(tokenizer, language: str, multilingual: bool) -> list[int]:
    """Whisper's task prefix: start of transcript, language and ``transcribe`` (multilingual models),
    no timestamps."""
    tokens = ["<|startoftranscript|>"] + ([f"<|{language}|>", "<|transcribe|>"] if multilingual else []) + ["<|notimestamps|>"]
    ids = tokenizer.convert_tokens_to_ids(tokens)
    unknown = [token for token, identifier in zip(tokens, ids) if identifier is None or identifier == tokenizer.unk_token_id]
    if unknown:
        raise ValueError(f"the tokenizer has no token {unknown[0]} (language {language!r} unknown to this Whisper?)")
    return ids


def label_ids(tokenizer, text: str, language: str, multilingual: bool) -> list[int]:
    """The target sequence: prefix, the text with Whisper's leading space, end of text."""
    return (
        prefix_ids(tokenizer, language, multilingual)
        + tokenizer.encode(" " + text.strip(), add_special_tokens=False)
        + [tokenizer.convert_tokens_to_ids("<|endoftext|>")]
    )


class WhisperCollator:
    """A batch: ``input_features`` (log-mel, 30 s), ``labels`` (padded with -100, without the start
    token the model prepends itself), and the utterances and audio for validation decoding."""

    def __init__(self, feature_extractor, tokenizer, multilingual: bool):
        self.feature_extractor, self.tokenizer, self.multilingual = feature_extractor, tokenizer, multilingual

    def __call__(self, items: list[tuple[Utterance, np.ndarray]]) -> dict:
        utterances, audios = [item[0] for item in items], [item[1] for item in items]
        features = self.feature_extractor(audios, sampling_rate=SAMPLE_RATE, return_tensors="pt").input_features
        sequences = [label_ids(self.tokenizer, u.text, u.language, self.multilingual)[1:] for u in utterances]
        labels = torch.full((len(sequences), max(len(s) for s in sequences)), IGNORED_LABEL, dtype=torch.long)
        for row, sequence in enumerate(sequences):
            labels[row, : len(sequence)] = torch.tensor(sequence)
        return {"input_features": features, "labels": labels, "utterances": utterances, "audios": audios}
