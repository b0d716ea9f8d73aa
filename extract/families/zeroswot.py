"""ZeroSwot: a CTC-finetuned wav2vec 2.0, a CTC-based compression adapter and a speech embedder that
maps compressed (subword-level) states into NLLB's embedding space.

The model is custom code on the Hugging Face hub. The site table below assumes the module names
of that code (``wav2vec2`` holding a ``Wav2Vec2ForCTC``, ``compression_adapter``,
``speech_embedder``) and its output ``(compressed_embeddings, attention_mask)``; the extractor
checks both when it loads and fails with the module list if they differ. Remote code runs only
with ``trust_remote_code=True`` and a pinned 40-hex revision, which pins the code as well as the
weights (transformers' ``code_revision``; without it the code comes from the hub's ``main``).

The speech embedder frames every utterance with two vectors that do not depend on the speech: a
BOS built from NLLB's English language embedding (``eng_Latn``) before the first compressed state,
and NLLB's ``</s>`` embedding after the last one (mt-upc/fairseq ``SpeechEmbedder``,
``use_special_embedding``). ``post_adapter`` keeps them, as Fucci et al. stored it;
``post_adapter_no_special`` is the same output without them (two frames fewer per utterance).

The config names the pretrained wav2vec 2.0 it was built from, and hub code may load it in its
constructor. For ``random_init`` every ``from_pretrained`` made while the model is built gets the
same architecture with random weights instead, so the random baseline holds no pretrained weights.

Generation: the compressed embeddings go to the NLLB decoder as ``inputs_embeds``, with the
FLORES-200 target code as forced BOS. The decoder is the NLLB model the checkpoint's config names
(``nllb_model_name_or_path``), and beam search uses 5 beams, as in the model card's example, the
authors' fairseq evaluation (``--beam 5``) and Fucci et al.'s code.

The hub model cannot be reached offline: the tiny random model (:func:`tiny_model`) is a stand-in,
``ZeroSwotStandIn``, with the module names and the output above and, like the real speech embedder,
a BOS and an EOS frame around every utterance.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch
from torch import nn

from extract.audio import SAMPLE_RATE
from extract.families.base import (
    FINAL,
    FINAL_VARIANT,
    PRE_ADAPTER,
    Extractor,
    Family,
    Prepared,
    RemoteCodeError,
    lengths_from_mask,
    padded_batch,
    redraw_weights,
    seeded,
    tiny_checkpoint,
)
from extract.families.generation import FLORES_200, GenerationError, GenerationOptions, Generator, language_code, tiny_refusal
from extract.families.ssl import TINY_CONVOLUTIONS, TINY_SIZES
from extract.hooks import Site


def nllb_code(language: str) -> str:
    """NLLB's target code: FLORES-200's (a code already in that form passes through unchanged)."""
    return language_code(language, FLORES_200, r"[a-z]{3}_[A-Z][a-z]{3}", "NLLB", "FLORES-200 code (e.g. 'spa_Latn')")


PROCESSOR_CHECKPOINT = "facebook/wav2vec2-large-960h-lv60-self"
REQUIRED_MODULES = ("wav2vec2", "wav2vec2.wav2vec2", "compression_adapter", "speech_embedder")


SPECIAL_FRAMES = 2  # the speech embedder's BOS (first frame) and EOS (last valid frame)


def _checked_output(output) -> tuple[torch.Tensor, torch.Tensor]:
    if not (isinstance(output, (tuple, list)) and len(output) >= 2 and all(isinstance(t, torch.Tensor) for t in output[:2])):
        raise TypeError("ZeroSwot's forward must return (compressed_embeddings, attention_mask)")
    return output[0], output[1]


def _second_tensor(output) -> torch.Tensor:
    return _checked_output(output)[1]


def _without_bos(output) -> torch.Tensor:
    """Embeddings from the second frame on; the stored length (two fewer) then also cuts the EOS."""
    return _checked_output(output)[0][:, 1:]


@contextmanager
def pretrained_loads_made_random() -> Iterator[list[str]]:
    """While active, ``PreTrainedModel.from_pretrained`` builds the architecture from its config
    with fresh random weights instead of loading them; yields the list of what it replaced."""
    from transformers import PretrainedConfig, PreTrainedModel

    replaced: list[str] = []
    original = PreTrainedModel.__dict__["from_pretrained"]
    config_options = ("revision", "cache_dir", "token", "local_files_only", "trust_remote_code")

    def random_instead(cls, name_or_path, *args, **kwargs):
        config = kwargs.get("config")
        if not isinstance(config, PretrainedConfig):
            options = {key: kwargs[key] for key in config_options if key in kwargs}
            config = cls.config_class.from_pretrained(config or name_or_path, **options)
        replaced.append(f"{cls.__name__} {name_or_path}")
        return cls(config)

    PreTrainedModel.from_pretrained = classmethod(random_instead)
    try:
        yield replaced
    finally:
        PreTrainedModel.from_pretrained = original


class ZeroSwotExtractor(Extractor):
    family = "zeroswot"
    default_checkpoint = "johntsi/ZeroSwot-Large_asr-mustc_mt-mustc_en-to-8"
    layer_components = {"attention": "attention", "mlp": "feed_forward"}  # wav2vec 2.0's layers
    load_options = frozenset({"trust_remote_code"})
    no_decoder = "ZeroSwot's decoder is a separate NLLB model its generator loads"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        names = {name for name, _ in self.model.named_modules()}
        missing = [name for name in REQUIRED_MODULES if name not in names]
        if missing:
            top = sorted(name for name in names if name and "." not in name)
            raise RemoteCodeError(f"ZeroSwot model lacks module(s) {missing}; its top-level modules are {top}")

    @classmethod
    def load(cls, checkpoint: str, revision: str | None = None, random_init: bool = False, trust_remote_code: bool = False, **kwargs) -> ZeroSwotExtractor:
        from transformers import AutoConfig, AutoModel, Wav2Vec2Processor
        from transformers.dynamic_module_utils import get_class_from_dynamic_module

        if not trust_remote_code:
            raise RemoteCodeError("ZeroSwot runs custom code from the hub: pass --trust-remote-code (and --revision COMMIT)")
        if not revision or not re.fullmatch(r"[0-9a-f]{40}", revision):
            raise RemoteCodeError("remote code runs only at a pinned revision: pass --revision with a 40-hex commit hash")
        pinned = {"revision": revision, "code_revision": revision, "trust_remote_code": True}
        if random_init:
            config = AutoConfig.from_pretrained(checkpoint, **pinned)
            # the model class from the hub code at the pinned revision, built here: AutoModel.from_config
            # passes code_revision on to the model's __init__ in transformers 5 once the class is registered
            class_reference = (getattr(config, "auto_map", None) or {}).get("AutoModel")
            if class_reference is None:
                raise RemoteCodeError(f"the config of {checkpoint} names no AutoModel class in its auto_map: not ZeroSwot's hub code")
            model_class = get_class_from_dynamic_module(class_reference, checkpoint, revision=revision, code_revision=revision)
            with pretrained_loads_made_random() as replaced:
                model = model_class(config)
            if replaced:
                print(
                    f"note: random init: the hub code loads {'; '.join(replaced)} while building the model; built with random weights instead", file=sys.stderr
                )
        else:
            model = AutoModel.from_pretrained(checkpoint, **pinned)
        processor = Wav2Vec2Processor.from_pretrained(PROCESSOR_CHECKPOINT)
        return cls(model, processor, checkpoint, revision, **kwargs)

    @property
    def wav2vec2(self):
        return self.model.wav2vec2.wav2vec2

    @property
    def nllb_checkpoint(self) -> str | None:
        """The NLLB model the checkpoint's config names (``nllb_model_name_or_path``): its decoder."""
        return getattr(getattr(self.model, "config", None), "nllb_model_name_or_path", None) or None

    def site_table(self) -> dict[str, Site]:
        table = {f"encoder.layer.{i}": Site(f"wav2vec2.wav2vec2.encoder.layers.{i}") for i in range(len(self.wav2vec2.encoder.layers))}
        table["pre_adapter"] = Site("wav2vec2.wav2vec2")
        table["post_adapter"] = Site("")
        table["post_adapter_no_special"] = Site("", select=_without_bos)
        return table

    def auxiliary_sites(self, sites: list[str]) -> dict[str, Site]:
        wanted = {"post_adapter", "post_adapter_no_special"} & set(sites)
        return {"_post_adapter_mask": Site("", select=_second_tensor)} if wanted else {}

    def prepare(self, audios: list[np.ndarray]) -> Prepared:
        return padded_batch(self.processor, audios, "input_values")

    def encode(self, inputs):
        return self.model(inputs["input_values"], attention_mask=inputs["attention_mask"])

    def stored_lengths(self, site: str, prepared: Prepared, captured: dict[str, torch.Tensor]) -> np.ndarray:
        if site == "post_adapter":
            return lengths_from_mask(captured["_post_adapter_mask"])
        if site == "post_adapter_no_special":
            return lengths_from_mask(captured["_post_adapter_mask"]) - SPECIAL_FRAMES
        samples = torch.as_tensor(prepared.samples)
        return self.wav2vec2._get_feat_extract_output_lengths(samples).cpu().numpy()

    def frame_rate(self, site: str) -> float:
        return float("nan") if site.startswith("post_adapter") else 50.0  # compressed states are subword-level, not timed


