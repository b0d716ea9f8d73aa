"""fairseq S2T through transformers' Speech2Text: log-mel filterbanks, a strided conv stem, a transformer
encoder. The generator forces the target-language token as BOS when the tokenizer has language codes
(the multilingual MuST-C model); bilingual models generate unforced."""

from __future__ import annotations

import numpy as np
import torch

from extract.families.base import Extractor, Family, Prepared, padded_batch, seeded
from extract.families.generation import GenerationError, Generator
from extract.families.tiny import tiny_encoder_decoder
from extract.hooks import Site


class S2TExtractor(Extractor):
    family = "s2t"
    transformers_classes = ("Speech2TextForConditionalGeneration", "Speech2TextConfig", "Speech2TextFeatureExtractor")
    default_checkpoint = "facebook/s2t-medium-mustc-multilingual-st"
    layer_components = {"attention": "self_attn", "mlp": "fc2"}  # as Whisper's layers

    @property
    def encoder(self):
        return self.model.model.encoder

    decoder_path = "model.decoder"

    def site_table(self) -> dict[str, Site]:
        table = {f"encoder.layer.{i}": Site(f"model.encoder.layers.{i}") for i in range(len(self.encoder.layers))}
        table["encoder.final"] = Site("model.encoder.layer_norm")
        return table

    def prepare(self, audios: list[np.ndarray]) -> Prepared:
        return padded_batch(self.processor, audios, "input_features")

    def encode(self, inputs):
        return self.encoder(inputs["input_features"], attention_mask=inputs["attention_mask"])

    def stored_lengths(self, site: str, prepared: Prepared, captured: dict[str, torch.Tensor]) -> np.ndarray:
        frames = prepared.inputs["attention_mask"].sum(dim=1)
        return self.encoder._get_feat_extract_output_lengths(frames).cpu().numpy()

    def frame_rate(self, site: str) -> float:
        return 100.0 / 2**self.model.config.num_conv_layers


class S2TGenerator(Generator):
    family = "s2t"

    def forced_bos(self, target: str) -> dict:
        codes = getattr(self.tokenizer, "lang_code_to_id", None)
        if not codes:
            return {}
        if target not in codes:
            raise GenerationError(f"this S2T tokenizer has no language token for {target!r}; it knows {sorted(codes)}")
        return {"forced_bos_token_id": codes[target]}

    def forced_tokens(self, target: str) -> int:
        return len(self.forced_bos(target))

    def _generate(self, inputs, language, task, target):
        return self.model.generate(inputs["input_features"], attention_mask=inputs["attention_mask"], **self.forced_bos(target), **self.overrides)


@seeded(0)
def tiny_model():
    """A tiny random Speech2Text (transformers test-suite sizes) and its feature extractor."""
    from transformers import Speech2TextConfig, Speech2TextFeatureExtractor, Speech2TextForConditionalGeneration

    config = Speech2TextConfig(
        **tiny_encoder_decoder(
            vocab_size=100, conv_channels=16, input_feat_per_channel=80, num_conv_layers=2, max_source_positions=600, max_target_positions=64
        )
    )
    return Speech2TextForConditionalGeneration(config), Speech2TextFeatureExtractor(feature_size=80, num_mel_bins=80)


FAMILY = Family(S2TExtractor, S2TGenerator, tiny_model, demo_sites=("encoder.final",), display_name="S2T")
