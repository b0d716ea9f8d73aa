"""Each adapter on a small fixture written in the corpus' native format."""

import json
from pathlib import Path

import pytest

from extract import corpora
from extract.manifest import ManifestError


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_common_voice(tmp_path, tone):
    tone("cv/clips/common_voice_it_1.mp3.wav")
    tone("cv/clips/common_voice_it_2.wav")
    tsv = _write(
        tmp_path / "cv/test.tsv",
        "client_id\tpath\tsentence\tup_votes\tdown_votes\tage\tgender\taccents\tlocale\n"
        "abc\tcommon_voice_it_1.mp3.wav\tCiao a tutti.\t2\t0\ttwenties\tmale_masculine\t\tit\n"
        "def\tcommon_voice_it_2.wav\tBuongiorno.\t2\t0\t\tfemale_feminine\t\tit\n"
        "ghi\tcommon_voice_it_3.wav\tManca.\t2\t0\t\t\t\tit\n",
    )
    result = corpora.common_voice(tsv, language="it")
    assert [(u.id, u.gender, u.speaker, u.split, u.language) for u in result.utterances] == [
        ("common_voice_it_1.mp3", "male", "abc", "test", "it"),
        ("common_voice_it_2", "female", "def", "test", "it"),
    ]
    assert result.utterances[0].extra == {"age": "twenties"}
    assert len(result.missing_audio) == 1 and result.missing_audio[0].line == 4
    assert "1 rows skipped because their audio is missing" in result.summary()


def test_common_voice_bad_rows(tmp_path):
    tsv = _write(tmp_path / "train.tsv", "client_id\tpath\tsentence\n")
    with pytest.raises(ManifestError, match="train.tsv:1: missing column\\(s\\) gender"):
        corpora.common_voice(tsv, language="en")
    tsv = _write(tmp_path / "dev.tsv", "client_id\tpath\tsentence\tgender\na\tb.wav\tc\tmale\nd\tb.wav\te\tfemale\n")
    with pytest.raises(ManifestError) as error:
        corpora.common_voice(tsv, language="en")
    assert str(error.value) == f"{tsv}:3: duplicate id 'b', first on {tsv}:2"
    tsv = _write(tmp_path / "test.tsv", "client_id\tpath\tsentence\tgender\na\tb.wav\n")
    with pytest.raises(ManifestError, match="test.tsv:2: expected 4 tab-separated fields"):
        corpora.common_voice(tsv, language="en")


def test_fleurs(tmp_path, tone):
    tone("fl/audio/dev/10.wav")
    tsv = _write(
        tmp_path / "fl/dev.tsv",
        "1\t10.wav\tHello, World.\thello world\th e l l o | w o r l d\t16000\tFEMALE\n",
    )
    result = corpora.fleurs(tsv, language="en")
    (utterance,) = result.utterances
    assert (utterance.id, utterance.text, utterance.gender, utterance.split) == ("10", "Hello, World.", "female", "dev")
    assert utterance.extra == {"sentence_id": "1", "num_samples": 16000, "speaker_ids_known": False}
    bad = _write(tmp_path / "fl/test.tsv", "1\t10.wav\tx\tx\tx\tmany\tMALE\n")
    with pytest.raises(ManifestError, match="test.tsv:1: num_samples is not an integer"):
        corpora.fleurs(bad, language="en")


def test_voxpopuli(tmp_path, tone):
    tone("vp/audio/2019/20190101-0900-PLENARY-1_de_0.ogg.wav")
    tone("vp/audio/20190101-0900-PLENARY-2_de_0.wav")
    tsv = _write(
        tmp_path / "vp/asr_test.tsv",
        "id\traw_text\tnormalized_text\tspeaker_id\tsplit\tgender\tis_gold_transcript\taccent\n"
        "20190101-0900-PLENARY-2_de_0\tGuten Tag.\tguten tag\t1234\ttest\tfemale\tTrue\tNone\n",
    )
    (utterance,) = corpora.voxpopuli(tsv, "de", tmp_path / "vp/audio").utterances
    assert (utterance.speaker, utterance.gender, utterance.split) == ("1234", "female", "test")
    assert utterance.audio.endswith("20190101-0900-PLENARY-2_de_0.wav")


