"""The Lightning module: Whisper with peft LoRA adapters (GRAFN's setup: ``q_proj`` and ``v_proj`` of
every attention block), trained on the adapters only, validated by decoding with the package's
Whisper generator so that hypotheses come out exactly as ``experiments.transcribe`` makes them."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import torch

from experiments.finetuning.options import LoraOptions
from probing.lightning_import import L

LORA_MARKER = "lora_"  # peft's parameter names for the adapters
RANDOM_STATE_KEY = "random_state"  # the checkpoint's entry for the random generators' state


class TrainingDiverged(ArithmeticError):
    """A non-finite training loss or adapter weight: the run stops before anything non-finite is saved."""


def add_lora(model, options: LoraOptions):
    """``model`` with LoRA adapters injected in place (so a generator holding ``model`` decodes through
    them) and wrapped as a peft model; everything but the adapters is frozen."""
    from peft import LoraConfig, get_peft_model

    present = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    missing = [target for target in options.targets if target not in present]
    if missing:
        raise ValueError(f"no module named {', '.join(missing)} in this model; LoRA targets are module names such as q_proj, k_proj, v_proj, out_proj, fc1")
    config = LoraConfig(r=options.rank, lora_alpha=options.alpha, lora_dropout=options.dropout, target_modules=list(options.targets), bias="none")
    return get_peft_model(model, config)


def random_state() -> dict:
    """The state of every random generator training draws from (dropout and LoRA dropout use torch's,
    on the CPU or the GPU; numpy's and Python's for completeness), as tensors and plain data so that a
    checkpoint holding it still loads with ``weights_only``."""
    name, key, position, has_gauss, gauss = np.random.get_state()
    state = {
        "torch": torch.get_rng_state(),
        "numpy": [name, torch.from_numpy(key.astype(np.int64)), position, has_gauss, gauss],
        "python": random.getstate(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()  # the current device's: a run trains on one
    return state


def set_random_state(state: dict) -> None:
    """Restore what :func:`random_state` recorded."""
    torch.set_rng_state(state["torch"])
    name, key, position, has_gauss, gauss = state["numpy"]
    np.random.set_state((name, key.numpy().astype(np.uint32), position, has_gauss, gauss))
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


class WhisperLora(L.LightningModule):
    """Cross-entropy on the label ids; AdamW on the adapters with a linear warm-up then linear decay
    to 0 at ``max_steps``. Checkpoints hold the adapters, the optimiser and the random generators'
    state (the frozen base model is the ``--checkpoint`` it came from), so a resume loads them
    non-strictly and continues the same random stream. A non-finite loss or adapter stops the run
    (:class:`TrainingDiverged`) before it is checkpointed."""

    def __init__(self, model, generator, lr: float = 1e-3, warmup_steps: int = 50, max_steps: int = 1000, weight_decay: float = 0.0):
        super().__init__()
        self.model = model  # the peft model
        self.generator = generator  # decodes through the same (adapted) weights
        self.lr, self.warmup_steps, self.max_steps, self.weight_decay = lr, warmup_steps, max_steps, weight_decay
        self.strict_loading = False
        self.resumed_random_state: dict | None = None  # from the checkpoint, restored when training starts

    def training_step(self, batch, batch_index):
        loss = self.model(input_features=batch["input_features"], labels=batch["labels"]).loss
        if not torch.isfinite(loss):
            raise TrainingDiverged(f"the training loss is {loss.item()} at step {self.global_step + 1}")
        self.log("train/loss", loss, prog_bar=True, batch_size=len(batch["labels"]))
        return loss

    def validation_step(self, batch, batch_index):
        loss = self.model(input_features=batch["input_features"], labels=batch["labels"]).loss
        self.log("val/loss", loss, batch_size=len(batch["labels"]))
        rows = []
        for language in dict.fromkeys(u.language for u in batch["utterances"]):
            chosen = [i for i, u in enumerate(batch["utterances"]) if u.language == language]
            hypotheses = self.generator.generate([batch["audios"][i] for i in chosen], language, "asr")
            for index, hypothesis in zip(chosen, hypotheses):
                u = batch["utterances"][index]
                rows.append({"id": u.id, "reference": u.text, "hypothesis": hypothesis, "gender": u.gender, "speaker": u.speaker, "language": u.language})
        return {"rows": rows}

    def configure_optimizers(self):
        trainable = [parameter for parameter in self.model.parameters() if parameter.requires_grad]
        optimizer = torch.optim.AdamW(trainable, lr=self.lr, weight_decay=self.weight_decay)
        warmup, total = self.warmup_steps, max(self.max_steps, 1)

        def factor(step: int) -> float:
            if warmup and step < warmup:
                return (step + 1) / warmup
            return max(0.0, (total - step) / max(1, total - warmup))

        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["state_dict"] = {name: value for name, value in checkpoint["state_dict"].items() if LORA_MARKER in name}
        broken = [name for name, value in checkpoint["state_dict"].items() if not torch.isfinite(value).all()]
        if broken:
            raise TrainingDiverged(f"{len(broken)} adapter tensor(s) hold non-finite values at step {self.global_step}, e.g. {broken[0]}")
        checkpoint[RANDOM_STATE_KEY] = random_state()

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self.resumed_random_state = checkpoint.get(RANDOM_STATE_KEY)

    def on_train_start(self) -> None:
        """The random generators as they were at the checkpoint, just before the first resumed step:
        between loading and here nothing draws from them (the data loaders have their own generator)."""
        if self.resumed_random_state is not None:
            set_random_state(self.resumed_random_state)
            self.resumed_random_state = None


def save_checkpoint(trainer: L.Trainer, path: Path) -> None:
    """The trainer's checkpoint at ``path``, written to a temporary name and renamed: a kill while
    writing leaves the previous checkpoint whole."""
    temporary = path.with_name(path.name + ".tmp")
    trainer.save_checkpoint(temporary)
    temporary.replace(path)


class LastCheckpoint(L.Callback):
    """``path`` rewritten at the end of each validation while fitting (every ``val_every`` steps), so
    after that validation's history row: a run resumed from it never lacks a row, and a run killed
    during a validation redoes the steps since the last one (bit for bit) and that validation."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.state.fn == "fit" and not trainer.sanity_checking:
            save_checkpoint(trainer, self.path)
