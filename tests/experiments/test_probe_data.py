"""``experiments.probe_data``: Fucci et al. 2025's probe data (train and dev drawn from disjoint
speakers of one manifest, every segment of the test manifests as test), counts by hand, refusals."""

import pytest

from experiments.probe_data import main, sample_probe_data
from extract.manifest import Utterance, read_manifest, write_manifest


def _rows(prefix: str, speakers: int, per_speaker: int) -> list[Utterance]:
    return [
        Utterance(f"{prefix}{gender[0]}{s}-{k}", f"{prefix}.wav", "en", "text", gender, f"{prefix}{gender[0]}{s}", dataset="must_c")
        for gender in ("female", "male")
        for s in range(speakers)
        for k in range(per_speaker)
    ]


def test_train_and_dev_come_from_disjoint_speakers_in_the_counts_asked(tmp_path, capsys):
    write_manifest(tmp_path / "train.jsonl", _rows("t", speakers=10, per_speaker=10))
    write_manifest(tmp_path / "generic.jsonl", _rows("g", speakers=2, per_speaker=3)[:9])  # unbalanced: 6 female, 3 male
    argv = ["--from", tmp_path / "train.jsonl", "--train", "40,44", "--dev", "10,10", "--test", tmp_path / "generic.jsonl", "--out", tmp_path / "p.jsonl"]
    assert main([str(a) for a in argv]) == 0
    assert "train 40 female + 44 male; dev 10 female + 10 male; test 6 female + 3 male" in capsys.readouterr().out
    rows = read_manifest(tmp_path / "p.jsonl")
    by_split = {split: [r for r in rows if r.split == split] for split in ("train", "dev", "test")}
    assert not {r.speaker for r in by_split["train"]} & {r.speaker for r in by_split["dev"]}
    assert {r.speaker for r in by_split["dev"] if r.gender == "female"} and len({r.speaker for r in by_split["dev"]}) == 4  # 10 x 10/50 per gender
    assert [r.id for r in by_split["test"]] == [r.id for r in read_manifest(tmp_path / "generic.jsonl")]
    again = sample_probe_data(read_manifest(tmp_path / "train.jsonl"), (40, 44), (10, 10), [], seed=0)
    assert [r.id for r in again] == [r.id for r in rows if r.split != "test"]  # seeded


def test_a_shared_speaker_or_too_large_a_count_is_one_line(tmp_path, capsys):
    pool = _rows("t", speakers=5, per_speaker=4)
    with pytest.raises(ValueError, match=r"--train asks for 30 female segments; the 4 female speakers drawn for train hold 16: ask for fewer"):
        sample_probe_data(pool, (30, 10), (2, 2), [])
    with pytest.raises(ValueError, match=r"test segment t-f0-x: its speaker tf0 is also in the train/dev sample"):
        sample_probe_data(pool, (16, 16), (4, 4), [Utterance("t-f0-x", "a.wav", "en", "x", "female", "tf0")])
    write_manifest(tmp_path / "m.jsonl", pool)
    with pytest.raises(SystemExit) as usage:
        main(["--from", str(tmp_path / "m.jsonl"), "--train", "10", "--dev", "2,2", "--out", str(tmp_path / "o.jsonl")])
    assert usage.value.code == 2
    assert "expected FEMALE,MALE segment counts" in capsys.readouterr().err