def test_must_c_with_speaker_pronouns(tmp_path, tone):
    root = tmp_path / "en-it/data/tst-COMMON"
    tone("en-it/data/tst-COMMON/wav/ted_767.wav", seconds=4.0)
    tone("en-it/data/tst-COMMON/wav/ted_900.wav", seconds=4.0)
    _write(
        root / "txt/tst-COMMON.yaml",
        "- {duration: 1.5, offset: 0.5, rW: 3, uW: 0, speaker_id: spk.767, wav: ted_767.wav}\n"
        "- {duration: 1.0, offset: 2.0, rW: 2, uW: 0, speaker_id: spk.767, wav: ted_767.wav}\n"
        "- {duration: 2.0, offset: 1.0, rW: 2, uW: 0, speaker_id: spk.900, wav: ted_900.wav}\n",
    )
    _write(root / "txt/tst-COMMON.en", "I was tired.\nThank you.\nHello there.\n")
    _write(root / "txt/tst-COMMON.it", "Ero stanca.\nGrazie.\nCiao.\n")
    speakers = _write(tmp_path / "must-speakers.tsv", "TALK-ID\tTED-PRONOUN\n767\tShe\n")
    result = corpora.must_c(root, "tst-COMMON", "it", speakers, split="test")
    first, second, third = result.utterances
    assert (first.id, first.offset, first.duration, first.gender, first.translation) == ("ted_767_0", 0.5, 1.5, "female", "Ero stanca.")
    assert second.id == "ted_767_1" and third.gender == "unknown" and third.speaker == "spk.900"
    _write(root / "txt/tst-COMMON.it", "Ero stanca.\n")
    with pytest.raises(ManifestError, match="tst-COMMON.it: has 1 lines but the segment list has 3 segments"):
        corpora.must_c(root, "tst-COMMON", "it", speakers)


def test_must_she(tmp_path, tone):
    tone("ms/wav/it-0001.wav")
    tsv = _write(
        tmp_path / "ms/MONOLINGUAL.it_v1.2.tsv",
        "ID\tLANG\tTALK\tSRC\tREF\tWRONG-REF\tSPEAKER\tGENDER\tCATEGORY\tTEXT-CATEGORY\tGENDERTERMS\n"
        "it-0001\ten-it\t1234\tI was born there.\tSono nata lì.\tSono nato lì.\tJane Doe\tShe\t1F\tA\tnata nato\n"
        "it-0002\ten-it\t1235\tI was tired.\tEro stanco.\tEro stanca.\tJohn Roe\tHe\t1M\tA\tstanco stanca\n",
    )
    result = corpora.must_she(tsv)
    (utterance,) = result.utterances
    assert (utterance.gender, utterance.language, utterance.translation) == ("female", "en", "Sono nata lì.")
    assert utterance.extra["category"] == "1F" and utterance.extra["genderterms"] == "nata nato"
    assert [m.id for m in result.missing_audio] == ["it-0002"]


def test_generic_tsv_and_jsonl(tmp_path, tone):
    tone("g/a.wav")
    tsv = _write(tmp_path / "g/list.tsv", "utt\tfile\ttranscript\tsex\tspk\tmood\nu1\ta.wav\thi\tF\ts1\thappy\n")
    result = corpora.generic_tsv(tsv, {"id": "utt", "audio": "file", "text": "transcript", "gender": "sex", "speaker": "spk"}, language="en", dataset="mine")
    (utterance,) = result.utterances
    assert (utterance.gender, utterance.dataset, utterance.extra) == ("female", "mine", {"mood": "happy"})
    jsonl = _write(tmp_path / "g/list.jsonl", '{"key": "u2", "path": "a.wav", "sentence": "yo", "gender": "He", "who": "s2", "x": 1}\n')
    result = corpora.generic_jsonl(jsonl, {"id": "key", "audio": "path", "text": "sentence", "speaker": "who"}, language="es")
    (utterance,) = result.utterances
    assert (utterance.id, utterance.gender, utterance.language, utterance.extra) == ("u2", "male", "es", {"x": 1})
    bad = _write(tmp_path / "g/bad.jsonl", '{"key": "u3"}\n')
    with pytest.raises(ManifestError, match="bad.jsonl:1: no value for audio, language, speaker"):
        corpora.generic_jsonl(bad, {"id": "key"})


def test_hf_dataset_writes_in_memory_audio(tmp_path):
    import numpy as np
    import soundfile

    rows = [
        {
            "id": "r1",
            "audio": {"path": None, "array": np.full(1600, 0.1), "sampling_rate": 16000},
            "sentence": "hi",
            "gender": "female_feminine",
            "client_id": "c1",
            "age": "thirties",
        },
    ]
    result = corpora.hf_dataset(rows, tmp_path / "hf", "cv_hf", language="en", split="test")
    (utterance,) = result.utterances
    assert utterance.gender == "female" and utterance.extra == {"age": "thirties"}
    data, rate = soundfile.read(utterance.audio)
    assert rate == 16000 and len(data) == 1600


