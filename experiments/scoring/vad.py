"""Drop records with (almost) no speech, by silero-vad (``python -m experiments.vad_filter``).

Silent or near-silent clips produce hallucinated transcripts whose error rates are not about the
speaker. :func:`filter_speech` keeps records with at least a given duration of detected speech and
lists every dropped record (and every unreadable one) with its reason. The silero-vad model ships
inside its PyPI package, so this runs offline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from tqdm.auto import tqdm

from extract.audio import SAMPLE_RATE, AudioError, load_audio
from extract.manifest import Utterance
from extract.options import check_options, option

SpeechDetector = Callable[[np.ndarray], float]  # SAMPLE_RATE waveform -> seconds of speech


@dataclass(frozen=True)
class VadSettings:
    """What counts as speech: the options of ``speech-gender vad_filter`` (declared once: ``experiments.options``)."""

    min_speech_seconds: float = option(0.3, "keep records with at least this many seconds of detected speech", least=0)
    threshold: float = option(0.5, "silero-vad speech probability threshold", least=0)
    max_seconds: float = option(30.0, "only look at the first seconds a model would see", positive=True)

    def __post_init__(self):
        check_options(self)


def silero_detector(threshold: float = 0.5, device: str = "cpu") -> SpeechDetector:
    """silero-vad's speech seconds of a clip, the model and each clip on ``device``."""
    import torch  # here, not at the top: torch and the model load only when a detector is built
    from silero_vad import get_speech_timestamps, load_silero_vad

    model = load_silero_vad().to(device)

    def speech_seconds(samples: np.ndarray) -> float:
        spans = get_speech_timestamps(torch.from_numpy(samples).to(device), model, sampling_rate=SAMPLE_RATE, threshold=threshold)
        return sum(span["end"] - span["start"] for span in spans) / SAMPLE_RATE

    return speech_seconds


def filter_speech(
    utterances: list[Utterance], detector: SpeechDetector, min_speech_seconds: float, max_seconds: float | None = 30.0, show_progress: bool = True
) -> tuple[list[Utterance], list[dict]]:
    """(kept records, dropped records with the reason and the speech found)."""
    kept, dropped = [], []
    for utterance in tqdm(utterances, desc="voice activity", unit="utt", disable=not show_progress):
        record = {"id": utterance.id, "audio": utterance.audio, "language": utterance.language, "gender": utterance.gender}
        try:
            samples = load_audio(utterance.audio, utterance.offset, utterance.duration, max_seconds=max_seconds).samples
        except AudioError as error:
            dropped.append(record | {"reason": type(error).__name__, "message": str(error)})
            continue
        speech = detector(samples)
        if speech < min_speech_seconds:
            dropped.append(record | {"reason": "too little speech", "speech_seconds": round(speech, 3)})
        else:
            kept.append(utterance)
    return kept, dropped
