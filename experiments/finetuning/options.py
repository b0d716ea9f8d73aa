"""The LoRA options of a fine-tuning run, apart from the Lightning module (:mod:`experiments.finetuning.module`)
so that ``experiments.finetune``'s parser takes its defaults from here without importing torch or Lightning."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from extract.options import option

MODEL = "model and LoRA"  # the --help heading of the model's and the adapters' options


@dataclass(frozen=True)
class LoraOptions:
    """Defaults of peft's Whisper LoRA example (r 32, alpha 64, dropout 0.05 on q_proj and v_proj);
    the GRAFN paper names the targets but not the rank."""

    rank: int = option(32, "LoRA rank r", flag="--lora-rank", group=MODEL)
    alpha: int = option(64, "LoRA alpha", flag="--lora-alpha", group=MODEL)
    dropout: float = option(0.05, "LoRA dropout", flag="--lora-dropout", group=MODEL)
    targets: tuple[str, ...] = option(("q_proj", "v_proj"), "module names that get adapters", flag="--lora-targets", metavar="NAME[,NAME]", group=MODEL)

    def __post_init__(self):
        if self.rank < 1 or self.alpha < 1:
            raise ValueError(f"LoRA rank and alpha must be positive, got rank {self.rank}, alpha {self.alpha}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"LoRA dropout must be in [0, 1), got {self.dropout}")
        if not self.targets:
            raise ValueError("LoRA needs at least one target module name")

    def to_json(self) -> dict:
        return asdict(self) | {"targets": list(self.targets)}