def test_hf_dataset_decodes_class_label_genders(tmp_path, tone):
    class ClassLabel:
        names = ["male", "female", "other"]

    class Rows(list):
        features = {"gender": ClassLabel()}

    rows = Rows({"id": f"r{i}", "audio": {"path": str(tone(f"{i}.wav"))}, "sentence": "hi", "gender": i, "client_id": "c"} for i in range(3))
    result = corpora.hf_dataset(rows, tmp_path, "fleurs_hf", language="en", split="test")
    assert [u.gender for u in result.utterances] == ["male", "female", "other"]


def test_manifest_cli_reports_missing_audio(tmp_path, tone, capsys):
    from experiments.manifest import main

    tone("cv/clips/a.wav")
    tsv = _write(tmp_path / "cv/test.tsv", "client_id\tpath\tsentence\tgender\ns1\ta.wav\thi\tmale\ns2\tb.wav\tho\tfemale\n")
    out = tmp_path / "m.jsonl"
    assert main(["common_voice", str(tsv), "--language", "en", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "missing audio:" in captured.err and "b.wav" in captured.err
    assert "1 utterances; 1 rows skipped" in captured.out and len(out.read_text().splitlines()) == 1
    assert main(["common_voice", str(tsv), "--language", "en", "--out", str(out), "--strict"]) == 2
    bad = _write(tmp_path / "bad.tsv", "client_id\tpath\n")
    assert main(["common_voice", str(bad), "--language", "en", "--out", str(out)]) == 2
    assert "bad.tsv:1: missing column(s)" in capsys.readouterr().err


def test_unrecognised_gender_values_become_unknown_and_are_counted(tmp_path, tone):
    for name in "abcde":
        tone(f"cv/clips/{name}.wav")
    tsv = _write(
        tmp_path / "cv/test.tsv",
        "client_id\tpath\tsentence\tgender\n"
        "s1\ta.wav\thi\tmanly woman\n"  # the old prefix rule made this male
        "s2\tb.wav\thi\tmale-to-female\n"  # ... and this
        "s3\tc.wav\thi\tManly Woman\n"
        "s4\td.wav\thi\tFEMALE\n"
        "s5\te.wav\thi\t\n"  # empty: a known spelling of unknown, not counted
        "s6\tf.wav\thi\talien\n",  # audio missing: skipped, so not counted either
    )
    result = corpora.common_voice(tsv, language="en")
    assert [u.gender for u in result.utterances] == ["unknown", "unknown", "unknown", "female", "unknown"]
    assert [u.extra.get("gender_value") for u in result.utterances] == ["manly woman", "male-to-female", "Manly Woman", None, None]
    assert dict(result.unknown_genders) == {"manly woman": 1, "male-to-female": 1, "Manly Woman": 1}
    assert "3 utterances with an unrecognised gender value, kept as unknown: 'manly woman' (1), 'male-to-female' (1), 'Manly Woman' (1)" in result.summary()


def test_must_speakers_pronouns_unrecognised_and_duplicated(tmp_path, tone):
    root = tmp_path / "en-it/data/tst-COMMON"
    tone("en-it/data/tst-COMMON/wav/ted_1.wav", seconds=2.0)
    _write(root / "txt/tst-COMMON.yaml", "- {duration: 1.0, offset: 0.0, speaker_id: spk.1, wav: ted_1.wav}\n")
    _write(root / "txt/tst-COMMON.en", "Hi.\n")
    _write(root / "txt/tst-COMMON.it", "Ciao.\n")
    speakers = _write(tmp_path / "sp.tsv", "TALK-ID\tTED-PRONOUN\n1\tShe/They\n")
    result = corpora.must_c(root, "tst-COMMON", "it", speakers)
    assert result.utterances[0].gender == "unknown" and dict(result.unknown_genders) == {"She/They": 1}
    speakers = _write(tmp_path / "sp.tsv", "TALK-ID\tTED-PRONOUN\n1\tShe\n2\tHe\n1\tHe\n")
    with pytest.raises(ManifestError, match="sp.tsv:4: duplicate TALK-ID '1', first on .*sp.tsv:2"):
        corpora.must_c(root, "tst-COMMON", "it", speakers)


def test_non_utf8_native_files_name_the_line(tmp_path):
    tsv = tmp_path / "cv/test.tsv"
    tsv.parent.mkdir(parents=True)
    tsv.write_bytes("client_id\tpath\tsentence\tgender\ns1\ta.wav\tok\tmale\ns2\tb.wav\tcaffè\tmale\n".encode("latin-1"))
    with pytest.raises(ManifestError, match="test.tsv:3: not UTF-8 \\(byte 0xe8 at position 14\\)"):
        corpora.common_voice(tsv, language="it")
    root = tmp_path / "mc"
    _write(root / "txt/tst.yaml", "- {duration: 1.0, offset: 0.0, wav: ted_1.wav}\n")
    (root / "txt/tst.en").write_bytes(b"Hi.\n")
    (root / "txt/tst.it").write_bytes("Perché.\n".encode("cp1252"))
    speakers = _write(tmp_path / "sp.tsv", "TALK-ID\tTED-PRONOUN\n")
    with pytest.raises(ManifestError, match="tst.it:1: not UTF-8"):
        corpora.must_c(root, "tst", "it", speakers)


def test_manifest_cli_clean_errors(tmp_path, tone, capsys):
    from experiments.manifest import main

    out = tmp_path / "m.jsonl"
    cases = [
        (["common_voice", str(tmp_path), "--language", "en"], f"{tmp_path}: is a directory; give the path of a file"),
        (["common_voice", str(tmp_path / "none.tsv"), "--language", "en"], "none.tsv: no such file"),
        (
            ["common_voice", str(_write(tmp_path / "h.tsv", "client_id\tpath\tsentence\tgender\n")), "--language", "en"],
            "h.tsv gives no utterances (it holds no rows); no manifest written",
        ),
        (
            ["common_voice", str(_write(tmp_path / "m.tsv", "client_id\tpath\tsentence\tgender\ns\tgone.wav\thi\tmale\n")), "--language", "en"],
            "m.tsv gives no utterances (all 1 rows lack their audio file)",
        ),
        (["jsonl", str(_write(tmp_path / "e.jsonl", "\n")), "--language", "en"], "e.jsonl gives no utterances (it holds no rows)"),
    ]
    for argv, message in cases:
        assert main([*argv, "--out", str(out)]) == 2, argv
        err = capsys.readouterr().err
        assert err.splitlines()[-1].startswith("error: ") and message in err.splitlines()[-1], err
    assert not out.exists()
    tone("cv/clips/a.wav")
    tsv = _write(tmp_path / "cv/test.tsv", "client_id\tpath\tsentence\tgender\ns1\ta.wav\thi\tmanly woman\n")
    with pytest.raises(SystemExit) as parsed:  # refused while parsing, before the corpus is read
        main(["common_voice", str(tsv), "--language", "en", "--out", str(tmp_path)])
    assert parsed.value.code == 2 and f"argument --out: {tmp_path} is a folder; give the path of a file" in capsys.readouterr().err
    assert main(["common_voice", str(tsv), "--language", "en", "--out", str(out)]) == 0
    assert "1 utterances with an unrecognised gender value, kept as unknown: 'manly woman' (1)" in capsys.readouterr().out
    assert json.loads(out.read_text())["gender"] == "unknown"


def _hf_row(row_id, value):
    import numpy as np

    audio = {"path": None, "array": np.full(1600, value), "sampling_rate": 16000}
    return {"id": row_id, "audio": audio, "sentence": "hi", "gender": "female", "client_id": "c"}


def test_hf_dataset_never_writes_outside_its_audio_folder(tmp_path):
    """An id is not a path: ``../../escape`` was written two folders up, an absolute id anywhere (#146)."""
    audio_dir = tmp_path / "a" / "b" / "audio"
    ids = ["../../escape", str(tmp_path / "absolute"), "x/../../y", "..", ".", "a/b", "a_b", "plain"]
    result = corpora.hf_dataset([_hf_row(i, 0.1) for i in ids], audio_dir, "toy", language="en")
    paths = [Path(u.audio) for u in result.utterances]
    assert [u.id for u in result.utterances] == ids
    assert all(p.parent == audio_dir and p.is_file() for p in paths) and len(set(paths)) == len(ids)
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == sorted(p.name for p in paths)  # nothing else written anywhere
    assert paths[-1].name.startswith("plain-") and paths[-1].suffix == ".wav"
    again = corpora.hf_dataset([_hf_row(i, 0.1) for i in ids], audio_dir, "toy", language="en")
    assert [Path(u.audio) for u in again.utterances] == paths  # stable names: a rerun finds its files


def test_id_file_names_hold_no_separator_dots_or_control_characters():
    from extract.paths import id_file_name

    for identifier in ("../x", "/etc/passwd", "a\x00b", "tab\there", "new\nline", "..", "C:\\x\\y", "é/ü"):
        name = id_file_name(identifier, ".wav")
        assert "/" not in name and "\\" not in name and name not in (".", "..") and name.isprintable() and name.endswith(".wav"), name
    assert id_file_name("a/b", ".wav") != id_file_name("a_b", ".wav")
    assert id_file_name("u1", ".wav", b"one") != id_file_name("u1", ".wav", b"two")


def test_hf_dataset_never_reuses_the_audio_of_another_dataset_with_the_same_id(tmp_path):
    """Two datasets into one folder, one id, other audio: the second manifest pointed at the first's WAV (#147)."""
    import soundfile

    first = corpora.hf_dataset([_hf_row("0", 0.1)], tmp_path / "audio", "fleurs_fr", language="fr")
    second = corpora.hf_dataset([_hf_row("0", -0.3)], tmp_path / "audio", "fleurs_es", language="es")
    (one,), (two,) = first.utterances, second.utterances
    assert one.audio != two.audio
    assert abs(soundfile.read(one.audio)[0] - 0.1).max() < 1e-4 and abs(soundfile.read(two.audio)[0] + 0.3).max() < 1e-4


# --- mTEDx -------------------------------------------------------------------------------------


def test_mtedx_reads_its_native_layout_with_the_gender_annotation(tmp_path):
    from tests.mtedx import write_mtedx

    written = write_mtedx(tmp_path)
    result = corpora.mtedx(written["split_dir"], "test", "fr", speakers_tsv=written["speakers"])
    rows = [(u.id, u.gender, u.speaker, u.text, u.offset, u.duration, u.split, u.dataset, u.translation) for u in result.utterances]
    assert rows == [
        ("talkF_0", "female", "talkF", "bonjour à tous", 0.0, 0.4, "test", "mtedx", None),
        ("talkF_1", "female", "talkF", "merci", 0.5, 0.3, "test", "mtedx", None),
        ("talkM_0", "male", "talkM", "je suis ravi", 0.0, 0.5, "test", "mtedx", None),
    ]
    assert result.utterances[0].audio == str(written["split_dir"] / "wav" / "talkF.flac") and result.utterances[0].language == "fr"
    in_yaml = write_mtedx(tmp_path / "yaml", gender_in_yaml=True)  # the annotation as a field of the segments
    assert [u.gender for u in corpora.mtedx(in_yaml["split_dir"], "test", "fr").utterances] == ["female", "female", "male"]
    translation = write_mtedx(tmp_path / "st", direction="fr-en")
    translated = corpora.mtedx(translation["split_dir"], "test", "fr", target_language="en", speakers_tsv=translation["speakers"]).utterances
    assert translated[2].translation == "i am delighted" and translated[2].extra["target_language"] == "en"


def test_mtedx_counts_both_genders_and_unannotated_speakers_as_unknown_and_refuses_bad_files(tmp_path):
    from extract.manifest import ManifestError
    from tests.mtedx import write_mtedx

    written = write_mtedx(tmp_path)
    written["speakers"].write_text("SPEAKER-ID\tGENDER\ntalkF\tB\n")  # the paper's B: both genders in one talk; talkM not annotated
    result = corpora.mtedx(written["split_dir"], "test", "fr", speakers_tsv=written["speakers"])
    assert [u.gender for u in result.utterances] == ["unknown", "unknown", "unknown"] and result.unknown_genders == {"B": 2}
    written["speakers"].write_text("SPEAKER-ID\tGENDER\ntalkF\tF\ntalkF\tM\n")
    with pytest.raises(ManifestError, match="mtedx-fr-genders.tsv:3: duplicate SPEAKER-ID 'talkF', first on .*:2"):
        corpora.mtedx(written["split_dir"], "test", "fr", speakers_tsv=written["speakers"])
    (written["split_dir"] / "txt" / "test.fr").write_text("une ligne\n")
    with pytest.raises(ManifestError, match="test.fr: has 1 lines but the segment list has 3 segments"):
        corpora.mtedx(written["split_dir"], "test", "fr")
