"""Self-supervised speech encoders and their CTC fine-tunings: wav2vec 2.0 (and its conformer
variant), HuBERT, WavLM, data2vec-audio and w2v-BERT 2.0, bare (``*Model``) or with a CTC head
(``*ForCTC``: wav2vec2-960h, MMS, the LeBenchmark fine-tunings); the architecture comes from the
checkpoint's ``config.json`` (``model_type``, and ``architectures`` naming a ``*ForCTC``).

**Sites** (from the config: :meth:`SSLExtractor.site_names`), each a tensor ``[T, D]`` per utterance:

- ``encoder.cnn``: the convolutional feature encoder's output (the input of the feature projection,
  ``conv_dim[-1]`` wide); w2v-BERT has no convolutional encoder (it reads 80-bin filterbanks
  stacked in pairs) and no such site.
- ``encoder.embed``: the input of the first transformer layer: the projected features plus the
  convolutional position embedding, after the encoder's layer norm in post-LN models
  (``do_stable_layer_norm`` false: wav2vec2-base, HuBERT base, data2vec-audio), before any norm
  in pre-LN ones. It is the model's ``hidden_states[0]``.
- ``encoder.layer.{i}``: the output of transformer layer i, from 0. It is ``hidden_states[i + 1]``
  for every layer on transformers 5; on 4.x a pre-LN model's last ``hidden_states`` entry is taken
  after the final layer norm (it is ``encoder.final`` there), so its last layer is no entry of it.
- ``encoder.final``: the output of the encoder's final layer norm, where the architecture has one:
  pre-LN ("stable layer norm") wav2vec 2.0, HuBERT and WavLM, and every wav2vec 2.0 conformer. It is
  ``last_hidden_state`` (what a CTC head reads, unless the model adds an adapter). Post-LN models and
  w2v-BERT (whose conformer layers end in their own layer norm) have none: their last layer is their output.

**Lengths** come from the model's own formula, never from padding: ``_get_feat_extract_output_lengths``
of each utterance's samples (the convolutional strides: 320 samples a frame, 50 frames a second),
without the optional adapter (``add_adapter``), which runs after the encoder's sites. w2v-BERT's
input is filterbank frames (the feature extractor's mask counts them) and its formula only covers
its adapter, so its sites have one frame per stacked filterbank frame (50 a second).

**Padding.** Models whose convolutional encoder uses group norm (``feat_extract_norm="group"``:
wav2vec2-base, HuBERT base) normalise each channel over the whole input, padding included, so a
zero-padded batch changes their states, and they were trained without an attention mask. Here the
convolutional encoder runs on each utterance alone, unpadded (:meth:`SSLExtractor.run`), and the
transformer on the padded batch with a mask: the states equal one-by-one extraction
(``tests/extract/test_ssl.py``) and the transformer still runs batched. Layer-norm encoders
(``feat_extract_norm="layer"``) are per-frame, and the wav2vec 2.0, HuBERT and WavLM encoders
zero the padded frames before their position convolution, so a padded batch with its mask is
exact; so is w2v-BERT, whose convolution modules take the mask. Two architectures would not be: the
wav2vec 2.0 conformer's depthwise convolutions and data2vec-audio's stack of position convolutions
read the padded frames at the end of a shorter utterance (unmasked, a tiny model's last frames
moved by up to 2.5, and attention spreads it), so while they run, their input (conformer) or each
layer's output (data2vec-audio) is zeroed past each utterance's frames, which is what a lone
utterance's zero-padded edge gives them (:meth:`SSLExtractor._padding_zeroed`).

**CTC transcription** (:class:`SSLGenerator`): greedy (:meth:`SSLGenerator.decode`). MMS checkpoints
(``adapter_attn_dim`` in the config) load the language adapter of the manifest's language (its ISO
639-3 code) or ``--adapter``. There is no text decoder: no ``--task st``, no decoder states.

No weights of these models are reachable offline: :meth:`SSLExtractor.load` is the loading code for
users (hub ids or local folders), and the tests build tiny random configs of each architecture
(:func:`tiny_ssl_model`).
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from extract.audio import SAMPLE_RATE
from extract.families.base import Extractor, Family, Prepared, load_weights, padded_batch, redraw_weights, seeded
from extract.families.errors import CheckpointError
from extract.families.generation import FLORES_200, GenerationError, GenerationOptions, Generator, language_code
from extract.hooks import Site


@dataclass(frozen=True)
class Architecture:
    """The transformers classes of one ``model_type`` and what its config says about its sites."""

    model: str
    ctc: str
    config: str
    convolutional: bool = True  # a convolutional feature encoder over the waveform (all but w2v-BERT)
    always_final_norm: bool = False  # a final layer norm whatever do_stable_layer_norm says (conformer)
    stable_variant: bool = True  # do_stable_layer_norm chooses a pre-LN encoder with a final layer norm
    # convolutions over time that would read a shorter utterance's padding (the module docstring):
    # a regex over the encoder model's module names, and whether their input or output is re-zeroed
    time_convolutions: tuple[str, str] | None = None

    def final_norm(self, config: dict) -> bool:
        return self.always_final_norm or (self.stable_variant and bool(config.get("do_stable_layer_norm", False)))


ARCHITECTURES: dict[str, Architecture] = {  # config.json's model_type -> architecture
    "wav2vec2": Architecture("Wav2Vec2Model", "Wav2Vec2ForCTC", "Wav2Vec2Config"),
    "wav2vec2-conformer": Architecture(
        "Wav2Vec2ConformerModel",
        "Wav2Vec2ConformerForCTC",
        "Wav2Vec2ConformerConfig",
        always_final_norm=True,
        time_convolutions=(r"encoder\.layers\.\d+\.conv_module\.depthwise_conv", "input"),
    ),
    "hubert": Architecture("HubertModel", "HubertForCTC", "HubertConfig"),
    "wavlm": Architecture("WavLMModel", "WavLMForCTC", "WavLMConfig"),
    "data2vec-audio": Architecture(
        "Data2VecAudioModel",
        "Data2VecAudioForCTC",
        "Data2VecAudioConfig",
        stable_variant=False,
        time_convolutions=(r"encoder\.pos_conv_embed\.layers\.\d+", "output"),
    ),
    "wav2vec2-bert": Architecture("Wav2Vec2BertModel", "Wav2Vec2BertForCTC", "Wav2Vec2BertConfig", convolutional=False, stable_variant=False),
}
FILTERBANK_FRAMES_PER_SECOND = 100.0  # w2v-BERT's input: 10 ms filterbank frames, stacked by its feature extractor's stride


def architecture(config: dict) -> Architecture:
    model_type = config.get("model_type")
    if model_type not in ARCHITECTURES:
        raise CheckpointError(f"model_type {model_type!r} is not a self-supervised speech encoder the ssl family runs; it runs {', '.join(ARCHITECTURES)}")
    return ARCHITECTURES[model_type]


class SSLExtractor(Extractor):
    family = "ssl"
    default_checkpoint = "facebook/wav2vec2-large-960h-lv60-self"
    no_decoder = "a CTC head reads the encoder's frames one by one: transcribe decodes it, no decoder states exist"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.config_dict = self.model.config.to_dict()
        self.architecture = architecture(self.config_dict)
        prefix = self.model.base_model_prefix
        self.base_path = prefix if isinstance(getattr(self.model, prefix, None), nn.Module) else ""  # "" for a bare *Model

    @classmethod
    def load(cls, checkpoint: str, revision: str | None = None, random_init: bool = False, **kwargs) -> SSLExtractor:
        """The bare encoder or the ``*ForCTC`` model the checkpoint's config names, and its feature extractor."""
        import transformers

        config = transformers.AutoConfig.from_pretrained(checkpoint, revision=revision)
        chosen = architecture(config.to_dict())
        ctc = any(name.endswith("ForCTC") for name in (getattr(config, "architectures", None) or ()))
        model_class, config_class = getattr(transformers, chosen.ctc if ctc else chosen.model), getattr(transformers, chosen.config)
        model = load_weights(model_class, config_class, checkpoint, revision, random_init)
        processor = transformers.AutoFeatureExtractor.from_pretrained(checkpoint, revision=revision)
        return cls(model, processor, checkpoint, revision, **kwargs)

    @classmethod
    def site_names(cls, config: dict) -> list[str] | None:
        layers = config.get("num_hidden_layers")
        if config.get("model_type") not in ARCHITECTURES or not isinstance(layers, int) or isinstance(layers, bool) or layers < 1:
            return None
        chosen = architecture(config)
        names = ["encoder.cnn"] if chosen.convolutional else []
        names += ["encoder.embed", *(f"encoder.layer.{index}" for index in range(layers))]
        return names + (["encoder.final"] if chosen.final_norm(config) else [])

    @property
    def base(self) -> nn.Module:
        """The encoder model (``Wav2Vec2Model`` and kin), inside a ``*ForCTC`` or alone."""
        return self.model.get_submodule(self.base_path)

    @property
    def is_ctc(self) -> bool:
        return self.base_path != "" and isinstance(getattr(self.model, "lm_head", None), nn.Module)

    @property
    def group_norm(self) -> bool:
        """Whether the convolutional encoder normalises over time (each utterance must run it alone)."""
        return self.architecture.convolutional and self.config_dict.get("feat_extract_norm") == "group"

    @property
    def input_key(self) -> str:
        return "input_values" if self.architecture.convolutional else "input_features"

    def site_table(self) -> dict[str, Site]:
        prefix = f"{self.base_path}." if self.base_path else ""
        names = self.site_names(self.config_dict | {"num_hidden_layers": len(self.base.encoder.layers)})
        modules = {"encoder.cnn": Site(f"{prefix}feature_projection", take="input"), "encoder.embed": Site(f"{prefix}encoder.layers.0", take="input")}
        modules["encoder.final"] = Site(f"{prefix}encoder.layer_norm")
        return {name: modules.get(name) or Site(f"{prefix}encoder.layers.{name.removeprefix('encoder.layer.')}") for name in names}

    def prepare(self, audios: list[np.ndarray]) -> Prepared:
        return padded_batch(self.processor, audios, self.input_key)

    def encode(self, inputs):
        return self.run(self.base, inputs)

    def run(self, module: nn.Module, inputs: dict[str, torch.Tensor]):
        """``module`` (the encoder, or the whole CTC model) on a padded batch with its mask; for a
        group-norm convolutional encoder, that encoder runs on each utterance alone (module docstring)."""
        with self._convolutions_per_utterance(inputs) if self.group_norm else nullcontext(), self._padding_zeroed(inputs):
            return module(inputs[self.input_key], attention_mask=inputs["attention_mask"])

    @contextmanager
    def _padding_zeroed(self, inputs: dict[str, torch.Tensor]) -> Iterator[None]:
        """While inside, the architecture's convolutions over time (:attr:`Architecture.time_convolutions`)
        see zeros past each utterance's frames, as a lone utterance's zero-padded edge: their input is
        zeroed there, or their output (what the next one reads). Channels-first tensors ``[B, C, T]``."""
        if self.architecture.time_convolutions is None:
            yield
            return
        pattern, side = self.architecture.time_convolutions
        frames = self.output_lengths(inputs)

        def zeroed(states: torch.Tensor) -> torch.Tensor:
            inside = torch.arange(states.shape[-1], device=states.device)[None, :] < frames.to(states.device)[:, None]
            return states * inside[:, None, :].to(states.dtype)

        handles = []
        for name, module in self.base.named_modules():
            if re.fullmatch(pattern, name):
                if side == "input":
                    handles.append(module.register_forward_pre_hook(lambda module, args: (zeroed(args[0]), *args[1:])))
                else:
                    handles.append(module.register_forward_hook(lambda module, args, output: zeroed(output)))
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()

    @contextmanager
    def _convolutions_per_utterance(self, inputs: dict[str, torch.Tensor]) -> Iterator[None]:
        """While inside, the convolutional feature encoder computes each row of the batch from that
        utterance's own samples (no padding inside its group norm), padding its output with zeros;
        the model masks those frames as it masks any padded frame."""
        encoder = self.base.feature_extractor
        own = encoder.forward
        samples = [int(n) for n in inputs["attention_mask"].sum(dim=1).tolist()]

        def per_utterance(input_values):
            rows = [own(input_values[index : index + 1, :length]) for index, length in enumerate(samples)]
            width = max(row.shape[-1] for row in rows)
            return torch.cat([nn.functional.pad(row, (0, width - row.shape[-1])) for row in rows])

        encoder.forward = per_utterance
        try:
            yield
        finally:
            del encoder.forward

    def output_lengths(self, inputs: dict[str, torch.Tensor], adapter: bool = False) -> torch.Tensor:
        """Frames per utterance from the model's formula: at the encoder's sites, or (``adapter``)
        after the adapter a model may add behind the encoder (what a CTC head reads)."""
        counts = inputs["attention_mask"].sum(dim=1)  # samples, or w2v-BERT's stacked filterbank frames
        if "add_adapter" in self.config_dict:
            return self.base._get_feat_extract_output_lengths(counts, add_adapter=adapter and bool(self.config_dict["add_adapter"]))
        return self.base._get_feat_extract_output_lengths(counts)

    def stored_lengths(self, site: str, prepared: Prepared, captured: dict[str, torch.Tensor]) -> np.ndarray:
        return self.output_lengths(prepared.inputs).cpu().numpy()

    def frame_rate(self, site: str) -> float:
        if not self.architecture.convolutional:
            return FILTERBANK_FRAMES_PER_SECOND / self.processor.stride
        return SAMPLE_RATE / float(np.prod(self.config_dict["conv_stride"]))


