import json
import math

import numpy as np
import pytest
import soundfile

from experiments.scoring.dataset_stats import gini, markdown, statistics
from experiments.scoring.vad import filter_speech, silero_detector
from experiments.vad_filter import main as vad_main
from extract.manifest import Utterance, write_manifest


@pytest.mark.parametrize(
    "values, expected",
    [
        ([3, 3, 3], 0.0),
        ([0, 0, 0, 4], 0.75),  # sum |xi - xj| over ordered pairs = 24; / (2 * 4^2 * mean 1)
        ([1, 2, 3], 2 / 9),  # pairs: 1,2,1 -> 8 ordered; / (2 * 9 * 2)
        ([5], 0.0),
    ],
)
def test_gini_by_hand(values, expected):
    assert gini(values) == pytest.approx(expected)


def test_gini_of_nothing_is_undefined_and_negative_counts_are_refused():
    assert math.isnan(gini([]))
    with pytest.raises(ValueError):
        gini([1, -1])


def test_statistics_table_by_hand():
    def u(i, language, gender, speaker, seconds, text):
        return Utterance(id=f"u{i}", audio="x.wav", language=language, text=text, gender=gender, speaker=speaker, dataset="cv", duration=seconds)

    utterances = [
        u(0, "it", "female", "a", 2.0, "uno due"),
        u(1, "it", "female", "a", 4.0, "uno due tre quattro"),
        u(2, "it", "female", "b", 6.0, "uno"),
        u(3, "it", "male", "c", 4.0, "uno due tre"),
        u(4, "es", "male", "d", 1.0, "uno"),
    ]
    rows = statistics(utterances, lambda text: len(text.split()))
    assert [(r["dataset"], r["language"]) for r in rows] == [("cv", "es"), ("cv", "it")]
    it = rows[1]
    assert it["records"] == 4
    assert it["seconds_mean"] == pytest.approx(4.0) and it["seconds_sd"] == pytest.approx(np.std([2, 4, 6, 4], ddof=1))
    assert it["tokens_mean"] == pytest.approx(2.5)
    assert (it["speakers_female"], it["speakers_male"], it["speakers_other"]) == (2, 1, 0)
    assert it["gini_female"] == pytest.approx(gini([2, 1])) == pytest.approx(1 / 6)
    assert it["gini_male"] == 0.0 and math.isnan(it["gini_other"])
    table = markdown(rows)
    assert "| cv | it | 4 | 4.00 ± 1.63 | 2.50 ± 1.29 | 2 | 0.17 | 1 | 0.00 |" in table
    assert "other" not in table  # no group with speakers, no column


def _write(path, samples):
    soundfile.write(path, samples, 16_000, subtype="FLOAT")
    return str(path)


def test_filter_keeps_speech_drops_silence_and_lists_unreadable(tmp_path):
    loud = np.full(16_000, 0.5, dtype=np.float32)
    utterances = [
        Utterance(id="speech", audio=_write(tmp_path / "a.wav", loud), language="en", text="x", gender="female", speaker="a"),
        Utterance(id="quiet", audio=_write(tmp_path / "b.wav", loud * 1e-3), language="en", text="x", gender="male", speaker="b"),
        Utterance(id="gone", audio=str(tmp_path / "missing.wav"), language="en", text="x", gender="male", speaker="c"),
    ]

    def detector(samples):  # stand-in: loud seconds
        return float(np.mean(np.abs(samples) > 0.1) * len(samples) / 16_000)

    kept, dropped = filter_speech(utterances, detector, min_speech_seconds=0.3, show_progress=False)
    assert [u.id for u in kept] == ["speech"]
    assert [(d["id"], d["reason"]) for d in dropped] == [("quiet", "too little speech"), ("gone", "AudioMissingError")]
    assert dropped[0]["speech_seconds"] == 0.0


def test_silero_finds_no_speech_in_silence_or_a_pure_tone(tmp_path, tone):
    detector = silero_detector()
    assert detector(np.zeros(32_000, dtype=np.float32)) == 0.0
    samples, _ = soundfile.read(tone("t.wav", seconds=2.0), dtype="float32")
    assert detector(samples) < 0.3


def test_vad_cli_writes_kept_manifest_and_dropped_list(tmp_path):
    noise = np.random.default_rng(0).normal(0, 0.01, 32_000).astype(np.float32)  # audible, but no speech
    silent = _write(tmp_path / "s.wav", noise)
    manifest = write_manifest(tmp_path / "m.jsonl", [Utterance(id="s", audio=silent, language="en", text="x", gender="female", speaker="a")])
    assert vad_main(["--manifest", str(manifest), "--out", str(tmp_path / "kept.jsonl"), "--quiet"]) == 2  # nothing kept
    assert not (tmp_path / "kept.jsonl").exists()  # no empty manifest for a later stage to trip on
    dropped = [json.loads(line) for line in (tmp_path / "kept.jsonl.dropped.jsonl").read_text().splitlines()]
    assert [(d["id"], d["reason"]) for d in dropped] == [("s", "too little speech")]
