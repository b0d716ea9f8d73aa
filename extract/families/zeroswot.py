"""ZeroSwot: a CTC-finetuned wav2vec 2.0, a CTC-based compression adapter and a speech embedder that
maps compressed (subword-level) states into NLLB's embedding space.

The model is custom code on the Hugging Face hub. The site table below assumes the module names
of that code (``wav2vec2`` holding a ``Wav2Vec2ForCTC``, ``compression_adapter``,
``speech_embedder``) and its output ``(compressed_embeddings, attention_mask)``; the extractor
checks both when it loads and fails with the module list if they differ. Remote code runs only
with ``trust_remote_code=True`` and a pinned 40-hex revision.
"""

from __future__ import annotations

import re

import numpy as np
import torch

from extract.families.base import Extractor, Prepared, lengths_from_mask, padded_batch
from extract.hooks import Site

PROCESSOR_CHECKPOINT = "facebook/wav2vec2-large-960h-lv60-self"
REQUIRED_MODULES = ("wav2vec2", "wav2vec2.wav2vec2", "compression_adapter", "speech_embedder")


class RemoteCodeError(RuntimeError):
    pass


def _second_tensor(output) -> torch.Tensor:
    if not (isinstance(output, (tuple, list)) and len(output) >= 2 and isinstance(output[1], torch.Tensor)):
        raise TypeError("ZeroSwot's forward must return (compressed_embeddings, attention_mask)")
    return output[1]


class ZeroSwotExtractor(Extractor):
    family = "zeroswot"
    default_checkpoint = "johntsi/ZeroSwot-Large_asr-mustc_mt-mustc_en-to-8"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        names = {name for name, _ in self.model.named_modules()}
        missing = [name for name in REQUIRED_MODULES if name not in names]
        if missing:
            top = sorted(name for name in names if name and "." not in name)
            raise RemoteCodeError(f"ZeroSwot model lacks module(s) {missing}; its top-level modules are {top}")

    @classmethod
    def load(cls, checkpoint: str, revision: str | None = None, random_init: bool = False, trust_remote_code: bool = False, **kwargs) -> "ZeroSwotExtractor":
        from transformers import AutoConfig, AutoModel, Wav2Vec2Processor

        if not trust_remote_code:
            raise RemoteCodeError("ZeroSwot runs custom code from the hub: pass --trust-remote-code (and --revision COMMIT)")
        if not revision or not re.fullmatch(r"[0-9a-f]{40}", revision):
            raise RemoteCodeError("remote code runs only at a pinned revision: pass --revision with a 40-hex commit hash")
        if random_init:
            config = AutoConfig.from_pretrained(checkpoint, revision=revision, trust_remote_code=True)
            model = AutoModel.from_config(config, trust_remote_code=True)
        else:
            model = AutoModel.from_pretrained(checkpoint, revision=revision, trust_remote_code=True)
        processor = Wav2Vec2Processor.from_pretrained(PROCESSOR_CHECKPOINT)
        return cls(model, processor, checkpoint, revision, **kwargs)

    @property
    def wav2vec2(self):
        return self.model.wav2vec2.wav2vec2

    def site_table(self) -> dict[str, Site]:
        table = {f"encoder.layer.{i}": Site(f"wav2vec2.wav2vec2.encoder.layers.{i}") for i in range(len(self.wav2vec2.encoder.layers))}
        table["pre_adapter"] = Site("wav2vec2.wav2vec2")
        table["post_adapter"] = Site("")
        return table

    def auxiliary_sites(self, sites: list[str]) -> dict[str, Site]:
        return {"_post_adapter_mask": Site("", select=_second_tensor)} if "post_adapter" in sites else {}

    def prepare(self, audios: list[np.ndarray]) -> Prepared:
        return padded_batch(self.processor, audios, "input_values")

    def encode(self, inputs):
        return self.model(inputs["input_values"], attention_mask=inputs["attention_mask"])

    def valid_lengths(self, site: str, prepared: Prepared, captured: dict[str, torch.Tensor]) -> np.ndarray:
        if site == "post_adapter":
            return lengths_from_mask(captured["_post_adapter_mask"])
        samples = torch.as_tensor(prepared.samples)
        return self.wav2vec2._get_feat_extract_output_lengths(samples).cpu().numpy()

    def frame_rate(self, site: str) -> float:
        return float("nan") if site == "post_adapter" else 50.0  # compressed states are subword-level, not timed
