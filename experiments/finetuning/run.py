"""One fine-tuning run: the subset, the model with adapters, the trainer, the merged model.

Layout of ``out``::

    run.json             the settings (what a resumed run must match), the seed, the training ids
    val_history.jsonl    one row per validation: step, WER overall and per gender, E, Δrel, gap
    logs/version_N/      Lightning's CSVLogger (metrics.csv: train/loss, val/* per step)
    checkpoints/last.ckpt  adapters, optimiser and random generators' state, for --resume (rewritten
                         after each validation, through a temporary name)
    model/               the merged model as a transformers folder (``--checkpoint out/model``
                         everywhere), with ``finetune.json`` and, with GRAFN, ``grafn-filters.json``

A resumed run equals an uninterrupted one, bit for bit on the CPU: the batch order is a function of
the seed and the step (:class:`~experiments.finetuning.data.SeededBatches`) and the checkpoint holds
the random generators' state (dropout). A run that stopped before its first checkpoint has trained
nothing that is kept, so running it again starts it over, with other settings too.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from experiments.finetuning.options import MODEL, LoraOptions
from experiments.finetuning.subsets import SubsetError, draw_subset
from experiments.normalisation.corpus import MODES
from extract.errors import UserError
from extract.fingerprint import FINGERPRINT, compared
from extract.manifest import read_manifest
from extract.options import FLOAT32_MAX, LARGEST_LR, option, seed_option
from extract.provenance import file_sha256, provenance

if TYPE_CHECKING:  # torch and Lightning load with these: imported where a run trains, so that --help stays fast
    from experiments.finetuning.module import WhisperLora
    from experiments.finetuning.tracking import GenderGapTracker

FILTERS_NAME = "grafn-filters.json"
DATA, TRAINING = "data", "training"  # --help headings of the options


class FinetuneError(UserError, ValueError):
    """A run that cannot start or resume as asked (the message says why and what to do)."""


@dataclass(frozen=True)
class FinetuneConfig:
    """Everything that determines a run (``run.json``); see ``python -m experiments.finetune --help``."""

    manifest: str = option(help="manifest with the training pool (and, without --val-manifest, the validation split)", role="input", group=DATA)
    female_share: float = option(help="share of female utterances in the training subset (GRAFN: 0.25, 0.5, 0.75)", group=DATA)
    total: int = option(help="utterances in the training subset; total x share must be a whole number", group=DATA)
    checkpoint: str = option("bundled-tiny.en", "Whisper hub id, local folder or bundled-base / bundled-tiny.en", role="input", group=MODEL)
    revision: str | None = option(None, "hub revision", group=MODEL)
    train_split: str = option("train", "split of the training pool", group=DATA)
    val_split: str = option("dev", "split of --manifest to validate on", group=DATA)
    val_manifest: str | None = option(None, "validate on this manifest instead of a split of --manifest", role="input", group=DATA)
    val_size: int | None = option(None, "validate on a seeded sample of N utterances, half female and half male (default: all)", group=DATA)
    language: str | None = option(None, "only utterances in this language (e.g. en for an English-only Whisper)", group=DATA)
    exclude_validation_texts: bool = option(
        True, "also train on sentences that occur in the validation set (default: left out)", flag="--keep-validation-sentences", group=DATA
    )
    lora: LoraOptions = field(default_factory=LoraOptions)
    lr: float = option(1e-3, "peak learning rate of AdamW on the adapters", group=TRAINING)
    warmup_steps: int = option(50, "linear warm-up, then linear decay to 0", group=TRAINING)
    weight_decay: float = option(0.0, "AdamW weight decay", group=TRAINING)
    batch_size: int = option(8, "utterances per step", group=TRAINING)
    max_steps: int = option(1000, "optimiser steps", group=TRAINING)
    val_every: int = option(200, "validate and checkpoint every N steps, and at the last", group=TRAINING)
    validate_before: bool = option(True, "skip the validation of the untrained model at step 0", flag="--no-validate-before", group=TRAINING)
    seed: int = seed_option("seed of the subset draw, the adapters' init and the data order", group=TRAINING)
    grafn: str | None = option(None, "GRAFN filters file (python -m experiments.grafn fit): normalise training and validation audio", role="input", group=DATA)
    grafn_by: str = option("gender", "which GRAFN filter each utterance gets", choices=MODES, group=DATA)
    precision: str = option("32-true", "Lightning precision, e.g. bf16-mixed on a GPU", group=TRAINING)
    num_beams: int = option(1, "validation decoding beams", group=TRAINING)
    max_new_tokens: int = option(128, "validation decoding length", group=TRAINING)

    def __post_init__(self):
        for name in ("batch_size", "max_steps", "val_every"):
            if getattr(self, name) < 1:
                raise FinetuneError(f"{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if self.warmup_steps < 0:
            raise FinetuneError(f"warmup-steps must be >= 0, got {self.warmup_steps}")
        if not (math.isfinite(self.lr) and 0 < self.lr <= LARGEST_LR):
            raise FinetuneError(f"--lr must be a finite number > 0 (at most {LARGEST_LR:.3g}: AdamW's first step, lr / (1 - β1), is a float32), got {self.lr}")
        if not (math.isfinite(self.weight_decay) and 0 <= self.weight_decay * self.lr <= FLOAT32_MAX):
            raise FinetuneError(
                f"--weight-decay must be a finite number >= 0 (0: no decay; lr x weight decay at most {FLOAT32_MAX:.3g}, a float32), got {self.weight_decay}"
            )

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
    in_language = f" in language {config.language!r}" if config.language else ""
    if not pool:
        raise FinetuneError(f"{config.manifest}: no utterance in split {config.train_split!r}{in_language}")
    if not validation:
        where = config.val_manifest or f"{config.manifest} split {config.val_split!r}"
        raise FinetuneError(f"no validation utterance in {where}{in_language}")
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
    """What ``run.json`` records and a resume must match; ``model_fingerprint``: the base model's
    (``ModelSpec.fingerprint``), so that weights changed in place refuse the resume."""
    from extract.spec import ModelSpec

    return {
        "config": config.to_json(),
        FINGERPRINT: ModelSpec("whisper", config.checkpoint, config.revision).fingerprint(),
        "grafn_sha256": file_sha256(config.grafn) if config.grafn else None,
        "seeds": {"subset": config.seed, "lightning": config.seed},
        "training_ids": training_ids,
    }


def _check_run_file(out: Path, settings: dict, resume: bool) -> Path | None:
    """How this call starts in ``out``: the checkpoint to resume from, or None to train from step 0.

    A run that kept a trained step (a checkpoint, or validations past step 0) continues with
    ``--resume`` and the same settings only. A run that stopped before its first checkpoint (killed
    early, or failed at its first forward pass) kept nothing trained: it starts over, and with other
    settings its files (run.json, the step-0 validation, Lightning's logs) are replaced."""
    from experiments.finetuning.tracking import read_history

    path, last = out / "run.json", out / "checkpoints" / "last.ckpt"
    if not path.exists():
        if resume:
            raise FinetuneError(f"nothing to resume in {out} (no run.json); drop --resume to start")
        return None
    stored = json.loads(path.read_text(encoding="utf-8"))
    previous, current = _compared(stored, settings)
    differing = sorted(key for key in settings if previous.get(key) != current[key])
    if not last.exists() and all(record["step"] == 0 for record in read_history(out / "val_history.jsonl")):
        if differing:
            _discard_untrained_run(out, differing)
        return None
    if not resume:
        raise FinetuneError(f"{out} already holds a run; pass --resume to continue it, or give a new --out")
    if differing:
        described = ", ".join(key if isinstance(settings[key], (dict, list)) else f"{key}: {stored.get(key)!r} vs {settings[key]!r}" for key in differing)
        raise FinetuneError(f"{path} records other settings ({described} differ); --resume continues the same run only, give a new --out")
    if not last.exists():
        raise FinetuneError(f"{last} is missing: the run cannot resume; give a new --out")
    _check_checkpoint(last)
    return last


def _discard_untrained_run(out: Path, differing: list[str]) -> None:
    """Remove what a run that never reached a checkpoint left (nothing trained), so that a corrected
    rerun with other settings starts clean."""
    print(f"[finetune] {out} holds a run with other settings ({', '.join(differing)}) that stopped before its first checkpoint; replacing it", file=sys.stderr)
    for name in ("run.json", "val_history.jsonl"):
        (out / name).unlink(missing_ok=True)
    for name in ("logs", "checkpoints"):
        shutil.rmtree(out / name, ignore_errors=True)


def _check_checkpoint(path: Path) -> None:
    """Refuse, in one line, a ``last.ckpt`` this run cannot resume from, before Lightning reads it. It
    is read with ``weights_only``: a file holding other objects than tensors and plain data is refused
    unread, nothing in it runs."""
    import pickle

    import torch

    from experiments.finetuning.module import RANDOM_STATE_KEY

    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        reason = next((line for line in str(error).splitlines() if "GLOBAL" in line), "not tensors and plain data")
        raise FinetuneError(f"{path}: refused unread, it holds other objects than tensors and plain data ({reason.strip()}); give a new --out") from None
    except Exception as error:  # torch.load fails on a damaged file in many ways: RuntimeError, OSError, EOFError, KeyError...
        reason = str(error).strip().splitlines()[0] if str(error).strip() else "empty or cut short"
        raise FinetuneError(
            f"{path}: not a readable checkpoint ({type(error).__name__}: {reason}), damaged or cut short; the run cannot resume from it, give a new --out"
        ) from None
    if not isinstance(checkpoint, dict) or not {"state_dict", "loops", "global_step"} <= set(checkpoint):
        raise FinetuneError(f"{path}: not a Lightning checkpoint of a fine-tuning run; the run cannot resume from it, give a new --out")
    if RANDOM_STATE_KEY not in checkpoint:
        print(
            f"[finetune] {path} holds no random generators' state (an older version wrote it): the resumed run is not bit-identical to an uninterrupted one",
            file=sys.stderr,
        )


def _check_audio(config: FinetuneConfig, subset, validation) -> None:
    """Every training and validation utterance's audio loads, or one line naming the first that does not."""
    from experiments.finetuning.data import UtteranceDataset

    for name, utterances, manifest in (("training", subset, config.manifest), ("validation", validation, config.val_manifest or config.manifest)):
        problems = UtteranceDataset(utterances).audio_problems()
        if problems:
            raise FinetuneError(
                f"{len(problems)} {name} utterance(s) have unusable audio, e.g. {problems[0]['id']} ({problems[0]['problem']}); "
                f"fix the files or leave those rows out of {manifest}"
            )


def _compared(stored: dict, settings: dict) -> tuple[dict, dict]:
    """Two runs' settings as a resume compares them: with model fingerprints on both, the
    checkpoint's spelling in ``config`` is left out (``extract.fingerprint.compared``)."""
    if not isinstance(stored.get("config"), dict):
        return stored, settings
    fingerprints = (stored.get(FINGERPRINT), settings[FINGERPRINT])
    previous, current = compared(stored["config"], settings["config"], fingerprints)
    return stored | {"config": previous}, settings | {"config": current}


def _write_run_file(out: Path, settings: dict) -> None:
    """``run.json``, written once the model has loaded (a run that could not start leaves no folder to resume)."""
    path = out / "run.json"
    if not path.exists():
        out.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings | {"provenance": provenance()}, indent=2) + "\n", encoding="utf-8")


