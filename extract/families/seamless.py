"""SeamlessM4T v2, speech encoder only: conformer layers, then (after the encoder's layer norm) the
intermediate FFN, the length adaptor and the inner layer norm. The generator passes ``tgt_lang`` in
SeamlessM4T's 3-letter codes (for ASR the source language)."""

from __future__ import annotations

import numpy as np
import torch

from extract.families.base import FINAL, PRE_ADAPTER, Extractor, Family, Prepared, lengths_from_mask, padded_batch, redraw_weights, seeded
from extract.families.generation import FLORES_200, Generator, language_code
from extract.families.tiny import tiny_stacks
from extract.hooks import Site

FEATURE_FRAMES_PER_SECOND = 50.0  # 10 ms filterbanks stacked by 2

# SeamlessM4T v2's codes: the ISO 639-3 part of FLORES-200's, but Mandarin (cmn) for Chinese where
# FLORES-200 names the macrolanguage (zho_Hans); a 3-letter code passes through unchanged.
LANGUAGE_CODES: dict[str, str] = {language: code.split("_")[0] for language, code in FLORES_200.items()} | {"zh": "cmn"}


def seamless_code(language: str) -> str:
    return language_code(language, LANGUAGE_CODES, r"[a-z]{3}", "SeamlessM4T", "3-letter code (e.g. 'spa')")


class SeamlessExtractor(Extractor):
    family = "seamless"
    transformers_classes = ("SeamlessM4Tv2ForSpeechToText", "SeamlessM4Tv2Config", "SeamlessM4TFeatureExtractor")
    default_checkpoint = "facebook/seamless-m4t-v2-large"
    # a conformer layer has two half-step feed-forward blocks and a convolution beside its attention: no one "mlp"
    layer_components = {"attention": "self_attn"}

    @property
    def speech_encoder(self):
        return self.model.speech_encoder

    decoder_path = "text_decoder"

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

    def stored_lengths(self, site: str, prepared: Prepared, captured: dict[str, torch.Tensor]) -> np.ndarray:
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


class SeamlessGenerator(Generator):
    family = "seamless"

    def _generate(self, inputs, language, task, target):
        return self.model.generate(
            input_features=inputs["input_features"], attention_mask=inputs["attention_mask"], tgt_lang=seamless_code(target), **self.overrides
        )


@seeded(0)
def tiny_model():
    """A tiny random SeamlessM4T v2 speech-to-text model (transformers test-suite sizes) and its feature extractor."""
    from transformers import SeamlessM4TFeatureExtractor, SeamlessM4Tv2Config, SeamlessM4Tv2ForSpeechToText

    config = SeamlessM4Tv2Config(
        vocab_size=100,
        t2u_vocab_size=20,
        char_vocab_size=20,
        hidden_size=16,
        speech_encoder_layers=2,
        encoder_layers=1,
        decoder_layers=1,
        t2u_encoder_layers=1,
        t2u_decoder_layers=1,
        speech_encoder_attention_heads=2,
        **tiny_stacks("encoder", "decoder", "t2u_encoder", "t2u_decoder"),
        speech_encoder_intermediate_size=32,
        feature_projection_input_dim=160,
        conv_depthwise_kernel_size=3,
        adaptor_kernel_size=8,
        adaptor_stride=8,
        num_adapter_layers=1,
        speech_encoder_chunk_size=20000,
        speech_encoder_left_chunk_num=128,
        max_position_embeddings=64,
        unit_hidden_size=16,
        unit_embed_dim=16,
        upsample_initial_channel=16,
        resblock_kernel_sizes=[3],
        resblock_dilation_sizes=[[1, 3]],
        upsample_rates=[5],
        upsample_kernel_sizes=[10],
        spkr_embed_dim=8,
        lang_embed_dim=8,
        vocoder_num_langs=2,
        vocoder_num_spkrs=2,
    )
    return redraw_weights(SeamlessM4Tv2ForSpeechToText(config), seed=0), SeamlessM4TFeatureExtractor(feature_size=80, num_mel_bins=80)


FAMILY = Family(
    SeamlessExtractor,
    SeamlessGenerator,
    tiny_model,
    demo_sites=("pre_adapter", "post_adapter"),
    display_name="SeamlessM4T v2",
    site_roles={"pre_adapter": PRE_ADAPTER, "post_adapter": FINAL},
)
