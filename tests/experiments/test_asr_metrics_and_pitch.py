import numpy as np
import pytest

from experiments.recipes.democorpus.pitch import median_f0
from experiments.scoring.asr_metrics import ErrorCounts, Scoring, corpus_error_rate, error_counts, metric_for, normalize


def test_english_normalizer_and_counts():
    assert normalize("Mr. Smith's colour!", "en") == "mister smith is color"
    # "the cat sat" vs "a cat sat down": 1 substitution + 1 insertion over 3 reference words
    assert error_counts("The cat sat.", "a cat sat down", "en") == ErrorCounts(errors=2, reference_length=3)


def test_basic_normalizer_for_other_languages_and_cer():
    assert normalize("¿Puedes enviarme el informe?", "es") == "puedes enviarme el informe"
    assert metric_for("ja") == "cer" and metric_for("es") == "wer"
    assert error_counts("ねこです", "ねこでした", "ja") == ErrorCounts(errors=2, reference_length=4)


def test_corpus_rate_sums_counts_not_rates():
    counts = [ErrorCounts(1, 2), ErrorCounts(0, 8)]
    assert corpus_error_rate(counts) == pytest.approx(10.0)  # not the mean of 50 % and 0 %
    with pytest.raises(ValueError, match="empty after normalization"):
        error_counts("[noise] (uh)", "x", "en")


@pytest.mark.parametrize("text", ["...", "I was thinking...", "Well…", "It costs $", "So . . ."])
def test_no_token_without_a_letter_or_digit_survives_the_english_normalizer(text):
    # Whisper's English normalizer turns "..." into "." and "I was thinking..." into "i was thinking ."
    assert all(any(c.isalnum() for c in token) for token in normalize(text, "en").split())


def test_ellipses_neither_empty_nor_inflate_a_reference():
    assert normalize("...", "en") == "" and normalize("I was thinking...", "en") == "i was thinking"
    assert error_counts("I was thinking...", "I was thinking", "en") == ErrorCounts(errors=0, reference_length=3)
    assert normalize("It costs 3.5 dollars.", "en") == "it costs $3.5"  # a decimal point stays


@pytest.mark.parametrize("language", ["ja", "yo", "zh", "zh-CN", "zh_TW", "yue", "th", "lo", "km", "my", "bo"])
def test_unspaced_scripts_and_yoruba_are_scored_by_characters(language):
    assert metric_for(language) == "cer"


@pytest.mark.parametrize("language", ["en", "ko", "vi", "sr-Latn", "ru"])
def test_spaced_scripts_are_scored_by_words(language):
    assert metric_for(language) == "wer"


def test_chinese_cer_by_hand():
    # one substituted character of four; the full stop is not a character to transcribe
    assert error_counts("我喜欢猫。", "我喜欢狗", "zh-CN") == ErrorCounts(errors=1, reference_length=4)


def test_cer_with_and_without_spaces_on_a_yoruba_pair():
    import jiwer

    reference, hypothesis = "ọmọ mi dé", "ọmọmi dé"
    # without spaces the characters agree; with them one space is deleted of 9 characters, as jiwer's cer counts
    assert error_counts(reference, hypothesis, "yo") == ErrorCounts(errors=0, reference_length=7)
    kept = error_counts(reference, hypothesis, "yo", Scoring(cer_spaces="keep"))
    assert kept == ErrorCounts(errors=1, reference_length=9)
    assert kept.errors / kept.reference_length == pytest.approx(jiwer.cer(reference, hypothesis))


def test_normalizer_options():
    text = "  Mr. Smith's colour!  "
    assert normalize(text, "en", "whisper") == "mister smith is color"
    assert normalize(text, "en", "basic") == "mr smith s colour"
    assert normalize(text, "en", "none") == "Mr. Smith's colour!"
    assert error_counts("The cat sat.", "the cat sat", "en", Scoring("none")) == ErrorCounts(errors=2, reference_length=3)
    assert error_counts("The cat sat.", "the cat sat", "en", Scoring("basic")) == ErrorCounts(errors=0, reference_length=3)
    with pytest.raises(ValueError, match="normalizer 'nfc'"):
        Scoring("nfc")
    with pytest.raises(ValueError, match="cer_spaces 'ignore'"):
        Scoring(cer_spaces="ignore")


def test_russian_and_serbian_are_transliterated_by_cyrtranslit():
    assert normalize("otsutstvie", "ru") == "отсутствие"  # the old hand rules gave "оцуцтвие"
    assert normalize("Shapka", "ru") == "шапка"
    assert normalize("Đorđe Džaković, ljubav!", "sr") == "ђорђе џаковић љубав"
    assert error_counts("Отсутствие шапки", "otsutstvie shapki", "ru") == ErrorCounts(errors=0, reference_length=2)


def test_scoring_record_names_what_was_used():
    from importlib.metadata import version

    russian = Scoring().record("ru")
    assert russian["metric"] == "wer" and russian["normalizer"] == "whisper" and russian["normalizer_applied"] == "whisper basic"
    assert russian["normalizer_version"] == f"whisper-normalizer {version('whisper-normalizer')}"
    assert russian["transliteration"] == {"library": "cyrtranslit", "version": version("cyrtranslit"), "to": "cyrillic", "language": "ru"}
    assert Scoring().record("en")["normalizer_applied"] == "whisper english" and Scoring().record("en")["cer_spaces"] is None
    yoruba = Scoring("none", "keep").record("yo")
    assert yoruba["cer_spaces"] == "keep" and yoruba["normalizer_applied"] == "none" and yoruba["normalizer_version"] is None
    assert yoruba["transliteration"] is None


@pytest.mark.parametrize("f0", [95.0, 130.0, 210.0, 290.0])
def test_median_f0_of_a_harmonic_signal(f0):
    rate = 16_000
    t = np.arange(rate) / rate
    signal = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, 6))
    assert median_f0(signal, rate) == pytest.approx(f0, rel=0.02)


def test_median_f0_of_noise_or_silence_is_nan():
    assert np.isnan(median_f0(np.zeros(16_000), 16_000))
    assert np.isnan(median_f0(np.zeros(100), 16_000))
