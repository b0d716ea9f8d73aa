"""experiments.asr_gap's hypothesis reader: the shared id-keyed reader's refusals, each one line and exit 2."""

import json

import pytest

from experiments.asr_gap import main
from experiments.scoring.gaps import read_hypotheses
from extract.manifest import ManifestError

ROW = {"id": "u1", "reference": "the cat sat", "hypothesis": "the cat sat", "gender": "She", "speaker": "s1", "language": "en"}


def _write(tmp_path, content):
    path = tmp_path / "h.jsonl"
    path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content, encoding="utf-8")
    return path


def _jsonl(*rows):
    return "".join(json.dumps(r) + "\n" for r in rows)


def test_rows_are_read_with_gender_normalised(tmp_path):
    rows = read_hypotheses(_write(tmp_path, _jsonl(ROW, {**ROW, "id": "u2", "gender": "male_masculine"})))
    assert [(r["id"], r["gender"]) for r in rows] == [("u1", "female"), ("u2", "male")]


@pytest.mark.parametrize(
    "content, message",
    [
        # a duplicated row used to be counted twice in the group's rate
        (_jsonl(ROW, {**ROW, "id": "u2"}, ROW), "h.jsonl:3: duplicate id 'u1', first on {dir}/h.jsonl:1"),
        (_jsonl(ROW, {**ROW, "id": "u2", "hypothesis": None}), "h.jsonl:2: hypothesis must be a string, got null"),
        (_jsonl({**ROW, "hypothesis": 42}), "h.jsonl:1: hypothesis must be a string, got int 42"),
        (_jsonl({**ROW, "reference": ["a"]}), "h.jsonl:1: reference must be a string, got list"),
        (_jsonl({k: v for k, v in ROW.items() if k != "hypothesis"}), "h.jsonl:1: missing key(s) hypothesis"),
        (_jsonl({k: v for k, v in ROW.items() if k != "id"}), "h.jsonl:1: missing key(s) id"),
        (_jsonl({**ROW, "gender": "male-to-female"}), "h.jsonl:1: unrecognised gender value 'male-to-female'"),
        ("", "h.jsonl: holds no hypothesis rows (empty file)"),
        (_jsonl({**ROW, "hypothesis": "caf\u00e9"}).replace("\\u00e9", "\u00e9").encode("latin-1"), "h.jsonl:1: not UTF-8 (byte 0xe9"),
    ],
)
def test_bad_hypothesis_files(tmp_path, capsys, content, message):
    path = _write(tmp_path, content)
    with pytest.raises(ManifestError) as error:
        read_hypotheses(path)
    assert message.format(dir=tmp_path) in str(error.value)
    assert main(["--hypotheses", str(path), "--out", str(tmp_path / "o.json"), "--iterations", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and message.format(dir=tmp_path) in err


def test_directory_given_as_hypotheses(tmp_path, capsys):
    assert main(["--hypotheses", str(tmp_path), "--out", str(tmp_path / "o.json")]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path}: is a directory; give the path of a file\n"
