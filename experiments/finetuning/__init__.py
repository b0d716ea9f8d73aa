"""Gender-aware LoRA fine-tuning of Whisper (GRAFN §V; Boito et al. 2022's balance experiments), run
by :mod:`.run`; ``python -m experiments.finetune`` is its command line."""
