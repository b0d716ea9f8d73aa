"""Opt-in demo stages (``python -m experiments.demo --extra NAME``): studies that build on the main
demo's corpus, stores and transcripts but would break its time budget if they always ran.

Each stage is a module here with ``run(work) -> list[str]``: it computes what is missing under
``work.root`` (resuming like the main stages), draws its figures into ``work.out`` and returns the
Markdown lines of its section, which the demo appends to ``report.md``. ``work`` is the demo's
``experiments.demo.work.Work`` (root, corpus, out, dtype, threads); the main stores,
hypotheses and probe runs are the study's, from ``experiments.demo.work.extraction_jobs(work)``,
``transcription_jobs(work)`` and ``probe_configs(work)``.
"""

from __future__ import annotations

import importlib

EXTRA_STAGES = {
    "winomt": "WinoST-style spoken set: gender accuracy, ΔG and ΔS of Whisper's ASR and forced French output",
    "grafn": "GRAFN waveform normalisation and gender-balanced LoRA fine-tuning: gaps and probes before and after",
    "analyses": "what explains a gap: acoustic and lexical features per voice, t-tests, speaker clustering",
    "interventions": "LEACE erasure and steering inside the encoder: probes, WER gap and MuST-SHE before and after",
}


def run_extra(name: str, work) -> list[str]:
    """The Markdown section of one opt-in stage (see the module docstring)."""
    if name not in EXTRA_STAGES:
        raise ValueError(f"unknown demo stage {name!r}; choose from {', '.join(EXTRA_STAGES)}")
    return importlib.import_module(f"{__name__}.{name}").run(work)
