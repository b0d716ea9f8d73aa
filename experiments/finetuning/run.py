"""One fine-tuning run: the subset, the model with adapters, the trainer, the merged model.

Layout of ``out``::

    run.json             the settings (what a resumed run must match), the seed, the training ids
    val_history.jsonl    one row per validation: step, WER overall and per gender, E, Δrel, gap
    logs/version_N/      Lightning's CSVLogger (metrics.csv: train/loss, val/* per step)
    checkpoints/last.ckpt  adapters and optimiser state, for --resume
    model/               the merged model as a transformers folder (``--checkpoint out/model``
                         everywhere), with ``finetune.json`` and, with GRAFN, ``grafn-filters.json``
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from experiments.finetuning.data import GrafnFrontEnd, UtteranceDataset, WhisperCollator
from experiments.finetuning.module import LoraOptions, WhisperLora, add_lora
from experiments.finetuning.subsets import SubsetError, draw_subset
from experiments.finetuning.tracking import GenderGapTracker, history_log, read_history
from experiments.normalisation.filters import file_digest
from extract.families.generation import GenerationOptions
from extract.manifest import read_manifest
from extract.provenance import provenance
from extract.spec import ModelSpec, load_generator
from probing.train import quiet_lightning

FILTERS_NAME = "grafn-filters.json"


class FinetuneError(ValueError):
    """A run that cannot start or resume as asked (the message says why and what to do)."""


@dataclass(frozen=True)
class FinetuneConfig:
    """Everything that determines a run (``run.json``); see ``python -m experiments.finetune --help``."""

    manifest: str
    female_share: float
    total: int
    checkpoint: str = "bundled-tiny.en"
    revision: str | None = None
    train_split: str = "train"
    val_split: str = "dev"
    val_manifest: str | None = None
    val_size: int | None = None
    language: str | None = None
    exclude_validation_texts: bool = True
    lora: LoraOptions = field(default_factory=LoraOptions)
    lr: float = 1e-3
    warmup_steps: int = 50
    weight_decay: float = 0.0
    batch_size: int = 8
    max_steps: int = 1000
    val_every: int = 200
    validate_before: bool = True
    seed: int = 0
    grafn: str | None = None
    grafn_by: str = "gender"
    precision: str = "32-true"
    num_beams: int = 1
    max_new_tokens: int = 128

    def __post_init__(self):
        for name in ("batch_size", "max_steps", "val_every"):
            if getattr(self, name) < 1:
                raise FinetuneError(f"{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if self.warmup_steps < 0 or self.lr <= 0:
            raise FinetuneError(f"need lr > 0 and warmup-steps >= 0, got lr {self.lr}, warmup {self.warmup_steps}")

    def to_json(self) -> dict:
        return asdict(self) | {"lora": self.lora.to_json()}


@dataclass
class FinetuneResult:
    model_dir: Path
    history: list[dict]
    training_ids: list[str]
    resumed: bool
    already_done: bool = False


def _utterances(config: FinetuneConfig):
    """The training pool and the validation set (the validation split of the manifest, or the whole
    validation manifest), both restricted to ``language`` when given."""
    rows = read_manifest(config.manifest)
    pool = [u for u in rows if u.split == config.train_split]
    validation = read_manifest(config.val_manifest) if config.val_manifest else [u for u in rows if u.split == config.val_split]
    if config.language:
        pool, validation = [u for u in pool if u.language == config.language], [u for u in validation if u.language == config.language]
    if not pool:
        raise FinetuneError(
            f"{config.manifest}: no utterance in split {config.train_split!r}" + (f" in language {config.language!r}" if config.language else "")
        )
    if not validation:
        where = config.val_manifest or f"{config.manifest} split {config.val_split!r}"
        raise FinetuneError(f"no validation utterance in {where}" + (f" in language {config.language!r}" if config.language else ""))
    if config.val_size is not None:
        validation = balanced_sample(validation, config.val_size, config.seed)
    return pool, validation


def balanced_sample(utterances, size: int, seed: int):
    """``size`` utterances, half female and half male (a seeded draw, in manifest order): a validation
    set that decodes in reasonable time on a large dev set."""
    if size < 2 or size % 2:
        raise FinetuneError(f"--val-size must be an even number of at least 2, got {size}")
    rng = np.random.default_rng(seed)
    chosen = []
    for group in ("female", "male"):
        members = [i for i, u in enumerate(utterances) if u.gender == group]
        if len(members) < size // 2:
            raise FinetuneError(f"--val-size {size} needs {size // 2} {group} validation utterances, there are {len(members)}")
        chosen.extend(rng.choice(members, size=size // 2, replace=False).tolist())
    return [utterances[i] for i in sorted(chosen)]


def _settings(config: FinetuneConfig, training_ids: list[str]) -> dict:
    return {
        "config": config.to_json(),
        "grafn_sha256": file_digest(config.grafn) if config.grafn else None,
        "seeds": {"subset": config.seed, "lightning": config.seed},
        "training_ids": training_ids,
    }


def _check_run_file(out: Path, settings: dict, resume: bool) -> None:
    path = out / "run.json"
    if path.exists():
        if not resume:
            raise FinetuneError(f"{out} already holds a run; pass --resume to continue it, or give a new --out")
        stored = json.loads(path.read_text(encoding="utf-8"))
        differing = sorted(key for key in settings if stored.get(key) != settings[key])
        if differing:
            raise FinetuneError(f"{path} records other settings ({', '.join(differing)} differ); --resume continues the same run only, give a new --out")
        return
    if resume:
        raise FinetuneError(f"nothing to resume in {out} (no run.json); drop --resume to start")


def _write_run_file(out: Path, settings: dict) -> None:
    """``run.json``, written once the model has loaded (a run that could not start leaves no folder to resume)."""
    path = out / "run.json"
    if not path.exists():
        out.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings | {"provenance": provenance()}, indent=2) + "\n", encoding="utf-8")


def _trainer(config: FinetuneConfig, out: Path, tracker: GenderGapTracker, device: str, show_progress: bool):
    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint
    from lightning.pytorch.loggers import CSVLogger

    checkpoints = ModelCheckpoint(dirpath=out / "checkpoints", save_last=True, save_top_k=0, every_n_train_steps=config.val_every)
    return L.Trainer(
        accelerator="gpu" if device.startswith("cuda") else "cpu",
        devices=1,
        precision=config.precision,
        max_steps=config.max_steps,
        max_epochs=-1,
        val_check_interval=config.val_every,
        check_val_every_n_epoch=None,
        num_sanity_val_steps=0,
        logger=CSVLogger(out, name="logs"),
        callbacks=[tracker, checkpoints],
        enable_progress_bar=show_progress,
        enable_model_summary=False,
        log_every_n_steps=1,
    )


def run_finetuning(
    config: FinetuneConfig, out: Path, device: str = "cpu", resume: bool = False, show_progress: bool = True, reclaim_stale: bool = False
) -> FinetuneResult:
    """Train (or resume) ``config`` into ``out``; returns where the merged model is and the history.
    ``reclaim_stale``: take over the claim a killed run left on the history (:func:`history_log`)."""
    import lightning as L
    from torch.utils.data import DataLoader

    out = Path(out)
    model_dir = out / "model"
    front_end = GrafnFrontEnd(config.grafn, config.grafn_by) if config.grafn else None  # a bad filters file fails before anything loads
    pool, validation = _utterances(config)
    try:
        subset = draw_subset(pool, config.female_share, config.total, config.seed, validation, config.exclude_validation_texts)
    except SubsetError as error:
        raise FinetuneError(str(error)) from None
    settings = _settings(config, [u.id for u in subset])
    _check_run_file(out, settings, resume)
    history_path = out / "val_history.jsonl"
    if (model_dir / "finetune.json").exists():
        return FinetuneResult(model_dir, read_history(history_path), [u.id for u in subset], resume, already_done=True)
    L.seed_everything(config.seed, verbose=False)
    spec = ModelSpec("whisper", config.checkpoint, config.revision, device=device)
    generator = load_generator(spec, GenerationOptions(num_beams=config.num_beams, max_new_tokens=config.max_new_tokens))
    multilingual = generator.multilingual
    model = add_lora(generator.extractor.model, config.lora)
    _write_run_file(out, settings)
    module = WhisperLora(model, generator, config.lr, config.warmup_steps, config.max_steps, config.weight_decay)
    collate = WhisperCollator(generator.extractor.processor, generator.tokenizer, multilingual)
    train = DataLoader(UtteranceDataset(subset, front_end), batch_size=config.batch_size, shuffle=True, collate_fn=collate, drop_last=False)
    val = DataLoader(UtteranceDataset(validation, front_end), batch_size=config.batch_size, shuffle=False, collate_fn=collate)
    last = out / "checkpoints" / "last.ckpt"
    if resume and not last.exists() and read_history(history_path):
        raise FinetuneError(f"{last} is missing: the run cannot resume; give a new --out")
    with quiet_lightning(), history_log(history_path, reclaim_stale) as history:
        trainer = _trainer(config, out, GenderGapTracker(history), device, show_progress)
        if config.validate_before and not any(record["step"] == 0 for record in read_history(history_path)):
            trainer.validate(module, val, verbose=False)
        module.train()  # the loaded model is in eval mode, and Lightning keeps a module's mode
        trainer.fit(module, train, val, ckpt_path=str(last) if resume and last.exists() else None)
        trainer.save_checkpoint(last)  # the final adapters: a run killed while saving the model resumes from here
        if not any(record["step"] == trainer.global_step for record in read_history(history_path)):
            trainer.validate(module, val, verbose=False)
    history = read_history(history_path)
    save_merged(module, generator, model_dir, config, history)
    return FinetuneResult(model_dir, history, [u.id for u in subset], resume)


def save_merged(module: WhisperLora, generator, model_dir: Path, config: FinetuneConfig, history: list[dict]) -> Path:
    """The adapters merged into the base weights, saved with the feature extractor, tokenizer and
    generation config as a standard transformers folder (written to a temporary name, then renamed)."""
    staging = model_dir.with_name(model_dir.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    merged = module.model.merge_and_unload().to("cpu")
    merged.save_pretrained(staging, safe_serialization=True)
    generator.extractor.processor.save_pretrained(staging)
    generator.tokenizer.save_pretrained(staging)
    if config.grafn:
        shutil.copyfile(config.grafn, staging / FILTERS_NAME)
    summary = {"config": config.to_json(), "final": history[-1] if history else None, "expects_grafn": bool(config.grafn), "provenance": provenance()}
    (staging / "finetune.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    shutil.rmtree(model_dir, ignore_errors=True)
    staging.rename(model_dir)
    return model_dir
