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

from experiments.analysis.acoustic import AcousticError
from experiments.analysis.contrasts import ContrastError
from experiments.analysis.speakers import SpeakerError
from experiments.finetuning.run import FinetuneError
from experiments.finetuning.subsets import SubsetError
from experiments.normalisation.transform import GrafnError
from experiments.scoring.grammatical_gender import AnalyserError
from experiments.scoring.winomt import WinoMTError
from experiments.scoring.word_alignment import AlignmentError
from extract.interventions import InterventionError

EXTRA_STAGES = {
    "winomt": "WinoST-style spoken set: gender accuracy, ΔG and ΔS of Whisper's ASR and forced French output",
    "grafn": "GRAFN waveform normalisation and gender-balanced LoRA fine-tuning: gaps and probes before and after",
    "analyses": "what explains a gap: acoustic and lexical features per voice, t-tests, speaker clustering",
    "interventions": "LEACE erasure and steering inside the encoder: probes, WER gap and MuST-SHE before and after",
}

# what an opt-in stage raises for a problem the user can fix (a missing spaCy pipeline, a filters or
# intervention file of another model): one line and exit status 2 from the demo
EXTRA_STAGE_ERRORS = (
    AcousticError,
    ContrastError,
    SpeakerError,
    FinetuneError,
    SubsetError,
    GrafnError,
    AnalyserError,
    WinoMTError,
    AlignmentError,
    InterventionError,
)


def run_extra(name: str, work) -> list[str]:
    """The Markdown section of one opt-in stage (see the module docstring)."""
    if name not in EXTRA_STAGES:
        raise ValueError(f"unknown demo stage {name!r}; choose from {', '.join(EXTRA_STAGES)}")
    return importlib.import_module(f"{__name__}.{name}").run(work)