# MMS's language adapters are named by ISO 639-3 codes (``fra``, ``eng``), some with a script suffix
# (``cmn-script_simplified``); a manifest's ISO 639-1 code maps to FLORES-200's ISO 639-3 part.
MMS_CODES: dict[str, str] = {language: code.split("_")[0] for language, code in FLORES_200.items()} | {"zh": "cmn-script_simplified"}


def mms_code(language: str) -> str:
    return language_code(language, MMS_CODES, r"[a-z]{3}(-[\w]+)?", "MMS adapter", "ISO 639-3 adapter code (e.g. --adapter fra)")


class SSLGenerator(Generator):
    """Greedy CTC decoding of a ``*ForCTC`` checkpoint (see the module docstring)."""

    family = "ssl"
    tiny_transcribes = True

    def __init__(self, extractor: SSLExtractor, tokenizer, num_beams: int | None = None, max_new_tokens: int | None = None, adapter: str | None = None):
        super().__init__(extractor, tokenizer, num_beams=num_beams, max_new_tokens=max_new_tokens)
        self.adapter, self.loaded_adapter = adapter, None

    @classmethod
    def load(cls, extractor: Extractor, options: GenerationOptions) -> SSLGenerator:
        if not extractor.is_ctc:
            raise GenerationError(
                f"{extractor.checkpoint or 'this model'} is a bare {type(extractor.model).__name__} without a CTC head: transcribe with a *ForCTC checkpoint"
            )
        return super().load(extractor, options)

    @classmethod
    def family_options(cls, options: GenerationOptions) -> dict:
        return {"adapter": options.adapter}

    @classmethod
    def tiny_tokenizer(cls, extractor: Extractor):
        """A character CTC tokenizer of :data:`TINY_VOCABULARY` (the tiny model's output size), offline."""
        from transformers import Wav2Vec2CTCTokenizer

        with tempfile.TemporaryDirectory() as folder:
            vocabulary = Path(folder) / "vocab.json"
            vocabulary.write_text(json.dumps({token: index for index, token in enumerate(TINY_VOCABULARY)}))
            return Wav2Vec2CTCTokenizer(str(vocabulary), pad_token="<pad>", unk_token="<unk>", word_delimiter_token="|")

    @property
    def uses_adapters(self) -> bool:
        return bool(self.model.config.to_dict().get("adapter_attn_dim"))

    def settings(self) -> dict:
        """No generation config: the decoding is fixed (greedy CTC); the adapter is recorded where there is one."""
        decoding = {"decoding": "greedy CTC: best token per frame, frames past each utterance's length blanked, repeats merged, blanks removed"}
        return decoding | {"overrides": dict(self.overrides), "adapter": self.adapter if self.uses_adapters else None}

    def check(self, task: str, tgt_lang: str | None) -> None:
        if task == "st":
            raise GenerationError("a CTC model has no text decoder and cannot translate: --task asr only (it transcribes the language it was fine-tuned on)")
        if self.overrides:
            raise GenerationError(f"CTC decoding is greedy and frame-synchronous: {', '.join(sorted(self.overrides))} do not apply; leave them out")
        if self.adapter and not self.uses_adapters:
            raise GenerationError(f"--adapter {self.adapter}: {self.extractor.checkpoint} has no language adapters (no adapter_attn_dim in its config)")

    def generate(self, audios: list[np.ndarray], language: str, task: str, tgt_lang: str | None = None) -> list[str]:
        if self.uses_adapters and task == "asr":
            self.use_adapter(self.adapter or mms_code(language), language)
        return super().generate(audios, language, task, tgt_lang)

    def use_adapter(self, code: str, language: str) -> None:
        """MMS: the tokenizer's vocabulary and the model's adapter weights of ``code``; refused in one
        line when the checkpoint has no adapter of that name."""
        if code == self.loaded_adapter:
            return
        nested = self.tokenizer.vocab if self.tokenizer.vocab is not self.tokenizer.encoder else {}
        known = sorted(key for key, value in nested.items() if isinstance(value, dict))
        origin = "--adapter" if self.adapter else f"the manifest's language {language!r}"
        if code not in known:
            raise GenerationError(
                f"{self.extractor.checkpoint} has no adapter {code!r} (from {origin}); it has {len(known)}, e.g. {', '.join(known[:8])}: pass --adapter CODE"
            )
        try:
            self.model.load_adapter(code)
        except (OSError, ValueError) as error:
            raise GenerationError(
                f"{self.extractor.checkpoint}: the weights of adapter {code!r} (from {origin}) cannot be loaded: {str(error).splitlines()[0]}"
            ) from None
        self.tokenizer.set_target_lang(code)
        self.loaded_adapter = code

    def decode(self, tokens: torch.Tensor) -> list[str]:
        """CTC's rule, then the tokenizer: repeats merged and blanks (the pad token) removed per row;
        the other special tokens (``<s>``, ``</s>``, ``<unk>``) are left out after merging, so a
        letter either side of one stays twice (the tokenizer's own grouping would drop them first)."""
        blank, rows = self.tokenizer.pad_token_id, []
        for row in tokens.tolist():
            rows.append([token for index, token in enumerate(row) if token != blank and (index == 0 or token != row[index - 1])])
        texts = self.tokenizer.batch_decode(rows, skip_special_tokens=True, group_tokens=False)
        return [" ".join(text.split()) for text in texts]

    def _generate(self, inputs, language, task, target):
        logits = self.extractor.run(self.model, inputs).logits
        lengths = self.extractor.output_lengths(inputs, adapter=True).to(logits.device)
        tokens = logits.argmax(dim=-1)
        past = torch.arange(tokens.shape[1], device=tokens.device)[None, :] >= lengths[:, None]
        return tokens.masked_fill(past, self.tokenizer.pad_token_id)


