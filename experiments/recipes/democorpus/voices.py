"""The demo corpus' synthetic voices: which engine, which voice, which gender label, which languages.

Sources that work offline here: Kokoro-82M (four female ``jf_*`` styles and one male ``jm_kumo``)
and espeak-ng's formant variants. Measured with the bundled whisper-base (see the corpus card):

- Kokoro speaks English and Spanish from espeak-ng phonemes at 0-12 % WER.
- espeak-ng's English variants are at 10-15 % WER, but its Spanish is unintelligible to
  whisper-base (44-167 % WER, with loops), and its female variants f3/f4 are far worse than the
  male ones even in English. So espeak-ng voices speak English only, f2/f5 and m2/m4, two on each
  side, so that engine and gender are not confounded (f1 measured 10-34 % across seeds: left out).
- Kokoro ships one male style; three more male voices are blends of 80 % ``jm_kumo`` with 20 % of
  a female style (median F0 115-125 Hz against 100 Hz for kumo and 240-320 Hz for the female
  styles): distinct voices, male-sounding, and four Kokoro voices on each side.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ESPEAK_LANGUAGES = {"en": "en-us", "es": "es"}


@dataclass(frozen=True)
class Voice:
    name: str  # the speaker id in manifests
    engine: str  # "kokoro" or "espeak"
    style: tuple[tuple[str, float], ...] | str  # Kokoro style blend, or espeak-ng variant
    gender: str
    languages: tuple[str, ...] = ("en", "es")
    pitch: int = 50  # espeak-ng pitch parameter (0-99); unused by Kokoro

    def synthesize(self, text: str, language: str, speed: float) -> tuple[np.ndarray, int]:
        if language not in self.languages:
            raise ValueError(f"voice {self.name} does not speak {language!r} (only {self.languages})")
        espeak_language = ESPEAK_LANGUAGES[language]
        if self.engine == "kokoro":
            from experiments.recipes.democorpus import kokoro

            return kokoro.synthesize(text, self.style, espeak_language, speed=speed)
        from experiments.recipes.democorpus import espeak

        return espeak.synthesize(text, f"{espeak_language}+{self.style}", rate_wpm=int(round(150 * speed)), pitch=self.pitch)

    def describe(self) -> str:
        if self.engine == "espeak":
            return f"espeak-ng {self.style}"
        return " + ".join(f"{weight:.0%} {name}" for name, weight in self.style)


def _kokoro(name: str, gender: str, *mixture: tuple[str, float]) -> Voice:
    return Voice(f"kokoro-{name}", "kokoro", tuple(mixture), gender)


VOICES = (
    _kokoro("jf_alpha", "female", ("jf_alpha", 1.0)),
    _kokoro("jf_gongitsune", "female", ("jf_gongitsune", 1.0)),
    _kokoro("jf_nezumi", "female", ("jf_nezumi", 1.0)),
    _kokoro("jf_tebukuro", "female", ("jf_tebukuro", 1.0)),
    _kokoro("jm_kumo", "male", ("jm_kumo", 1.0)),
    _kokoro("jm_kumo-alpha", "male", ("jm_kumo", 0.8), ("jf_alpha", 0.2)),
    _kokoro("jm_kumo-gongitsune", "male", ("jm_kumo", 0.8), ("jf_gongitsune", 0.2)),
    _kokoro("jm_kumo-nezumi", "male", ("jm_kumo", 0.8), ("jf_nezumi", 0.2)),
    Voice("espeak-f2", "espeak", "f2", "female", languages=("en",), pitch=60),
    Voice("espeak-f5", "espeak", "f5", "female", languages=("en",), pitch=60),
    Voice("espeak-m2", "espeak", "m2", "male", languages=("en",), pitch=40),
    Voice("espeak-m4", "espeak", "m4", "male", languages=("en",), pitch=40),
)

# the trimmed corpus (``experiments.demo --trim`` and the corpus tests): per gender, 3 Kokoro voices and 1 espeak-ng voice
TRIM_NAMES = (
    "kokoro-jf_alpha",
    "kokoro-jf_nezumi",
    "kokoro-jf_tebukuro",
    "espeak-f2",
    "kokoro-jm_kumo",
    "kokoro-jm_kumo-alpha",
    "kokoro-jm_kumo-nezumi",
    "espeak-m2",
)
TRIM_VOICES = tuple(v for v in VOICES if v.name in TRIM_NAMES)