class ZeroSwotGenerator(Generator):
    """The ZeroSwot encoder (the extractor's model) feeding an NLLB decoder model."""

    family = "zeroswot"
    family_defaults = {"num_beams": 5}

    def __init__(self, extractor: Extractor, tokenizer, decoder, decoder_checkpoint: str | None = None, **kwargs):
        super().__init__(extractor, tokenizer, **kwargs)
        self.decoder = decoder.to(extractor.device, dtype=extractor.dtype).eval()
        self.decoder_checkpoint = decoder_checkpoint

    @classmethod
    def tiny_can_transcribe(cls, options: GenerationOptions) -> bool:
        """The stand-in has no config naming an NLLB decoder: it transcribes with a given ``--decoder`` only."""
        return options.decoder is not None

    @classmethod
    def load(cls, extractor: Extractor, options: GenerationOptions) -> ZeroSwotGenerator:
        """With the NLLB decoder and its tokenizer (``options.decoder``, else the one the config names)."""
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        if extractor.checkpoint == tiny_checkpoint(cls.family) and not cls.tiny_can_transcribe(options):
            raise GenerationError(tiny_refusal(cls.family))
        checkpoint = zeroswot_decoder(extractor, options.decoder)
        decoder = AutoModelForSeq2SeqLM.from_pretrained(checkpoint)
        return cls(
            extractor, AutoTokenizer.from_pretrained(checkpoint), decoder, checkpoint, num_beams=options.num_beams, max_new_tokens=options.max_new_tokens
        )

    @property
    def generation_config(self):
        return self.decoder.generation_config

    def settings(self) -> dict:
        return super().settings() | {"decoder": self.decoder_checkpoint}

    def _generate(self, inputs, language, task, target):
        code = nllb_code(target)
        token = self.tokenizer.convert_tokens_to_ids(code)
        if token is None or token == self.tokenizer.unk_token_id:
            raise GenerationError(f"the NLLB tokenizer has no language token {code!r}")
        embeddings, mask = self.model(inputs["input_values"], attention_mask=inputs["attention_mask"])
        return self.decoder.generate(inputs_embeds=embeddings, attention_mask=mask, forced_bos_token_id=token, **self.overrides)


