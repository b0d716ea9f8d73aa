import json

import pytest

from extract.manifest import (
    GENDER_ALIASES,
    ManifestError,
    Utterance,
    align_by_id,
    gender_label,
    normalize_gender,
    read_keyed_rows,
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


@pytest.mark.parametrize("value", ["manly woman", "male-to-female", "woman-to-man", "females", "manager", "mannequin", "femaleish"])
def test_no_gender_is_guessed_from_a_prefix(value):
    # the old prefix rules mapped "manly woman" and "male-to-female" to male, "femaleish" to female
    assert gender_label(value) is None
    with pytest.raises(ValueError, match="unrecognised gender value"):
        normalize_gender(value)


def test_every_alias_maps_to_one_of_the_four_labels():
    assert set(GENDER_ALIASES.values()) == {"female", "male", "other", "unknown"}
    assert all(alias == alias.strip().lower() for alias in GENDER_ALIASES)
    assert gender_label("  Female_Feminine ") == "female" and gender_label(None) == "unknown"


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


@pytest.mark.parametrize(
    "field, value, shown",
    [
        ("id", "x\u0000one", "id 'x\\x00one' holds a control character (U+0000 at position 2)"),
        ("id", "a\tb", "id 'a\\tb' holds a control character (U+0009 at position 2)"),
        ("id", "end\n", "id 'end\\n' holds a control character (U+000A at position 4)"),
        ("speaker", "s\u0000", "speaker 's\\x00' holds a control character (U+0000 at position 2)"),
        ("dataset", "\u007fd", "dataset '\\x7fd' holds a control character (U+007F at position 1)"),
    ],
)
def test_a_control_character_in_an_id_or_stored_label_names_file_and_line(tmp_path, field, value, shown):
    """Ids and the labels stored beside the hidden states (HDF5 strings hold no NUL) are printable text."""
    path = tmp_path / "ctrl.jsonl"
    path.write_text(json.dumps(_record(id="ok")) + "\n" + json.dumps(_record(**{field: value})) + "\n")
    with pytest.raises(ManifestError) as error:
        read_manifest(path)
    assert str(error.value).startswith(f"{path}:2: {shown}")
    assert len(str(error.value).splitlines()) == 1


def test_printable_unicode_ids_are_accepted(tmp_path):
    path = tmp_path / "unicode.jsonl"
    path.write_text(json.dumps(_record(id="é/ü 中文 x")) + "\n")
    assert [u.id for u in read_manifest(path)] == ["é/ü 中文 x"]


def test_duplicate_ids_are_rejected(tmp_path):
    path = tmp_path / "dup.jsonl"
    path.write_text(json.dumps(_record()) + "\n" + json.dumps(_record()) + "\n")
    with pytest.raises(ManifestError) as error:
        read_manifest(path)
    assert str(error.value) == f"{path}:2: duplicate id 'u1', first on {path}:1; keep one row per id"
    with pytest.raises(ValueError, match="duplicate id"):
        write_manifest(tmp_path / "out.jsonl", [Utterance(**_record()), Utterance(**_record())])
    assert not (tmp_path / "out.jsonl").exists()


def test_non_utf8_manifest_names_file_and_line(tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes((json.dumps(_record()) + "\n" + json.dumps(_record(id="u2", text="café"), ensure_ascii=False) + "\n").encode("latin-1"))
    with pytest.raises(ManifestError) as error:
        read_manifest(path)
    assert str(error.value).startswith(f"{path}:2: not UTF-8 (byte 0xe9 at position ") and "re-encode the file as UTF-8" in str(error.value)


def test_utf8_byte_order_mark_is_accepted(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(_record()).encode() + b"\r\n")
    assert [u.id for u in read_manifest(path)] == ["u1"]


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_empty_manifest_is_an_error(tmp_path, content):
    path = tmp_path / "empty.jsonl"
    path.write_text(content)
    with pytest.raises(ManifestError, match="empty.jsonl: holds no utterances \\(empty file\\)"):
        read_manifest(path)


def test_directory_or_missing_file_given_as_manifest(tmp_path):
    with pytest.raises(ManifestError, match=f"{tmp_path}: is a directory; give the path of a file"):
        read_manifest(tmp_path)
    with pytest.raises(ManifestError, match="nope.jsonl: no such file"):
        read_manifest(tmp_path / "nope.jsonl")


def _rows(tmp_path, *rows):
    path = tmp_path / "hyps.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"id": "b", "hypothesis": None}, "hyps.jsonl:2: hypothesis must be a string, got null"),
        ({"id": "b", "hypothesis": 3}, "hyps.jsonl:2: hypothesis must be a string, got int 3"),
        ({"id": "b"}, "hyps.jsonl:2: missing key(s) hypothesis"),
        ({"hypothesis": "x"}, "hyps.jsonl:2: missing key(s) id"),
        ({"id": 7, "hypothesis": "x"}, "hyps.jsonl:2: id must be a string, got int 7"),
        ({"id": "", "hypothesis": "x"}, "hyps.jsonl:2: empty id"),
    ],
)
def test_keyed_reader_refuses_bad_rows(tmp_path, bad, message):
    path = _rows(tmp_path, {"id": "a", "hypothesis": "ok"}, bad)
    with pytest.raises(ManifestError) as error:
        read_keyed_rows(path, required=("hypothesis",), strings=("hypothesis",), what="hypothesis row")
    assert str(error.value).endswith(message)


def test_keyed_reader_names_both_lines_of_a_duplicate(tmp_path):
    path = _rows(tmp_path, {"id": "a", "hypothesis": "x"}, {"id": "b", "hypothesis": "y"}, {"id": "a", "hypothesis": "z"})
    with pytest.raises(ManifestError) as error:
        read_keyed_rows(path, required=("hypothesis",))
    assert str(error.value) == f"{path}:3: duplicate id 'a', first on {path}:1; keep one row per id"


def test_align_by_id_orders_rows_and_returns_the_unmatched(tmp_path):
    rows = read_keyed_rows(_rows(tmp_path, {"id": "c", "h": 3}, {"id": "a", "h": 1}, {"id": "x", "h": 0}, {"id": "b", "h": 2}))
    aligned, unmatched = align_by_id(rows, ["a", "b", "c"], "hyps.jsonl")
    assert [row["h"] for row in aligned] == [1, 2, 3] and unmatched == ["x"]
    with pytest.raises(ManifestError, match="hyps.jsonl: no row for 2 of 3 expected id\\(s\\), e.g. \\['d', 'e'\\]"):
        align_by_id(rows, ["a", "d", "e"], "hyps.jsonl")
