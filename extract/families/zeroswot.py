"""ZeroSwot: a CTC-finetuned wav2vec 2.0, a CTC-based compression adapter and a speech embedder that
maps compressed (subword-level) states into NLLB's embedding space.

The model is custom code on the Hugging Face hub. The site table below assumes the module names
of that code (``wav2vec2`` holding a ``Wav2Vec2ForCTC``, ``compression_adapter``,
``speech_embedder``) and its output ``(compressed_embeddings, attention_mask)``; the extractor
checks both when it loads and fails with the module list if they differ. Remote code runs only
with ``trust_remote_code=True`` and a pinned 40-hex revision, which pins the code as well as the
weights (transformers' ``code_revision``; without it ``from_config`` fetches the code from ``main``).

The speech embedder frames every utterance with two vectors that do not depend on the speech: a
BOS built from NLLB's English language embedding (``eng_Latn``) before the first compressed state,
and NLLB's ``</s>`` embedding after the last one (mt-upc/fairseq ``SpeechEmbedder``,
``use_special_embedding``). ``post_adapter`` keeps them, as Fucci et al. stored it;
``post_adapter_no_special`` is the same output without them (two frames fewer per utterance).

The config names the pretrained wav2vec 2.0 it was built from, and hub code may load it in its
constructor. For ``random_init`` every ``from_pretrained`` made while the model is built gets the
same architecture with random weights instead, so the random baseline holds no pretrained weights.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch

from extract.families.base import Extractor, Prepared, lengths_from_mask, padded_batch
from extract.hooks import Site

PROCESSOR_CHECKPOINT = "facebook/wav2vec2-large-960h-lv60-self"
REQUIRED_MODULES = ("wav2vec2", "wav2vec2.wav2vec2", "compression_adapter", "speech_embedder")


class RemoteCodeError(RuntimeError):
    pass


SPECIAL_FRAMES = 2  # the speech embedder's BOS (first frame) and EOS (last valid frame)


def _checked_output(output) -> tuple[torch.Tensor, torch.Tensor]:
    if not (isinstance(output, (tuple, list)) and len(output) >= 2 and all(isinstance(t, torch.Tensor) for t in output[:2])):
        raise TypeError("ZeroSwot's forward must return (compressed_embeddings, attention_mask)")
    return output[0], output[1]


def _second_tensor(output) -> torch.Tensor:
    return _checked_output(output)[1]


def _without_bos(output) -> torch.Tensor:
    """Embeddings from the second frame on; the valid length (two fewer) then also cuts the EOS."""
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
        pinned = {"revision": revision, "code_revision": revision, "trust_remote_code": True}
        if random_init:
            config = AutoConfig.from_pretrained(checkpoint, **pinned)
            with pretrained_loads_made_random() as replaced:
                model = AutoModel.from_config(config, trust_remote_code=True, code_revision=revision)
            if replaced:
                print(f"note: random init: the hub code loads {'; '.join(replaced)} while building the model; "
                      "built with random weights instead", file=sys.stderr)
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

    def valid_lengths(self, site: str, prepared: Prepared, captured: dict[str, torch.Tensor]) -> np.ndarray:
        if site == "post_adapter":
            return lengths_from_mask(captured["_post_adapter_mask"])
        if site == "post_adapter_no_special":
            return lengths_from_mask(captured["_post_adapter_mask"]) - SPECIAL_FRAMES
        samples = torch.as_tensor(prepared.samples)
        return self.wav2vec2._get_feat_extract_output_lengths(samples).cpu().numpy()

    def frame_rate(self, site: str) -> float:
        return float("nan") if site.startswith("post_adapter") else 50.0  # compressed states are subword-level, not timed
