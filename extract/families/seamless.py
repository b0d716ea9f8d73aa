"""SeamlessM4T v2, speech encoder only: conformer layers, then (after the encoder's layer norm) the
intermediate FFN, the length adaptor and the inner layer norm."""

from __future__ import annotations

import numpy as np
import torch

from extract.families.base import Extractor, Prepared, lengths_from_mask, padded_batch
from extract.hooks import Site

FEATURE_FRAMES_PER_SECOND = 50.0  # 10 ms filterbanks stacked by 2


class SeamlessExtractor(Extractor):
    family = "seamless"
    transformers_classes = ("SeamlessM4Tv2ForSpeechToText", "SeamlessM4Tv2Config", "SeamlessM4TFeatureExtractor")
    default_checkpoint = "facebook/seamless-m4t-v2-large"

    @property
    def speech_encoder(self):
        return self.model.speech_encoder

    def site_table(self) -> dict[str, Site]:
        layers = len(self.speech_encoder.encoder.layers)
        table = {f"encoder.layer.{i}": Site(f"speech_encoder.encoder.layers.{i}") for i in range(layers)}
        table["pre_adapter"] = Site("speech_encoder.encoder")
        table["post_adapter"] = Site("speech_encoder.inner_layer_norm")
        return table

    def prepare(self, audios: list[np.ndarray]) -> Prepared:
        return padded_batch(self.processor, audios, "input_features")

    def encode(self, inputs):
        return self.speech_encoder(input_features=inputs["input_features"], attention_mask=inputs["attention_mask"])

    def valid_lengths(self, site: str, prepared: Prepared, captured: dict[str, torch.Tensor]) -> np.ndarray:
        mask = prepared.inputs["attention_mask"]
        if site != "post_adapter" or self.speech_encoder.adapter is None:
            return lengths_from_mask(mask)
        for layer in self.speech_encoder.adapter.layers:  # each adaptor layer's own length formula
            lengths = layer._compute_sub_sample_lengths_from_attention_mask(mask).long()
            width = int(lengths.max())
            mask = (torch.arange(width, device=lengths.device)[None, :] < lengths[:, None]).long()
        return lengths.cpu().numpy()

    def frame_rate(self, site: str) -> float:
        if site != "post_adapter" or self.speech_encoder.adapter is None:
            return FEATURE_FRAMES_PER_SECOND
        return FEATURE_FRAMES_PER_SECOND / self.model.config.adaptor_stride ** len(self.speech_encoder.adapter.layers)
