"""Per-utterance ASR error counts under one scoring setup for every model.

A setup (:class:`Scoring`) names the normalizer and, for the languages scored by characters,
whether spaces count:

- ``normalizer``: ``whisper`` (default: Whisper's English normalizer for English, its basic
  normalizer for other languages, applied to every model), ``basic`` (the basic one for every
  language) or ``none`` (Unicode NFC and whitespace only). Attanasio et al.'s published code
  normalized Whisper's transcripts only and scored SeamlessM4T's raw; to reproduce that, score
  Whisper with ``whisper`` and SeamlessM4T with ``none``.
- ``cer_spaces``: ``drop`` (default) scores characters without spaces, so the spaces a normalizer
  leaves where punctuation was in an unspaced script are not counted; ``keep`` counts them as
  jiwer's ``cer`` does (the published code).

Unicode NFC comes first; Russian and Serbian are then transliterated to Cyrillic with cyrtranslit
(the library the published code used; lower-cased first unless ``normalizer`` is ``none``), so a
Latin-script hypothesis is not counted wrong for its script. WER everywhere except :data:`CER_LANGUAGES`. Corpus-level rates are summed errors over
summed reference lengths, so the counts here are what every group metric sums.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import version

# Yoruba and Japanese as in Radford et al. 2022 and Attanasio et al. 2024; the others are written
# without spaces between words, so a "word" error rate would count whole sentences.
CER_LANGUAGES = frozenset({"ja", "yo", "zh", "yue", "th", "lo", "km", "my", "bo"})
TRANSLITERATED_LANGUAGES = frozenset({"ru", "sr"})
NORMALIZERS = ("whisper", "basic", "none")
CER_SPACES = ("drop", "keep")


def primary_language(language: str) -> str:
    """``zh-CN``, ``zh_TW`` and ``ZH`` are all ``zh``: the scoring rules key on the primary subtag."""
    return re.split(r"[-_]", language, maxsplit=1)[0].lower()


def to_cyrillic(text: str, language: str) -> str:
    """Latin letters of a Russian or Serbian text in Cyrillic (cyrtranslit); Cyrillic text and other
    characters unchanged."""
    import cyrtranslit

    return cyrtranslit.to_cyrillic(text, primary_language(language))


@lru_cache(maxsize=2)
def _whisper_normalizer(english: bool):
    if english:
        from whisper_normalizer.english import EnglishTextNormalizer

        return EnglishTextNormalizer()
    from whisper_normalizer.basic import BasicTextNormalizer

    return BasicTextNormalizer()


def _has_letter_or_digit(token: str) -> bool:
    return any(character.isalnum() for character in token)


def _apply_normalizer(text: str, language: str, normalizer: str) -> str:
    """The chosen normalizer, then tokens without a letter or digit dropped. Whisper's English
    normalizer removes a period by consuming the character after it, so in a run of periods every
    other one survives, and its last pass strips symbols only when a character follows: "..." and
    "I was thinking..." come out as "." and "i was thinking ." (a one-token reference "." scored a
    600 % WER). Such a token is never a word, whatever left it."""
    if normalizer == "none":
        return text
    text = _whisper_normalizer(normalizer == "whisper" and primary_language(language) == "en")(text)
    return " ".join(token for token in text.split() if _has_letter_or_digit(token))


def normalize(text: str, language: str, normalizer: str = "whisper") -> str:
    if normalizer not in NORMALIZERS:
        raise ValueError(f"normalizer {normalizer!r}: expected one of {', '.join(NORMALIZERS)}")
    text = unicodedata.normalize("NFC", text)
    if primary_language(language) in TRANSLITERATED_LANGUAGES:
        # lower case first when the normalizer lower-cases anyway: cyrtranslit leaves a capitalised
        # Russian digraph half Latin ("Shapka" -> "Shапка", "shapka" -> "шапка")
        text = to_cyrillic(text if normalizer == "none" else text.lower(), language)
    return " ".join(_apply_normalizer(text, language, normalizer).split())


def metric_for(language: str) -> str:
    return "cer" if primary_language(language) in CER_LANGUAGES else "wer"


@dataclass(frozen=True)
class Scoring:
    """How hypotheses are scored: the normalizer and whether CER counts spaces (see the module docstring)."""

    normalizer: str = "whisper"
    cer_spaces: str = "drop"

    def __post_init__(self):
        if self.normalizer not in NORMALIZERS:
            raise ValueError(f"normalizer {self.normalizer!r}: expected one of {', '.join(NORMALIZERS)}")
        if self.cer_spaces not in CER_SPACES:
            raise ValueError(f"cer_spaces {self.cer_spaces!r}: expected one of {', '.join(CER_SPACES)}")

    def record(self, language: str) -> dict:
        """What scored ``language``: metric, normalizer (and the one applied), CER spaces, transliteration."""
        primary = primary_language(language)
        applied = {"none": "none", "basic": "whisper basic"}.get(self.normalizer, "whisper english" if primary == "en" else "whisper basic")
        record = {
            "metric": metric_for(language),
            "normalizer": self.normalizer,
            "normalizer_applied": applied,
            "normalizer_version": None if applied == "none" else f"whisper-normalizer {version('whisper-normalizer')}",
            "cer_spaces": self.cer_spaces if metric_for(language) == "cer" else None,
            "transliteration": None,
        }
        if primary in TRANSLITERATED_LANGUAGES:
            record["transliteration"] = {"library": "cyrtranslit", "version": version("cyrtranslit"), "to": "cyrillic", "language": primary}
        return record


@dataclass(frozen=True)
class ErrorCounts:
    errors: int  # substitutions + deletions + insertions
    reference_length: int  # words (WER) or characters (CER; spaces only with cer_spaces="keep")


def error_counts(reference: str, hypothesis: str, language: str, scoring: Scoring | None = None) -> ErrorCounts:
    """Edit-distance counts after normalization (``scoring`` defaults to :class:`Scoring`'s defaults).
    An empty normalized reference is an error: drop the record first."""
    import jiwer

    scoring = scoring or Scoring()
    reference = normalize(reference, language, scoring.normalizer)
    hypothesis = normalize(hypothesis, language, scoring.normalizer)
    if not reference:
        raise ValueError("reference is empty after normalization")
    if metric_for(language) == "cer":
        if scoring.cer_spaces == "drop":
            reference, hypothesis = reference.replace(" ", ""), hypothesis.replace(" ", "")
        output = jiwer.process_characters(reference, hypothesis)
    else:
        output = jiwer.process_words(reference, hypothesis)
    errors = output.substitutions + output.deletions + output.insertions
    return ErrorCounts(errors=errors, reference_length=output.substitutions + output.deletions + output.hits)


def corpus_error_rate(counts: list[ErrorCounts]) -> float:
    """Summed errors over summed reference length, in percent."""
    total = sum(c.reference_length for c in counts)
    if total == 0:
        raise ValueError("no reference words to score")
    return 100.0 * sum(c.errors for c in counts) / total
