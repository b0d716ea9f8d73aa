import json

import pytest

from extract.manifest import (
    ManifestError,
    Utterance,
    normalize_gender,
    read_manifest,
    write_manifest,
)


@pytest.mark.parametrize(
    "value, expected",
    [
        ("male_masculine", "male"),
        ("female_feminine", "female"),
        ("She", "female"),
        ("He", "male"),
        ("F", "female"),
        ("MALE", "male"),
        ("non-binary", "other"),
        ("They", "other"),
        ("", "unknown"),
        (None, "unknown"),
        ("do_not_wish_to_say", "unknown"),
    ],
)
def test_gender_aliases(value, expected):
    assert normalize_gender(value) == expected


def test_unknown_gender_value_is_an_error():
    with pytest.raises(ValueError, match="unrecognised gender value 'robot'"):
        normalize_gender("robot")


def _record(**overrides):
    record = {"id": "u1", "audio": "a.wav", "language": "en", "text": "hi", "gender": "She", "speaker": "s1"}
    record.update(overrides)
    return record


def test_round_trip_keeps_contract_keys(tmp_path):
    utterances = [
        Utterance(**_record(), split="validation", dataset="demo", offset=1.5, duration=2.0, translation=["ciao", "salve"], extra={"k": 1}),
        Utterance(**_record(id="u2", gender="male")),
    ]
    path = write_manifest(tmp_path / "m.jsonl", utterances)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert set(lines[0]) == {"id", "audio", "offset", "duration", "language", "text", "translation", "gender", "speaker", "split", "dataset", "extra"}
    assert lines[0]["gender"] == "female" and lines[0]["split"] == "dev"
    assert "offset" not in lines[1] and "translation" not in lines[1]
    back = read_manifest(path)
    assert back[0].translation == ["ciao", "salve"] and back[0].offset == 1.5
    assert back[0].audio == str(tmp_path / "a.wav")  # relative paths resolve against the manifest's folder


@pytest.mark.parametrize(
    "line, message",
    [
        ("{not json", "Expecting property name"),
        (json.dumps(_record(gender="robot")), "unrecognised gender value"),
        (json.dumps({k: v for k, v in _record().items() if k != "speaker"}), "missing key(s) speaker"),
        (json.dumps(_record(colour="blue")), "unknown key(s) colour"),
        (json.dumps(_record(duration=-1)), "duration must be a finite number"),
        (json.dumps(_record(split="holdout")), "unrecognised split"),
        (json.dumps(_record(text=3)), "text must be a string"),
        (json.dumps([1, 2]), "expected a JSON object"),
    ],
)
def test_bad_line_names_file_and_line(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(_record(id="ok")) + "\n\n" + line + "\n")
    with pytest.raises(ManifestError) as error:
        read_manifest(path)
    assert error.value.line == 3
    assert f"{path}:3" in str(error.value) and message in str(error.value)


def test_duplicate_ids_are_rejected(tmp_path):
    path = tmp_path / "dup.jsonl"
    path.write_text(json.dumps(_record()) + "\n" + json.dumps(_record()) + "\n")
    with pytest.raises(ManifestError, match="duplicate id 'u1' \\(first on line 1\\)"):
        read_manifest(path)
    with pytest.raises(ValueError, match="duplicate id"):
        write_manifest(tmp_path / "out.jsonl", [Utterance(**_record()), Utterance(**_record())])
    assert not (tmp_path / "out.jsonl").exists()
