"""Utterances as Whisper training examples: audio (through an optional GRAFN front end), log-mel
features and label ids, the collator that pads them, and the order of the training batches."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset, Sampler

from experiments.normalisation.corpus import check_mode, normalise_samples
from experiments.normalisation.filters import load_filters
from extract.audio import SAMPLE_RATE, AudioError, asr_samples
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
        samples = asr_samples(utterance)
        if self.front_end is not None:
            samples = self.front_end(samples, utterance.gender)
        return utterance, samples

    def audio_problems(self) -> list[dict]:
        """``{"id", "problem"}`` of each utterance whose audio does not load. Checked before training:
        the DataLoader would otherwise stop the run mid-fit with a traceback."""
        problems = []
        for utterance in self.utterances:
            try:
                asr_samples(utterance)
            except AudioError as error:
                problems.append({"id": utterance.id, "problem": str(error)})
        return problems


class SeededBatches(Sampler[list[int]]):
    """The training batches as a function of the seed and the optimiser step alone.

    Pass ``p`` over the subset is a permutation drawn from ``(seed, p)``, cut into batches of
    ``batch_size`` (the last one short). Each iteration starts at the batch of step ``position()``
    (the trainer's global step: one batch per step), so a run resumed from a checkpoint at step k,
    mid-pass or not, trains on exactly the batches an uninterrupted run trains on after step k.
    No global random state is read, so dropout's random stream is the only one a resume restores.
    """

    def __init__(self, size: int, batch_size: int, seed: int, position: Callable[[], int]):
        self.size, self.batch_size, self.seed, self.position = size, batch_size, seed, position

    def __len__(self) -> int:
        return -(-self.size // self.batch_size)

    def __iter__(self) -> Iterator[list[int]]:
        passes, done = divmod(self.position(), len(self))
        order = np.random.default_rng([self.seed, passes]).permutation(self.size).tolist()
        batches = [order[start : start + self.batch_size] for start in range(0, self.size, self.batch_size)]
        return iter(batches[done:])


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
