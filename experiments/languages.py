"""Language codes: the manifests use ISO 639-1 (``en``); SeamlessM4T wants ISO 639-3 (``eng``) and
NLLB (ZeroSwot's decoder) wants FLORES-200 codes (``spa_Latn``)."""

from __future__ import annotations

import re

# ISO 639-1 -> (SeamlessM4T v2 code, NLLB/FLORES-200 code). Covers the languages of Common Voice,
# Fleurs and VoxPopuli in Attanasio et al. 2024 and the MuST-C / MuST-SHE targets; a code that is
# already in a model's own format passes through unchanged.
LANGUAGE_CODES: dict[str, tuple[str, str]] = {
    "ar": ("arb", "arb_Arab"), "ca": ("cat", "cat_Latn"), "cs": ("ces", "ces_Latn"), "de": ("deu", "deu_Latn"),
    "en": ("eng", "eng_Latn"), "es": ("spa", "spa_Latn"), "et": ("est", "est_Latn"), "fi": ("fin", "fin_Latn"),
    "fr": ("fra", "fra_Latn"), "hr": ("hrv", "hrv_Latn"), "hu": ("hun", "hun_Latn"), "it": ("ita", "ita_Latn"),
    "ja": ("jpn", "jpn_Jpan"), "lt": ("lit", "lit_Latn"), "nl": ("nld", "nld_Latn"), "pl": ("pol", "pol_Latn"),
    "pt": ("por", "por_Latn"), "ro": ("ron", "ron_Latn"), "ru": ("rus", "rus_Cyrl"), "sk": ("slk", "slk_Latn"),
    "sl": ("slv", "slv_Latn"), "sr": ("srp", "srp_Cyrl"), "sv": ("swe", "swe_Latn"), "sw": ("swh", "swh_Latn"),
    "tr": ("tur", "tur_Latn"), "uk": ("ukr", "ukr_Cyrl"), "yo": ("yor", "yor_Latn"), "zh": ("cmn", "zho_Hans"),
}


class LanguageCodeError(ValueError):
    pass


def _code(language: str, own_format: str, column: int, model: str, example: str) -> str:
    """``language`` if already in the model's format, else its entry in ``LANGUAGE_CODES``."""
    if re.fullmatch(own_format, language):
        return language
    if language not in LANGUAGE_CODES:
        raise LanguageCodeError(f"no {model} code known for {language!r}: pass the {example} instead")
    return LANGUAGE_CODES[language][column]


def seamless_code(language: str) -> str:
    return _code(language, r"[a-z]{3}", 0, "SeamlessM4T", "3-letter code (e.g. 'spa')")


def nllb_code(language: str) -> str:
    return _code(language, r"[a-z]{3}_[A-Z][a-z]{3}", 1, "NLLB", "FLORES-200 code (e.g. 'spa_Latn')")
