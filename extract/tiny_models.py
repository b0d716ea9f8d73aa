"""Tiny random models of the four families, built from configs (transformers test-suite sizes).

The tests use them, and the demo runs the pre/post-adapter path on them (labelled as random
weights). The ZeroSwot model lives on the hub as custom code, which cannot be reached offline: ``ZeroSwotStandIn``
has the same module structure (``wav2vec2`` = Wav2Vec2ForCTC, ``compression_adapter``,
``speech_embedder``), the same output ``(embeddings, attention_mask)`` and, like the real speech
embedder, a BOS frame prepended and an EOS frame appended to every utterance, built from tiny configs.
"""

from __future__ import annotations

import torch
from torch import nn


def tiny_whisper():
    from transformers import WhisperConfig, WhisperFeatureExtractor, WhisperForConditionalGeneration

    torch.manual_seed(0)
    config = WhisperConfig(
        vocab_size=100, d_model=16, encoder_layers=2, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
        encoder_ffn_dim=32, decoder_ffn_dim=32, num_mel_bins=80, max_source_positions=1500, max_target_positions=64,
        pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1,
    )
    return WhisperForConditionalGeneration(config), WhisperFeatureExtractor(feature_size=80)


def tiny_s2t():
    from transformers import Speech2TextConfig, Speech2TextFeatureExtractor, Speech2TextForConditionalGeneration

    torch.manual_seed(0)
    config = Speech2TextConfig(
        vocab_size=100, d_model=16, encoder_layers=2, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
        encoder_ffn_dim=32, decoder_ffn_dim=32, conv_channels=16, input_feat_per_channel=80, num_conv_layers=2,
        max_source_positions=600, max_target_positions=64,
    )
    return Speech2TextForConditionalGeneration(config), Speech2TextFeatureExtractor(feature_size=80, num_mel_bins=80)


def tiny_seamless():
    from transformers import SeamlessM4TFeatureExtractor, SeamlessM4Tv2Config, SeamlessM4Tv2ForSpeechToText

    torch.manual_seed(0)
    config = SeamlessM4Tv2Config(
        vocab_size=100, t2u_vocab_size=20, char_vocab_size=20, hidden_size=16, speech_encoder_layers=2, encoder_layers=1,
        decoder_layers=1, t2u_encoder_layers=1, t2u_decoder_layers=1, speech_encoder_attention_heads=2,
        encoder_attention_heads=2, decoder_attention_heads=2, t2u_encoder_attention_heads=2, t2u_decoder_attention_heads=2,
        speech_encoder_intermediate_size=32, encoder_ffn_dim=32, decoder_ffn_dim=32, t2u_encoder_ffn_dim=32,
        t2u_decoder_ffn_dim=32, feature_projection_input_dim=160, conv_depthwise_kernel_size=3, adaptor_kernel_size=8,
        adaptor_stride=8, num_adapter_layers=1, speech_encoder_chunk_size=20000, speech_encoder_left_chunk_num=128,
        max_position_embeddings=64, unit_hidden_size=16, unit_embed_dim=16, upsample_initial_channel=16,
        resblock_kernel_sizes=[3], resblock_dilation_sizes=[[1, 3]], upsample_rates=[5], upsample_kernel_sizes=[10],
        spkr_embed_dim=8, lang_embed_dim=8, vocoder_num_langs=2, vocoder_num_spkrs=2,
    )
    return SeamlessM4Tv2ForSpeechToText(config), SeamlessM4TFeatureExtractor(feature_size=80, num_mel_bins=80)