def zeroswot_decoder(extractor: Extractor, given: str | None) -> str:
    """The NLLB checkpoint to decode with: ``given``, else the one the ZeroSwot config names."""
    checkpoint = given or getattr(extractor, "nllb_checkpoint", None)
    if not checkpoint:
        raise GenerationError(f"the config of {extractor.checkpoint or 'this ZeroSwot model'} names no NLLB model (nllb_model_name_or_path): pass --decoder")
    return checkpoint


class CompressionAdapter(nn.Module):
    """CTC compression: average consecutive frames with the same non-blank argmax prediction."""

    blank = 0  # the CTC blank token

    def forward(self, states: torch.Tensor, logits: torch.Tensor, lengths: torch.Tensor):
        predictions = logits.argmax(-1)
        pooled = []
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
        width = max(len(rows) for rows in pooled)
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


# wav2vec 2.0's own feature encoder (7 convolutions, 320 samples a frame: 50 frames a second) at 16 channels: the
# stand-in reads as many frames a second as the real model does, where the ssl family's 2 test convolutions (20 samples
# a frame) would give 800, and attention over them would make the stand-in the demo's slowest tiny model
STAND_IN_CONVOLUTIONS = TINY_CONVOLUTIONS | {"conv_dim": (16,) * 7, "conv_stride": (5, 2, 2, 2, 2, 2, 2), "conv_kernel": (10, 3, 3, 3, 3, 2, 2)}


def tiny_wav2vec2_ctc():
    """A tiny pre-LN Wav2Vec2ForCTC of the ssl family's sizes, with 8 tokens (its weights depend on the torch seed in force)."""
    from transformers import Wav2Vec2Config, Wav2Vec2ForCTC

    return Wav2Vec2ForCTC(Wav2Vec2Config(**TINY_SIZES | STAND_IN_CONVOLUTIONS | {"vocab_size": 8, "do_stable_layer_norm": True, "feat_extract_norm": "layer"}))


class ZeroSwotStandIn(nn.Module):
    @seeded(0)
    def __init__(self, embed_dim: int = 24):
        super().__init__()
        self.wav2vec2 = tiny_wav2vec2_ctc()
        self.compression_adapter = CompressionAdapter()
        self.speech_embedder = SpeechEmbedder(self.wav2vec2.config.hidden_size, embed_dim)
        redraw_weights(self, seed=0)  # the same stand-in under transformers 4.57 and 5.x

    def forward(self, input_values, attention_mask=None):
        encoded = self.wav2vec2.wav2vec2(input_values, attention_mask=attention_mask).last_hidden_state
        logits = self.wav2vec2.lm_head(encoded)
        lengths = self.wav2vec2.wav2vec2._get_feat_extract_output_lengths(attention_mask.sum(-1))
        compressed, mask = self.compression_adapter(encoded, logits, lengths)
        return self.speech_embedder(compressed, mask)


def tiny_model():
    """The tiny random stand-in (see the module docstring) and a wav2vec 2.0 feature extractor."""
    from transformers import Wav2Vec2FeatureExtractor

    return ZeroSwotStandIn(), Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=SAMPLE_RATE, do_normalize=True, return_attention_mask=True)


FAMILY = Family(
    ZeroSwotExtractor,
    ZeroSwotGenerator,
    tiny_model,
    demo_sites=("pre_adapter", "post_adapter"),
    display_name="ZeroSwot",
    tiny_stand_in=True,
    site_roles={"pre_adapter": PRE_ADAPTER, "post_adapter": FINAL, "post_adapter_no_special": FINAL_VARIANT},
)
