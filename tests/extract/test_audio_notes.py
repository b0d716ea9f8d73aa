"""What loading changed in the audio is recorded per utterance (store and transcription rows) and counted."""

import json

import numpy as np
import soundfile

from extract.audio import SAMPLE_RATE
from extract.families import tiny_extractor
from extract.manifest import write_manifest
from extract.store import ShardReader
from tests.corpus import utterance


def _noted_corpus(tmp_path):
    """u0 clean, u1 longer than the maximum, u2 truncated after its header, u3 float samples up to 2.5."""
    rng = np.random.default_rng(0)
    folder = tmp_path / "audio"
    folder.mkdir()
    soundfile.write(folder / "u0.wav", (0.1 * rng.standard_normal(SAMPLE_RATE)).astype(np.float32), SAMPLE_RATE)
    soundfile.write(folder / "u1.wav", (0.1 * rng.standard_normal(3 * SAMPLE_RATE)).astype(np.float32), SAMPLE_RATE)
    soundfile.write(folder / "u2.wav", (0.1 * rng.standard_normal(SAMPLE_RATE)).astype(np.float32), SAMPLE_RATE, subtype="PCM_16")
    with open(folder / "u2.wav", "r+b") as handle:
        handle.truncate(44 + SAMPLE_RATE)  # half of the 16-bit samples its header announces
    loud = (0.1 * rng.standard_normal(SAMPLE_RATE)).astype(np.float32)
    loud[100] = 2.5
    soundfile.write(folder / "u3.wav", loud, SAMPLE_RATE, subtype="FLOAT")
    return [utterance(i, folder / f"u{i}.wav") for i in range(4)]


EXPECTED = {
    "u1": {"trimmed": {"from_seconds": 3.0, "to_seconds": 2.0}},
    "u2": {"shorter_than_header": {"header_seconds": 1.0, "read_seconds": 0.5}},
    "u3": {"outside_unit_range": {"peak": 2.5}},
}


def test_extraction_records_audio_notes_in_the_store_and_counts_them(tmp_path, monkeypatch, capsys):
    from experiments import extract as cli

    manifest = write_manifest(tmp_path / "m.jsonl", _noted_corpus(tmp_path))
    monkeypatch.setattr("extract.spec.load_extractor", lambda spec, **options: tiny_extractor("whisper"))
    argv = ["--family", "whisper", "--manifest", str(manifest), "--sites", "encoder.final", "--out", str(tmp_path / "s"), "--quiet"]
    argv += ["--max-seconds", "2", "--utterances-per-part", "2"]
    assert cli.main(argv) == 0
    summary = capsys.readouterr().out
    assert "audio notes: 1 outside_unit_range, 1 shorter_than_header, 1 trimmed" in summary
    reader = ShardReader(tmp_path / "s")
    assert len(reader) == 4 and reader.audio_notes() == EXPECTED
    assert cli.main(argv) == 0  # resumed: the notes come from the parts
    assert "audio notes: 1 outside_unit_range, 1 shorter_than_header, 1 trimmed" in capsys.readouterr().out


def test_transcription_rows_carry_audio_notes(tmp_path):
    from extract.families.s2t import S2TGenerator
    from extract.runner import run_transcription

    class IdTokenizer:
        unk_token_id = 3

        def batch_decode(self, tokens, skip_special_tokens=True):
            return [" ".join(f"t{i}" for i in row) for row in tokens.tolist()]

        def convert_tokens_to_ids(self, token):
            return 42

    generator = S2TGenerator(tiny_extractor("s2t"), IdTokenizer(), max_new_tokens=2)
    out = tmp_path / "hyps.jsonl"
    written, skipped, notes = run_transcription(
        generator, _noted_corpus(tmp_path), out, "asr", None, "tiny", batch_seconds=5.0, max_seconds=2.0, show_progress=False
    )
    assert written == 4 and not skipped and notes == EXPECTED
    rows = {row["id"]: row for row in map(json.loads, out.read_text().splitlines())}
    assert {key: row["audio_notes"] for key, row in rows.items() if "audio_notes" in row} == EXPECTED
    assert "audio_notes" not in rows["u0"]