class CompressionAdapter(nn.Module):
    """CTC compression: average consecutive frames with the same non-blank argmax prediction."""

    def __init__(self, blank: int = 0):
        super().__init__()
        self.blank = blank

    def forward(self, states: torch.Tensor, logits: torch.Tensor, lengths: torch.Tensor):
        predictions = logits.argmax(-1)
        pooled, counts = [], []
        for b in range(states.shape[0]):
            groups, previous = [], None
            for t in range(int(lengths[b])):
                label = int(predictions[b, t])
                if label != self.blank and label != previous:
                    groups.append([t])
                elif label != self.blank and groups:
                    groups[-1].append(t)
                previous = label
            if not groups:
                groups = [list(range(int(lengths[b])))]
            pooled.append(torch.stack([states[b, g].mean(0) for g in groups]))
            counts.append(len(groups))
        width = max(counts)
        out = states.new_zeros(states.shape[0], width, states.shape[-1])
        mask = torch.zeros(states.shape[0], width, dtype=torch.long)
        for b, rows in enumerate(pooled):
            out[b, : len(rows)] = rows
            mask[b, : len(rows)] = 1
        return out, mask


class SpeechEmbedder(nn.Module):
    """Projects compressed states into the decoder's embedding space, then frames each utterance
    with two speech-independent vectors: BOS before its first state and EOS after its last one
    (ZeroSwot takes them from NLLB's English language token and ``</s>``); the mask grows by two."""

    def __init__(self, in_dim: int, embed_dim: int):
        super().__init__()
        self.project = nn.Sequential(nn.Linear(in_dim, embed_dim), nn.LayerNorm(embed_dim))
        self.bos = nn.Parameter(torch.randn(embed_dim))
        self.eos = nn.Parameter(torch.randn(embed_dim))

    def forward(self, compressed: torch.Tensor, mask: torch.Tensor):
        states = self.project(compressed)
        lengths = mask.long().sum(dim=1)
        framed = states.new_zeros(states.shape[0], states.shape[1] + 2, states.shape[2])
        framed[:, 0] = self.bos
        for b, length in enumerate(lengths.tolist()):
            framed[b, 1 : length + 1] = states[b, :length]
            framed[b, length + 1] = self.eos
        grown = (torch.arange(framed.shape[1])[None, :] < (lengths + 2)[:, None]).long()
        return framed, grown


def tiny_wav2vec2_ctc():
    """A tiny Wav2Vec2ForCTC (its weights depend on the torch seed in force)."""
    from transformers import Wav2Vec2Config, Wav2Vec2ForCTC

    return Wav2Vec2ForCTC(Wav2Vec2Config(
        vocab_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
        conv_dim=(16, 16), conv_stride=(5, 4), conv_kernel=(10, 8), num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2, do_stable_layer_norm=True, feat_extract_norm="layer",
    ))


class ZeroSwotStandIn(nn.Module):
    def __init__(self, embed_dim: int = 24):
        super().__init__()
        torch.manual_seed(0)
        self.wav2vec2 = tiny_wav2vec2_ctc()
        self.compression_adapter = CompressionAdapter()
        self.speech_embedder = SpeechEmbedder(self.wav2vec2.config.hidden_size, embed_dim)

    def forward(self, input_values, attention_mask=None):
        encoded = self.wav2vec2.wav2vec2(input_values, attention_mask=attention_mask).last_hidden_state
        logits = self.wav2vec2.lm_head(encoded)
        lengths = self.wav2vec2.wav2vec2._get_feat_extract_output_lengths(attention_mask.sum(-1))
        compressed, mask = self.compression_adapter(encoded, logits, lengths)
        return self.speech_embedder(compressed, mask)


def tiny_zeroswot():
    from transformers import Wav2Vec2FeatureExtractor

    return ZeroSwotStandIn(), Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16_000, do_normalize=True, return_attention_mask=True)


def tiny_extractor(family: str, **kwargs):
    from extract.families import FAMILIES

    model, processor = {"whisper": tiny_whisper, "s2t": tiny_s2t, "seamless": tiny_seamless, "zeroswot": tiny_zeroswot}[family]()
    return FAMILIES[family](model, processor, checkpoint=f"tiny-random-{family}", **kwargs)
