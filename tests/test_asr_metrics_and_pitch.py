import numpy as np
import pytest

from experiments.asr_metrics import ErrorCounts, corpus_error_rate, error_counts, metric_for, normalize
from experiments.democorpus.pitch import median_f0


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


@pytest.mark.parametrize("f0", [95.0, 130.0, 210.0, 290.0])
def test_median_f0_of_a_harmonic_signal(f0):
    rate = 16_000
    t = np.arange(rate) / rate
    signal = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, 6))
    assert median_f0(signal, rate) == pytest.approx(f0, rel=0.02)


def test_median_f0_of_noise_or_silence_is_nan():
    assert np.isnan(median_f0(np.zeros(16_000), 16_000))
    assert np.isnan(median_f0(np.zeros(100), 16_000))
