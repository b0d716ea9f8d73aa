"""Per-utterance ASR error counts under one normalizer for every model.

Whisper's English normalizer for English, its basic normalizer for other languages, Unicode NFC
first; Russian and Serbian are transliterated to Cyrillic first, so a hypothesis in Latin script is
not counted wrong for its script; WER everywhere except the languages scored by characters. Corpus-level rates are summed
errors over summed reference lengths, so the counts here are what every group metric sums.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from functools import lru_cache

CER_LANGUAGES = frozenset({"ja", "yo"})

# Serbian Latin (Gaj) to Cyrillic (Vuk) is one to one; digraphs first.
_SERBIAN = [("dž", "џ"), ("lj", "љ"), ("nj", "њ"), ("a", "а"), ("b", "б"), ("c", "ц"), ("č", "ч"), ("ć", "ћ"), ("d", "д"),
            ("đ", "ђ"), ("e", "е"), ("f", "ф"), ("g", "г"), ("h", "х"), ("i", "и"), ("j", "ј"), ("k", "к"), ("l", "л"),
            ("m", "м"), ("n", "н"), ("o", "о"), ("p", "п"), ("r", "р"), ("s", "с"), ("š", "ш"), ("t", "т"), ("u", "у"),
            ("v", "в"), ("z", "з"), ("ž", "ж")]
# Russian: common romanisation (longest sequences first); a best effort for Latin-script output.
_RUSSIAN = [("shch", "щ"), ("sch", "щ"), ("zh", "ж"), ("kh", "х"), ("ts", "ц"), ("ch", "ч"), ("sh", "ш"), ("yu", "ю"),
            ("ya", "я"), ("yo", "ё"), ("ye", "е"), ("a", "а"), ("b", "б"), ("v", "в"), ("g", "г"), ("d", "д"), ("e", "е"),
            ("z", "з"), ("i", "и"), ("y", "ы"), ("j", "й"), ("k", "к"), ("l", "л"), ("m", "м"), ("n", "н"), ("o", "о"),
            ("p", "п"), ("r", "р"), ("s", "с"), ("t", "т"), ("u", "у"), ("f", "ф"), ("h", "х"), ("c", "ц"), ("w", "в"),
            ("x", "кс"), ("q", "к"), ("'", "ь")]
_TRANSLITERATIONS = {"sr": _SERBIAN, "ru": _RUSSIAN}


def to_cyrillic(text: str, language: str) -> str:
    """Latin letters of a Russian or Serbian text in Cyrillic; other characters unchanged."""
    table = _TRANSLITERATIONS[language]
    out, index, lowered = [], 0, text.lower()
    while index < len(text):
        for latin, cyrillic in table:
            if lowered.startswith(latin, index):
                out.append(cyrillic.upper() if text[index].isupper() else cyrillic)
                index += len(latin)
                break
        else:
            out.append(text[index])
            index += 1
    return "".join(out)


@lru_cache(maxsize=2)
def _normalizer(english: bool):
    if english:
        from whisper_normalizer.english import EnglishTextNormalizer

        return EnglishTextNormalizer()
    from whisper_normalizer.basic import BasicTextNormalizer

    return BasicTextNormalizer()


def normalize(text: str, language: str) -> str:
    text = unicodedata.normalize("NFC", text)
    if language in _TRANSLITERATIONS:
        text = to_cyrillic(text, language)
    return " ".join(_normalizer(language == "en")(text).split())


def metric_for(language: str) -> str:
    return "cer" if language in CER_LANGUAGES else "wer"


@dataclass(frozen=True)
class ErrorCounts:
    errors: int  # substitutions + deletions + insertions
    reference_length: int  # words (WER) or characters without spaces (CER)


def error_counts(reference: str, hypothesis: str, language: str) -> ErrorCounts:
    """Edit-distance counts after normalization. An empty normalized reference is an error: drop the record first."""
    import jiwer

    reference, hypothesis = normalize(reference, language), normalize(hypothesis, language)
    if not reference:
        raise ValueError("reference is empty after normalization")
    if metric_for(language) == "cer":
        reference, hypothesis = reference.replace(" ", ""), hypothesis.replace(" ", "")
        output = jiwer.process_characters(reference, hypothesis or "")
    else:
        output = jiwer.process_words(reference, hypothesis or "")
    errors = output.substitutions + output.deletions + output.insertions
    return ErrorCounts(errors=errors, reference_length=output.substitutions + output.deletions + output.hits)


def corpus_error_rate(counts: list[ErrorCounts]) -> float:
    """Summed errors over summed reference length, in percent."""
    total = sum(c.reference_length for c in counts)
    if total == 0:
        raise ValueError("no reference words to score")
    return 100.0 * sum(c.errors for c in counts) / total
