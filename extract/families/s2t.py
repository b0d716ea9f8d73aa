"""fairseq S2T through transformers' Speech2Text: log-mel filterbanks, a strided conv stem, a transformer encoder."""

from __future__ import annotations

import numpy as np
import torch

from extract.families.base import Extractor, Prepared, padded_batch
from extract.hooks import Site


class S2TExtractor(Extractor):
    family = "s2t"
    transformers_classes = ("Speech2TextForConditionalGeneration", "Speech2TextConfig", "Speech2TextFeatureExtractor")
    default_checkpoint = "facebook/s2t-medium-mustc-multilingual-st"

    @property
    def encoder(self):
        return self.model.model.encoder

    def site_table(self) -> dict[str, Site]:
        table = {f"encoder.layer.{i}": Site(f"model.encoder.layers.{i}") for i in range(len(self.encoder.layers))}
        table["encoder.final"] = Site("model.encoder.layer_norm")
        return table

    def prepare(self, audios: list[np.ndarray]) -> Prepared:
        return padded_batch(self.processor, audios, "input_features")

    def encode(self, inputs):
        return self.encoder(inputs["input_features"], attention_mask=inputs["attention_mask"])

    def valid_lengths(self, site: str, prepared: Prepared, captured: dict[str, torch.Tensor]) -> np.ndarray:
        frames = prepared.inputs["attention_mask"].sum(dim=1)
        return self.encoder._get_feat_extract_output_lengths(frames).cpu().numpy()

    def frame_rate(self, site: str) -> float:
        return 100.0 / 2 ** self.model.config.num_conv_layers
