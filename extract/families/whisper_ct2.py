"""Whisper through CTranslate2 (``transcribe --engine ctranslate2``): the same rows from another engine.

A thin loop over ``ctranslate2.models.Whisper``: it is fed the log-mel features the transformers
engine computes (the checkpoint's own feature extractor, 30 s windows), the prompt the transformers
engine forces (start of transcript, language, task, no timestamps; an English-only model takes no
language or task), the model's own generation config (beams, suppressed tokens, the length bound;
``--num-beams`` / ``--max-new-tokens`` override it) and its ids are decoded with the checkpoint's
tokenizer. Only the engine and its quantisation (``compute_type``) differ, and both are recorded.

The CTranslate2 model is made once into the cache and keyed by the checkpoint's fingerprint: a hub
id or local transformers folder by CTranslate2's own converter; the bundled Whisper weights already
are CTranslate2 models, so their parts are joined (or linked) and used as they are. Hooks do not
exist here: interventions and decoder states need the transformers engine.

(:mod:`extract.ct2` is another thing: the reader that turns a ``model.bin`` into transformers weights.)
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

import numpy as np

from extract.audio import SAMPLE_RATE
from extract.families.base import TINY_RANDOM, Prepared
from extract.families.generation import GenerationError, GenerationOptions, check_tokenizer_fits
from extract.families.whisper import WhisperGenerator
from extract.paths import cache_dir, id_file_name
from extract.weights import BUNDLED, BUNDLED_PREFIX, _package_file

if TYPE_CHECKING:  # the type only: extract.spec loads this module for --engine ctranslate2
    from extract.spec import ModelSpec

EXTRA = "pip install 'speech-gender-probing[ctranslate2]'"


def default_compute_type(device: str) -> str:
    """int8 on a CPU (CTranslate2's fast path there), float16 on a GPU."""
    return "float16" if device.startswith("cuda") else "int8"


def engine_refusal(spec: ModelSpec, options: GenerationOptions, interventions: bool = False) -> str | None:
    """Why ``spec`` cannot run on the ctranslate2 engine with these options (one line), or None."""
    if options.engine != "ctranslate2":
        return None
    if spec.family != "whisper":
        return f"--engine ctranslate2 runs Whisper checkpoints only, not the {spec.family} family; use --engine transformers"
    if interventions:
        return "--engine ctranslate2 cannot apply --intervene: the edits are hooks on the model, which only the transformers engine has"
    if spec.random_init or spec.checkpoint == TINY_RANDOM:
        return "--engine ctranslate2 runs a checkpoint's weights: random weights (--random-init, tiny-random) need the transformers engine"
    return None


def import_ctranslate2():
    """The ``ctranslate2`` module, or one line naming the extra that brings it."""
    try:
        import ctranslate2
    except ImportError as error:
        raise GenerationError(f"--engine ctranslate2 needs the ctranslate2 package, which is not installed: {EXTRA}") from error
    return ctranslate2


def converted_model(spec: ModelSpec) -> Path:
    """The CTranslate2 model folder of ``spec``, made once in ``cache_dir()/ctranslate2``."""
    if spec.checkpoint and spec.checkpoint.startswith(BUNDLED_PREFIX):
        return _bundled_model(spec.checkpoint.removeprefix(BUNDLED_PREFIX))
    target = cache_dir() / "ctranslate2" / id_file_name(spec.fingerprint(), "")
    if (target / "model.bin").is_file():
        return target
    converters = import_ctranslate2().converters
    staging = _staging(target)
    converter = converters.TransformersConverter(spec.resolved_checkpoint(), revision=spec.revision)
    converter.convert(str(staging), force=True)  # float32 weights as stored: every compute type is a load-time choice
    return _publish(staging, target)


def _bundled_model(size: str) -> Path:
    """A bundled Whisper as the CTranslate2 model it is: one ``model.bin`` linked, or its parts joined."""
    if size not in BUNDLED:
        raise GenerationError(f"unknown bundled Whisper size {size!r}; choose one of {sorted(BUNDLED)}")
    target = cache_dir() / "ctranslate2" / f"bundled-{size}"
    if (target / "model.bin").is_file():
        return target
    source = BUNDLED[size]
    parts = [Path(str(_package_file(package, relative, source.pip_names))) for package, relative in zip(source.packages, source.model_files)]
    assets = _package_file(source.assets_package, source.assets_dir, source.pip_names)
    staging = _staging(target)
    if len(parts) == 1:
        (staging / "model.bin").symlink_to(parts[0])
    else:
        with open(staging / "model.bin", "wb") as joined:
            for part in parts:
                with open(part, "rb") as piece:
                    shutil.copyfileobj(piece, joined, 1 << 24)
    for name in ("config.json", "vocabulary.txt"):
        (staging / name).write_bytes(assets.joinpath(name).read_bytes())
    return _publish(staging, target)


def _staging(target: Path) -> Path:
    staging = target.with_name(f"{target.name}.tmp-{os.getpid()}")  # per process: two first runs at once must not share it
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    return staging


def _publish(staging: Path, target: Path) -> Path:
    try:
        staging.rename(target)
    except OSError:  # another process finished the same model first: keep its folder
        shutil.rmtree(staging, ignore_errors=True)
        if not (target / "model.bin").is_file():
            raise
    return target


class FeatureFrontEnd:
    """What the transcription loop asks of an extractor, without the torch model: the family, the
    fingerprint, the padded input length and the log-mel features of the checkpoint's extractor."""

    family = "whisper"

    def __init__(self, processor, checkpoint: str, fingerprint: str, device: str):
        self.processor, self.checkpoint, self.fingerprint, self.device = processor, checkpoint, fingerprint, device

    def input_seconds(self, seconds: float) -> float:
        return self.processor.n_samples / SAMPLE_RATE  # always padded to the window (30 s)

    def prepare(self, audios: list[np.ndarray]) -> Prepared:
        features = self.processor(audios, sampling_rate=SAMPLE_RATE, return_tensors="np").input_features
        return Prepared({"input_features": np.ascontiguousarray(features, dtype=np.float32)}, np.array([len(a) for a in audios]))

    def on_device(self, inputs: dict) -> dict:
        return inputs  # CTranslate2 copies the features to its device itself


class CT2WhisperGenerator(WhisperGenerator):
    """A Whisper generator whose model is a ``ctranslate2.models.Whisper`` (see the module docstring);
    the task checks, the settings record and the language forcing are :class:`WhisperGenerator`'s."""

    engine = "ctranslate2"

    def __init__(self, front_end: FeatureFrontEnd, tokenizer, model, generation_config, max_positions: int, compute_type: str, **options):
        super().__init__(front_end, tokenizer, **options)
        self.ct2_model, self._generation_config, self.max_positions, self.compute_type = model, generation_config, max_positions, compute_type

    @classmethod
    def load_spec(cls, spec: ModelSpec, options: GenerationOptions) -> CT2WhisperGenerator:
        """The generator of ``spec`` (converted into the cache on first use) with ``options``."""
        refusal = engine_refusal(spec, options)
        if refusal:
            raise GenerationError(refusal)
        ctranslate2 = import_ctranslate2()
        from transformers import AutoTokenizer, GenerationConfig, WhisperConfig, WhisperFeatureExtractor

        checkpoint = spec.resolved_checkpoint()
        compute_type = options.compute_type or default_compute_type(spec.device)
        device, _, index = spec.device.partition(":")
        supported = ctranslate2.get_supported_compute_types(device)
        if compute_type not in supported:
            raise GenerationError(f"--compute-type {compute_type} is not supported on this {device} by ctranslate2 (supported: {', '.join(sorted(supported))})")
        folder = converted_model(spec)
        threads = {"intra_threads": _torch_threads()} if device == "cpu" else {}
        model = ctranslate2.models.Whisper(str(folder), device=device, device_index=int(index or 0), compute_type=compute_type, **threads)
        config = WhisperConfig.from_pretrained(checkpoint, revision=spec.revision)
        tokenizer = AutoTokenizer.from_pretrained(checkpoint, revision=spec.revision)
        check_tokenizer_fits(tokenizer, SimpleNamespace(config=config))
        front_end = FeatureFrontEnd(WhisperFeatureExtractor.from_pretrained(checkpoint, revision=spec.revision), checkpoint, spec.fingerprint(), spec.device)
        return cls(
            front_end,
            tokenizer,
            model,
            GenerationConfig.from_pretrained(checkpoint, revision=spec.revision),
            config.max_target_positions,
            compute_type,
            num_beams=options.num_beams,
            max_new_tokens=options.max_new_tokens,
            translate_by_forcing=options.translate_by_forcing,
        )

    @property
    def generation_config(self):
        return self._generation_config

    def prompt(self, language: str, task: str, target: str) -> list[int]:
        """The tokens the transformers engine forces: start of transcript, language and task
        (multilingual models; ``translate_by_forcing`` transcribes with the target forced), no timestamps."""
        config = self.generation_config
        start, no_timestamps = config.decoder_start_token_id, config.no_timestamps_token_id
        if not self.multilingual:
            if language != "en":
                raise GenerationError(f"an English-only Whisper cannot transcribe {language!r}")
            return [start, no_timestamps]
        forced, whisper_task = (target, "transcribe") if task == "st" and target != "en" else (language, "transcribe" if task == "asr" else "translate")
        token = f"<|{forced}|>"
        if token not in (getattr(config, "lang_to_id", None) or {}):
            raise GenerationError(f"this Whisper has no language token {token}; the manifest's language codes must be Whisper's (ISO 639-1)")
        return [start, config.lang_to_id[token], config.task_to_id[whisper_task], no_timestamps]

    def new_tokens(self, prompt_length: int) -> int:
        """Tokens decoded after the prompt at most: ``--max-new-tokens``, else the generation config's
        ``max_length`` less the prompt; never past the decoder's positions."""
        wanted = self.overrides.get("max_new_tokens") or (self.generation_config.max_length or self.max_positions) - prompt_length
        return max(1, min(wanted, self.max_positions - prompt_length))

    def _generate(self, inputs, language, task, target) -> list[list[int]]:
        from ctranslate2 import StorageView

        config, features = self.generation_config, inputs["input_features"]
        prompt = self.prompt(language, task, target)
        budget = self.new_tokens(len(prompt))
        results = self.ct2_model.generate(
            StorageView.from_array(features),
            [prompt] * len(features),
            beam_size=self.overrides.get("num_beams", config.num_beams or 1),
            length_penalty=1.0 if config.length_penalty is None else config.length_penalty,
            repetition_penalty=config.repetition_penalty or 1.0,
            no_repeat_ngram_size=config.no_repeat_ngram_size or 0,
            max_length=2 * budget,  # CTranslate2's Whisper decodes at most max_length // 2 tokens after the prompt
            suppress_blank=False,  # at the first step transformers suppresses only begin_suppress_tokens (the converted config's too)
            suppress_tokens=list(config.suppress_tokens or []),
        )
        return [result.sequences_ids[0][:budget] for result in results]


def _torch_threads() -> int:
    """The CPU threads the transformers engine would use (torch's setting), so that both engines get the same cores."""
    import torch

    return torch.get_num_threads()