TINY_VOCABULARY = ("<pad>", "<s>", "</s>", "<unk>", "|", *"abcdefghijklmnopqrstuvwxyz'")
TINY_SIZES = {"hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 32, "vocab_size": len(TINY_VOCABULARY)}
TINY_CONVOLUTIONS = {"conv_dim": (16, 16), "conv_stride": (5, 4), "conv_kernel": (10, 8), "num_conv_pos_embeddings": 16, "num_conv_pos_embedding_groups": 2}
TINY_CONFIGS: dict[str, dict] = {  # model_type -> its own fields at test sizes (plus TINY_SIZES)
    "wav2vec2": TINY_CONVOLUTIONS,
    "wav2vec2-conformer": TINY_CONVOLUTIONS | {"conv_depthwise_kernel_size": 3, "position_embeddings_type": "relative"},
    "hubert": TINY_CONVOLUTIONS,
    "wavlm": TINY_CONVOLUTIONS | {"num_buckets": 8, "max_bucket_distance": 20},
    "data2vec-audio": TINY_CONVOLUTIONS | {"num_conv_pos_embeddings": 5},
    "wav2vec2-bert": {
        "feature_projection_input_dim": 160,
        "conv_depthwise_kernel_size": 3,
        "position_embeddings_type": "relative_key",
        "left_max_position_embeddings": 8,
        "right_max_position_embeddings": 8,
    },
}
# the family's tiny model: a wav2vec 2.0 large in shape (LeBenchmark's large models, XLS-R, MMS): pre-LN, layer-norm convolutions
TINY_CONFIG = {"model_type": "wav2vec2", **TINY_SIZES, **TINY_CONVOLUTIONS, "feat_extract_norm": "layer", "do_stable_layer_norm": True}


def tiny_ssl_model(model_type: str, ctc: bool = True, **fields) -> tuple[nn.Module, object]:
    """A tiny random model of ``model_type`` (``*ForCTC``, or the bare encoder) and its feature
    extractor, built offline; ``fields`` change the config (``feat_extract_norm``, ``do_stable_layer_norm``)."""
    import transformers

    chosen = ARCHITECTURES[model_type]
    config = getattr(transformers, chosen.config)(**TINY_SIZES, **TINY_CONFIGS[model_type], **fields)
    with seeded(0):  # the build's own draws; every weight is then redrawn, the same on both transformers majors
        model = redraw_weights(getattr(transformers, chosen.ctc if ctc else chosen.model)(config), seed=0)
    if not chosen.convolutional:
        return model, transformers.SeamlessM4TFeatureExtractor(feature_size=80, num_mel_bins=80)
    return model, transformers.Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=SAMPLE_RATE, do_normalize=True, return_attention_mask=True)


def tiny_model():
    """The family's tiny random model (:data:`TINY_CONFIG`: a Wav2Vec2ForCTC) and its feature extractor."""
    fields = {key: value for key, value in TINY_CONFIG.items() if key not in TINY_SIZES and key not in TINY_CONVOLUTIONS and key != "model_type"}
    return tiny_ssl_model("wav2vec2", **fields)


FAMILY = Family(SSLExtractor, SSLGenerator, tiny_model, tiny_config=TINY_CONFIG, display_name="SSL encoder")