def _trainer(config: FinetuneConfig, out: Path, tracker: GenderGapTracker, device: str, show_progress: bool):
    from experiments.finetuning.module import LastCheckpoint
    from probing.lightning_import import L  # with the filter of its pkg_resources warning (see there)

    return L.Trainer(
        accelerator="gpu" if device.startswith("cuda") else "cpu",
        devices=1,
        precision=config.precision,
        max_steps=config.max_steps,
        max_epochs=-1,
        val_check_interval=config.val_every,
        check_val_every_n_epoch=None,
        num_sanity_val_steps=0,
        logger=L.pytorch.loggers.CSVLogger(out, name="logs"),
        callbacks=[tracker, LastCheckpoint(out / "checkpoints" / "last.ckpt")],
        enable_checkpointing=False,  # LastCheckpoint is the only one
        enable_progress_bar=show_progress,
        enable_model_summary=False,
        log_every_n_steps=1,
    )


def run_finetuning(
    config: FinetuneConfig, out: Path, device: str = "cpu", resume: bool = False, show_progress: bool = True, reclaim_stale: bool = False
) -> FinetuneResult:
    """Train (or resume) ``config`` into ``out``; returns where the merged model is and the history.
    ``reclaim_stale``: take over the claim a killed run left on the history (:func:`history_log`)."""
    import torch
    from torch.utils.data import DataLoader

    from experiments.finetuning.data import GrafnFrontEnd, SeededBatches, UtteranceDataset, WhisperCollator
    from experiments.finetuning.module import TrainingDiverged, WhisperLora, add_lora, save_checkpoint
    from experiments.finetuning.tracking import GenderGapTracker, history_log, read_history
    from extract.families.generation import GenerationOptions
    from extract.spec import ModelSpec, load_generator
    from probing.lightning_import import L  # with the filter of its pkg_resources warning (see there)
    from probing.train import quiet_lightning

    out = Path(out)
    model_dir = out / "model"
    front_end = GrafnFrontEnd(config.grafn, config.grafn_by) if config.grafn else None  # a bad filters file fails before anything loads
    pool, validation = _utterances(config)
    try:
        subset = draw_subset(pool, config.female_share, config.total, config.seed, validation, config.exclude_validation_texts)
    except SubsetError as error:
        raise FinetuneError(str(error)) from None
    settings = _settings(config, [u.id for u in subset])
    checkpoint = _check_run_file(out, settings, resume)
    history_path = out / "val_history.jsonl"
    if (model_dir / "finetune.json").exists():
        return FinetuneResult(model_dir, read_history(history_path), [u.id for u in subset], resume, already_done=True)
    _check_audio(config, subset, validation)
    L.seed_everything(config.seed, verbose=False)
    spec = ModelSpec("whisper", config.checkpoint, config.revision, device=device)
    generator = load_generator(spec, GenerationOptions(num_beams=config.num_beams, max_new_tokens=config.max_new_tokens))
    multilingual = generator.multilingual
    model = add_lora(generator.extractor.model, config.lora)
    _write_run_file(out, settings)
    module = WhisperLora(model, generator, config.lr, config.warmup_steps, config.max_steps, config.weight_decay)
    collate = WhisperCollator(generator.extractor.processor, generator.tokenizer, multilingual)
    batches = SeededBatches(len(subset), config.batch_size, config.seed, lambda: module.global_step)
    # each loader draws its workers' base seed from its own generator, not from the global one dropout uses
    train = DataLoader(UtteranceDataset(subset, front_end), batch_sampler=batches, collate_fn=collate, generator=torch.Generator().manual_seed(config.seed))
    val = DataLoader(
        UtteranceDataset(validation, front_end),
        batch_size=config.batch_size,
        shuffle=False,
        collate_fn=collate,
        generator=torch.Generator().manual_seed(config.seed),
    )
    last = out / "checkpoints" / "last.ckpt"
    with quiet_lightning(), history_log(history_path, reclaim_stale) as history:
        trainer = _trainer(config, out, GenderGapTracker(history), device, show_progress)
        if config.validate_before and not any(record["step"] == 0 for record in read_history(history_path)):
            trainer.validate(module, val, verbose=False)
        module.train()  # the loaded model is in eval mode, and Lightning keeps a module's mode
        try:
            with warnings.catch_warnings():
                # SeededBatches starts mid-pass at the checkpoint's step, which Lightning cannot see
                warnings.filterwarnings("ignore", message=r"You're resuming from a checkpoint that ended before the epoch ended")
                trainer.fit(module, train, val, ckpt_path=checkpoint)
            save_checkpoint(trainer, last)  # the final adapters: a run killed while saving the model resumes from here
        except TrainingDiverged as error:
            where = f" into a new --out ({out} holds its checkpoints)" if last.exists() else ""
            raise FinetuneError(
                f"{error}: training diverged and nothing from this step on is saved; rerun with a lower --lr than {config.lr:g}{where}"
            ) from None
        if not any(record["step"] == trainer.global_step for record in read_history(history_path)):
            trainer.validate(module, val, verbose=False)
    history = read_history(history_path)
    save_merged(module, generator, model_dir, config, history)
    return FinetuneResult(model_dir, history, [u.id for u in subset], resume)


def save_merged(module: WhisperLora, generator, model_dir: Path, config: FinetuneConfig, history: list[dict]) -> Path:
    """The adapters merged into the base weights, saved with the feature extractor, tokenizer and
    generation config as a standard transformers folder (written to a temporary name, then renamed)."""
    import torch

    staging = model_dir.with_name(model_dir.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    merged = module.model.merge_and_unload().to("cpu")
    broken = [name for name, value in merged.state_dict().items() if value.is_floating_point() and not torch.isfinite(value).all()]
    if broken:
        raise FinetuneError(f"the merged model holds non-finite values in {len(broken)} tensor(s), e.g. {broken[0]}; nothing saved; rerun with a lower --lr")
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
