"""Small English test corpora: utterances ``u0``, ``u1``, ... of dataset ``t``, all in the train
split, female at odd indices and male at even ones."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile

from extract.audio import SAMPLE_RATE
from extract.manifest import Utterance


def utterance(index: int, audio: Path, speakers: int | None = None) -> Utterance:
    """Utterance ``u{index}`` of the clip at ``audio``; its speaker is ``s{index}``, or with
    ``speakers`` one of ``s0`` ... taking turns."""
    speaker = index if speakers is None else index % speakers
    return Utterance(
        id=f"u{index}",
        audio=str(audio),
        language="en",
        text="x",
        gender="female" if index % 2 else "male",
        speaker=f"s{speaker}",
        split="train",
        dataset="t",
    )


def write_corpus(folder: Path, waves: list[np.ndarray], speakers: int | None = None) -> list[Utterance]:
    """Each of ``waves`` written to ``folder``/audio/u{index}.wav (16 kHz) as :func:`utterance` ``index``."""
    (folder / "audio").mkdir(parents=True, exist_ok=True)
    utterances = []
    for index, wave in enumerate(waves):
        path = folder / "audio" / f"u{index}.wav"
        soundfile.write(path, wave, SAMPLE_RATE)
        utterances.append(utterance(index, path, speakers))
    return utterances
