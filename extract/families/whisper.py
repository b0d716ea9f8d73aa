"""Whisper (any checkpoint): the encoder, fed the 30 s padded log-mel input it was trained on."""

from __future__ import annotations

import math

import numpy as np
import torch

from extract.families.base import Extractor, Prepared
from extract.hooks import Site

SAMPLES_PER_FRAME = 320  # 10 ms mel hop x conv stride 2 at 16 kHz


class WhisperExtractor(Extractor):
    family = "whisper"
    transformers_classes = ("WhisperForConditionalGeneration", "WhisperConfig", "WhisperFeatureExtractor")
    default_checkpoint = "openai/whisper-large-v3"

    def __init__(self, *args, keep_padding: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.keep_padding = keep_padding
        self.encoder_path = "model.encoder" if hasattr(self.model, "model") else "encoder"

    @property
    def encoder(self):
        return self.model.get_submodule(self.encoder_path)

    def site_table(self) -> dict[str, Site]:
        prefix = self.encoder_path
        table = {"encoder.embed": Site(f"{prefix}.layers.0", take="input")}
        for index in range(len(self.encoder.layers)):
            table[f"encoder.layer.{index}"] = Site(f"{prefix}.layers.{index}")
        table["encoder.final"] = Site(f"{prefix}.layer_norm")
        return table

    def prepare(self, audios: list[np.ndarray]) -> Prepared:
        features = self.processor(audios, sampling_rate=16_000, return_tensors="pt").input_features
        return Prepared({"input_features": features}, np.array([len(a) for a in audios]))

    def encode(self, inputs):
        return self.encoder(inputs["input_features"])

    def valid_lengths(self, site: str, prepared: Prepared, captured: dict[str, torch.Tensor]) -> np.ndarray:
        frames = self.encoder.config.max_source_positions
        if self.keep_padding:
            return np.full(len(prepared.samples), frames)
        return np.array([self.speech_frames(site, n, frames) for n in prepared.samples])

    def speech_frames(self, site: str, samples: int, stored: int) -> int:
        return min(math.ceil(samples / SAMPLES_PER_FRAME), stored)

    def input_seconds(self, seconds: float) -> float:
        return self.encoder.config.max_source_positions * SAMPLES_PER_FRAME / 16_000  # always padded to 30 s

    def frame_rate(self, site: str) -> float:
        return 16_000 / SAMPLES_PER_FRAME
