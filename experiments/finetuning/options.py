"""The LoRA options of a fine-tuning run, apart from the Lightning module (:mod:`experiments.finetuning.module`)
so that ``experiments.finetune``'s parser takes its defaults from here without importing torch or Lightning."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class LoraOptions:
    """Defaults of peft's Whisper LoRA example (r 32, alpha 64, dropout 0.05 on q_proj and v_proj);
    the GRAFN paper names the targets but not the rank."""

    rank: int = 32
    alpha: int = 64
    dropout: float = 0.05
    targets: tuple[str, ...] = ("q_proj", "v_proj")

    def __post_init__(self):
        if self.rank < 1 or self.alpha < 1:
            raise ValueError(f"LoRA rank and alpha must be positive, got rank {self.rank}, alpha {self.alpha}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"LoRA dropout must be in [0, 1), got {self.dropout}")
        if not self.targets:
            raise ValueError("LoRA needs at least one target module name")

    def to_json(self) -> dict:
        return asdict(self) | {"targets": list(self.targets)}
