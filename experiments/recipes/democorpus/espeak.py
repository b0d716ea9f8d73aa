"""espeak-ng through ctypes, from the library and data that the ``espeakng-loader`` wheel ships.

Two uses: IPA phonemes for Kokoro (which reads phonemes, not text), and formant-synthesis
voices (``en+m3`` and friends) for the demo corpus. espeak-ng keeps process-global state, so
this module initializes it once and is not thread-safe.

Reproducible synthesis. espeak-ng 1.52 seeds its noise generator from the clock when it starts
(the breath noise of variants such as f2 and f5 differs from one second to the next), and its
wave generator carries state from one utterance to the next (pitch flutter, phase, echo), so the
same sentence synthesised twice in one process differs even in voices without breath (measured
on ``en-us+m4``: 72 268 vs 72 288 samples). :func:`synthesize` therefore runs every utterance in
a fresh Python process (about 0.2 s each) that seeds the generator with :data:`NOISE_SEED`
before it speaks: the audio depends on the text, voice, rate and pitch only.
"""

from __future__ import annotations

import argparse
import ctypes
import io
import re
import subprocess
import sys
from functools import lru_cache

import numpy as np

from extract.errors import UserError

_AUDIO_OUTPUT_SYNCHRONOUS = 2
_CHARS_UTF8 = 1
_POS_CHARACTER = 1
_PHONEMES_IPA = 0x02
_RATE, _PITCH = 1, 3
_SYNTH_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p)
_PUNCTUATION = re.compile(r"([,.;:!?¡¿]+)")
NOISE_SEED = 1  # espeak-ng's noise generator (breath of the female variants), reseeded before every utterance


class EspeakError(UserError, RuntimeError):
    """espeak-ng could not be loaded or refused a request."""


class _Engine:
    def __init__(self):
        try:
            import espeakng_loader
        except ModuleNotFoundError as error:
            raise EspeakError("espeakng-loader is not installed; run `make install`") from error
        self.lib = ctypes.cdll.LoadLibrary(espeakng_loader.get_library_path())
        self.lib.espeak_TextToPhonemes.restype = ctypes.c_char_p
        self.lib.espeak_TextToPhonemes.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.c_int, ctypes.c_int]
        self.lib.espeak_ng_SetRandSeed.argtypes = [ctypes.c_long]
        data_path = espeakng_loader.get_data_path().encode()
        self.sample_rate = self.lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 0, data_path, 0)
        if self.sample_rate <= 0:
            raise EspeakError(f"espeak_Initialize failed with data at {data_path.decode()}")
        self._chunks: list[np.ndarray] = []
        self._callback = _SYNTH_CALLBACK(self._collect)  # kept referenced: C holds the pointer
        self.lib.espeak_SetSynthCallback(self._callback)

    def _collect(self, wav, n_samples, _events) -> int:
        if n_samples > 0:
            self._chunks.append(np.ctypeslib.as_array(wav, shape=(n_samples,)).copy())
        return 0

    def set_voice(self, voice: str) -> None:
        if self.lib.espeak_SetVoiceByName(voice.encode()) != 0:
            raise EspeakError(f"espeak-ng has no voice {voice!r}")

    def phonemes(self, text: str, voice: str) -> str:
        self.set_voice(voice)
        buffer = ctypes.create_string_buffer(text.encode("utf-8"))
        pointer = ctypes.c_char_p(ctypes.addressof(buffer))
        pieces = []
        while pointer.value:
            result = self.lib.espeak_TextToPhonemes(ctypes.byref(pointer), _CHARS_UTF8, _PHONEMES_IPA)
            if result:
                pieces.append(result.decode("utf-8").strip())
        return " ".join(piece for piece in pieces if piece)

    def synthesize(self, text: str, voice: str, rate_wpm: int, pitch: int) -> np.ndarray:
        """Speech from this process' engine: reproducible only as the first utterance of a fresh
        process (see the module docstring); :func:`synthesize` arranges that."""
        self.set_voice(voice)
        self.lib.espeak_ng_SetRandSeed(NOISE_SEED)
        self.lib.espeak_SetParameter(_RATE, rate_wpm, 0)
        self.lib.espeak_SetParameter(_PITCH, pitch, 0)
        self._chunks = []
        encoded = text.encode("utf-8") + b"\0"
        status = self.lib.espeak_Synth(encoded, len(encoded), 0, _POS_CHARACTER, 0, _CHARS_UTF8, None, None)
        if status != 0:
            raise EspeakError(f"espeak_Synth failed with status {status} for voice {voice!r}")
        self.lib.espeak_Synchronize()
        if not self._chunks:
            raise EspeakError(f"espeak-ng produced no audio for {text!r} with voice {voice!r}")
        return np.concatenate(self._chunks).astype(np.float32) / 32768.0


@lru_cache(maxsize=1)
def engine() -> _Engine:
    return _Engine()


def phonemize(text: str, language: str) -> str:
    """IPA phonemes with stress marks, punctuation kept in place (what Kokoro expects)."""
    parts = [part.strip() for part in _PUNCTUATION.split(text.strip()) if part.strip()]
    spoken = (part if _PUNCTUATION.fullmatch(part) else " " + engine().phonemes(part, language) for part in parts)
    return "".join(spoken).strip()


def synthesize(text: str, voice: str, rate_wpm: int = 160, pitch: int = 50) -> tuple[np.ndarray, int]:
    """Formant-synthesized speech for ``voice`` (e.g. ``en+m3``) as float32 in [-1, 1] and its rate.

    Runs in a fresh process, so that the same arguments give the same samples every time."""
    command = [sys.executable, "-m", __name__, "--voice", voice, "--rate-wpm", str(rate_wpm), "--pitch", str(pitch)]
    result = subprocess.run(command, input=text.encode("utf-8"), capture_output=True)
    if result.returncode != 0:
        raise EspeakError(
            f"espeak-ng synthesis of {text!r} with voice {voice!r} failed: {result.stderr.decode(errors='replace').strip().removeprefix('error: ')}"
        )
    with np.load(io.BytesIO(result.stdout)) as saved:
        return saved["audio"], int(saved["rate"])


def _main(argv: list[str] | None = None) -> int:
    """The child of :func:`synthesize`: text on stdin, an ``.npz`` (audio, rate) on stdout."""
    parser = argparse.ArgumentParser(description="one espeak-ng utterance in this fresh process (used by synthesize)")
    parser.add_argument("--voice", required=True)
    parser.add_argument("--rate-wpm", type=int, required=True)
    parser.add_argument("--pitch", type=int, required=True)
    args = parser.parse_args(argv)
    try:
        audio = engine().synthesize(sys.stdin.buffer.read().decode("utf-8"), args.voice, args.rate_wpm, args.pitch)
    except EspeakError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    buffer = io.BytesIO()
    np.savez(buffer, audio=audio, rate=engine().sample_rate)
    sys.stdout.buffer.write(buffer.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
