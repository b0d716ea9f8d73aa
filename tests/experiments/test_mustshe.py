import json
import re

import pytest

from experiments.mustshe import main
from experiments.scoring.mustshe import score, sentence_counts
from extract.corpora.must_she import Entry, MustSheError, category_number, read_definition

HEADER = "ID\tLANG\tTALK\tSRC\tREF\tWRONG-REF\tSPEAKER\tGENDER\tCATEGORY\tTEXT-CATEGORY\tGENDERTERMS\n"


def _definition(tmp_path, rows):
    path = tmp_path / "def.tsv"
    path.write_text(HEADER + "".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_repeated_term_is_matched_once_per_pair():
    entry = Entry("1F", "She", (("stanca", "stanco"), ("stanca", "stanco")))
    # one 'stanca' in the hypothesis: the first pair takes it, the second finds nothing
    counts = sentence_counts("ero stanca ieri".split(), entry)
    assert (counts.terms, counts.found, counts.correct, counts.wrong) == (2, 1, 1, 0)
    counts = sentence_counts("ero stanca , molto stanca".split(), entry)
    assert (counts.found, counts.correct) == (2, 2)


def test_both_forms_present_count_as_correct_and_wrong():
    counts = sentence_counts("stanca o stanco".split(), Entry("1F", "She", (("stanca", "stanco"),)))
    assert (counts.found, counts.correct, counts.wrong) == (1, 1, 1)


def test_empty_hypothesis_finds_nothing_and_accuracy_is_zero():
    result = score([Entry("1M", "He", (("stanco", "stanca"),))], [""], "it", pretokenized=True)
    assert result["categories"]["1M"] == {"terms": 1, "found": 0, "correct": 0, "wrong": 0, "coverage": 0.0, "accuracy": 0.0}


def test_scores_by_hand_with_moses_tokenization(tmp_path):
    definition = _definition(
        tmp_path,
        [
            ["it-1", "en-it", "1", "I was tired.", "Ero stanca.", "Ero stanco.", "A", "She", "1F", "A", "stanca stanco"],
            ["it-2", "en-it", "2", "I was born there.", "Sono nato lì.", "Sono nata lì.", "B", "He", "1M", "A", "nato nata;solo sola"],
            ["it-3", "en-it", "3", "I am the only one.", "Sono l'unica.", "Sono l'unico.", "C", "She", "1F", "A", "Unica unico"],
        ],
    )
    hypotheses = ["Ero stanca.", "Sono nata lì, da solo.", "Sono l'unico."]
    result = score(read_definition(definition), hypotheses, "it")
    # 1F: terms 2 (stanca, unica); found 2; correct 1 (stanca), wrong 1 (unico) -> coverage 100, accuracy 50
    assert result["categories"]["1F"] == {"terms": 2, "found": 2, "correct": 1, "wrong": 1, "coverage": 100.0, "accuracy": 50.0}
    # 1M: terms 2 (nato/nata, solo/sola); 'nata' wrong, 'solo' correct -> coverage 100, accuracy 50
    assert result["categories"]["1M"]["correct"] == 1 and result["categories"]["1M"]["wrong"] == 1
    assert result["genders"]["She"]["terms"] == 2 and result["genders"]["He"]["terms"] == 2
    assert result["global"] == {"terms": 4, "found": 4, "correct": 2, "wrong": 2, "coverage": 100.0, "accuracy": 50.0}


def test_line_count_mismatch_is_an_error(tmp_path, capsys):
    definition = _definition(tmp_path, [["it-1", "en-it", "1", "x", "y", "z", "A", "She", "1F", "A", "stanca stanco"]])
    hypotheses = tmp_path / "hyp.txt"
    hypotheses.write_text("Ero stanca.\nUna riga in più.\n", encoding="utf-8")
    assert main(["--definition", str(definition), "--hypotheses", str(hypotheses), "--out", str(tmp_path / "o.json")]) == 2
    assert "2 hypotheses for 1 MuST-SHE entries" in capsys.readouterr().err
    hypotheses.write_text("Ero stanca.\n", encoding="utf-8")
    assert main(["--definition", str(definition), "--hypotheses", str(hypotheses), "--out", str(tmp_path / "o.json"), "--tgt-lang", "it"]) == 0
    assert json.loads((tmp_path / "o.json").read_text())["global"]["accuracy"] == 100.0


def test_malformed_genderterms(tmp_path):
    definition = _definition(tmp_path, [["it-1", "en-it", "1", "x", "y", "z", "A", "She", "1F", "A", "stanca"]])
    with pytest.raises(MustSheError, match="def.tsv:2: GENDERTERMS entry 'stanca' is not a 'correct wrong' pair"):
        read_definition(definition)


def test_transcribe_rows_are_matched_by_id_and_each_sentence_gets_a_translation_gender(tmp_path, capsys):
    definition = _definition(
        tmp_path,
        [
            ["it-1", "en-it", "1", "x", "y", "z", "A", "She", "1F", "A", "stanca stanco"],
            ["it-2", "en-it", "2", "x", "y", "z", "B", "He", "1M", "A", "nato nata;solo sola"],
            ["it-3", "en-it", "3", "x", "y", "z", "C", "She", "1F", "A", "unica unico"],
            ["it-4", "en-it", "4", "x", "y", "z", "D", "He", "1M", "A", "stanco stanca"],
        ],
    )
    rows = [("it-3", "Sono l'unico."), ("it-1", "Ero stanca."), ("it-4", "Boh."), ("it-2", "Sono nata lì, da solo.")]
    hypotheses = tmp_path / "hyps.jsonl"
    hypotheses.write_text("".join(json.dumps({"id": i, "hypothesis": h}) + "\n" for i, h in rows), encoding="utf-8")
    assert main(["--definition", str(definition), "--hypotheses", str(hypotheses), "--out", str(tmp_path / "o.json"), "--tgt-lang", "it"]) == 0
    sentences = [json.loads(line) for line in (tmp_path / "o.sentences.jsonl").read_text().splitlines()]
    assert [(s["id"], s["translation_gender"]) for s in sentences] == [
        ("it-1", "feminine"),
        ("it-2", "mixed"),
        ("it-3", "masculine"),
        ("it-4", "none"),
    ]
    hypotheses.write_text(json.dumps({"id": "it-1", "hypothesis": "Ero stanca."}) + "\n", encoding="utf-8")
    assert main(["--definition", str(definition), "--hypotheses", str(hypotheses), "--out", str(tmp_path / "o.json")]) == 2
    assert "no row for 3 of 4 expected id(s), e.g. ['it-2', 'it-3', 'it-4']" in capsys.readouterr().err


def _entries_of_every_category():
    return [
        Entry("1F", "She", (("stanca", "stanco"),), "a"),
        Entry("1M", "He", (("nato", "nata"), ("solo", "sola")), "b"),
        Entry("2F", "She", (("brava", "bravo"),), "c"),
        Entry("2M", "He", (("ricco", "ricca"), ("sposato", "sposata")), "d"),
        Entry("1F", "She", (("unica", "unico"),), "e"),
    ]


HYPOTHESES = ["ero stanca", "sono nata da solo", "bravo", "lui è ricco", "niente"]


def test_category_1_pools_1F_and_1M_by_hand():
    result = score(_entries_of_every_category(), HYPOTHESES, "it", pretokenized=True)
    # category 1 = a + b + e: terms 1 + 2 + 1 = 4; found 1 (stanca) + 2 (nata, solo) + 0 = 3;
    # correct stanca, solo = 2; wrong nata = 1 -> coverage 3/4 = 75 %, accuracy 2/3 = 66.67 %
    assert result["category_1"] == pytest.approx({"terms": 4, "found": 3, "correct": 2, "wrong": 1, "coverage": 75.0, "accuracy": 200 / 3})
    # category 2 = c + d: terms 1 + 2 = 3; found bravo, ricco = 2; correct ricco = 1; wrong bravo = 1
    assert result["category_numbers"] == {
        "1": result["category_1"],
        "2": pytest.approx({"terms": 3, "found": 2, "correct": 1, "wrong": 1, "coverage": 200 / 3, "accuracy": 50.0}),
    }
    assert set(result["categories"]) == {"1F", "1M", "2F", "2M"}
    assert result["categories"]["1F"] == {"terms": 2, "found": 1, "correct": 1, "wrong": 0, "coverage": 50.0, "accuracy": 100.0}
    assert result["global"] == pytest.approx({"terms": 7, "found": 5, "correct": 3, "wrong": 2, "coverage": 500 / 7, "accuracy": 60.0})


def test_category_1_is_null_without_first_person_entries():
    entries = _entries_of_every_category()
    result = score(entries[2:4], HYPOTHESES[2:4], "it", pretokenized=True)
    assert result["category_1"] is None and set(result["category_numbers"]) == {"2"}


@pytest.mark.parametrize("name, number", [("1F", "1"), ("2M", "2"), ("12F", "12"), ("X", "X")])
def test_category_number(name, number):
    assert category_number(name) == number


def _rows_definition(tmp_path):
    return _definition(
        tmp_path,
        [
            ["it-1", "en-it", "1", "x", "y", "z", "A", "She", "1F", "A", "stanca stanco"],
            ["it-2", "en-it", "2", "x", "y", "z", "B", "He", "2M", "A", "nato nata"],
        ],
    )


def _run(tmp_path, definition, hypotheses_name, content):
    hypotheses = tmp_path / hypotheses_name
    if isinstance(content, bytes):
        hypotheses.write_bytes(content)
    else:
        hypotheses.write_text(content, encoding="utf-8")
    return main(["--definition", str(definition), "--hypotheses", str(hypotheses), "--out", str(tmp_path / "o.json"), "--pretokenized"])


def test_cli_prints_and_writes_category_1(tmp_path, capsys):
    definition = _rows_definition(tmp_path)
    assert _run(tmp_path, definition, "h.txt", "ero stanco\nsono nato\n") == 0
    out = capsys.readouterr().out
    assert "[mustshe] category 1 (1F + 1M): coverage 100.00, accuracy 0.00" in out
    result = json.loads((tmp_path / "o.json").read_text())
    assert result["category_1"]["wrong"] == 1 and result["category_numbers"]["2"]["correct"] == 1


def _jsonl(*rows):
    return "".join(json.dumps(row) + "\n" for row in rows)


@pytest.mark.parametrize(
    "name, content, message",
    [
        # the duplicate that used to win silently (global accuracy 100 -> 50 here)
        (
            "h.jsonl",
            _jsonl({"id": "it-1", "hypothesis": "stanca"}, {"id": "it-2", "hypothesis": "nato"}, {"id": "it-1", "hypothesis": "stanco"}),
            "h.jsonl:3: duplicate id 'it-1', first on {dir}/h.jsonl:1",
        ),
        ("h.jsonl", _jsonl({"id": "it-1", "hypothesis": None}, {"id": "it-2", "hypothesis": "nato"}), "h.jsonl:1: hypothesis must be a string, got null"),
        ("h.jsonl", _jsonl({"id": "it-1", "hypothesis": 5}, {"id": "it-2", "hypothesis": "nato"}), "h.jsonl:1: hypothesis must be a string, got int 5"),
        ("h.jsonl", _jsonl({"id": "it-1", "hypothesis": "x"}, {"id": "it-2", "text": "nato"}), "h.jsonl:2: missing key(s) hypothesis"),
        ("h.jsonl", _jsonl({"id": "it-1", "hypothesis": "x"}, {"hypothesis": "nato"}), "h.jsonl:2: missing key(s) id"),
        ("h.jsonl", "", "h.jsonl: holds no hypothesis rows (empty file)"),
        ("h.txt", "", "h.txt: holds no hypotheses (empty file)"),
        ("h.txt", "ero stanca\nperch\xe9\n".encode("latin-1"), "h.txt:2: not UTF-8 (byte 0xe9 at position 6)"),
        ("h.jsonl", '{"id": "it-1", "hypothesis": "x"}\n{"id": "it-2", "hypothesis": "perch\xe9"}\n'.encode("latin-1"), "h.jsonl:2: not UTF-8"),
    ],
)
def test_cli_refuses_bad_hypotheses_with_one_line(tmp_path, capsys, name, content, message):
    assert _run(tmp_path, _rows_definition(tmp_path), name, content) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and message.format(dir=tmp_path) in err
    assert not (tmp_path / "o.json").exists()


def test_cli_refuses_a_directory_and_a_bad_definition(tmp_path, capsys):
    definition = _rows_definition(tmp_path)
    assert main(["--definition", str(definition), "--hypotheses", str(tmp_path), "--out", str(tmp_path / "o.json")]) == 2
    assert f"error: {tmp_path}: is a directory" in capsys.readouterr().err
    duplicated = _definition(tmp_path, [["it-1", "en-it", "1", "x", "y", "z", "A", "She", "1F", "A", "a b"]] * 2)
    with pytest.raises(MustSheError, match="def.tsv:3: duplicate ID 'it-1', first on .*def.tsv:2"):
        read_definition(duplicated)
    with pytest.raises(MustSheError, match="def.tsv: holds no MuST-SHE entries"):
        read_definition(_definition(tmp_path, []))


def test_hypotheses_the_definition_lacks_are_counted_not_scored(tmp_path, capsys):
    content = _jsonl({"id": "it-2", "hypothesis": "nato"}, {"id": "fr-9", "hypothesis": "née"}, {"id": "it-1", "hypothesis": "stanca"})
    assert _run(tmp_path, _rows_definition(tmp_path), "h.jsonl", content) == 0
    assert "warning: 1 hypothesis id(s) in" in capsys.readouterr().err
    result = json.loads((tmp_path / "o.json").read_text())
    assert result["unmatched_hypotheses"] == {"count": 1, "ids": ["fr-9"]}
    assert result["global"]["accuracy"] == 100.0 and result["global"]["terms"] == 2


def _release_row(identifier, gender, category, terms):
    return {
        "ID": identifier,
        "LANG": "en-it",
        "TALK": "7",
        "SRC": "I was tired.",
        "REF": "Ero stanca.",
        "WRONG-REF": "Ero stanco.",
        "SPEAKER": "Ann",
        "GENDER": gender,
        "CATEGORY": category,
        "TEXT-CATEGORY": "A",
        "GENDERTERMS": terms,
    }


def test_written_definition_is_read_back_by_the_scorer_and_the_corpus_recipe(tmp_path, tone):
    from extract.corpora.must_she import format_gender_terms, must_she, write_definition

    terms = format_gender_terms([("stanca", "stanco"), ("sola", "solo")])
    assert terms == "stanca stanco;sola solo"
    path = write_definition(tmp_path / "ms/def.tsv", [_release_row("it-1", "She", "1F", terms), _release_row("it-2", "He", "2M", "ricco ricca")])
    assert path.read_text(encoding="utf-8") == HEADER + (
        "it-1\ten-it\t7\tI was tired.\tEro stanca.\tEro stanco.\tAnn\tShe\t1F\tA\tstanca stanco;sola solo\n"
        "it-2\ten-it\t7\tI was tired.\tEro stanca.\tEro stanco.\tAnn\tHe\t2M\tA\tricco ricca\n"
    )
    assert read_definition(path) == [Entry("1F", "She", (("stanca", "stanco"), ("sola", "solo")), "it-1"), Entry("2M", "He", (("ricco", "ricca"),), "it-2")]
    tone("ms/wav/it-1.wav")
    result = must_she(path)
    assert [u.id for u in result.utterances] == ["it-1"] and [m.id for m in result.missing_audio] == ["it-2"]
    assert result.utterances[0].gender == "female" and result.utterances[0].extra["genderterms"] == terms


@pytest.mark.parametrize(
    "change, message",
    [
        ({"GENDERTERMS": "stanca"}, "MuST-SHE row 1: GENDERTERMS entry 'stanca' is not a 'correct wrong' pair"),
        ({"SRC": "I was\ttired."}, "MuST-SHE row 1: SRC hold(s) a tab or line break"),
        ({"REF": "Ero\nstanca."}, "MuST-SHE row 1: REF hold(s) a tab or line break"),
    ],
)
def test_writer_refuses_what_the_format_cannot_hold(tmp_path, change, message):
    from extract.corpora.must_she import write_definition

    with pytest.raises(MustSheError, match=re.escape(message)):
        write_definition(tmp_path / "def.tsv", [{**_release_row("it-1", "She", "1F", "stanca stanco"), **change}])
    row = _release_row("it-1", "She", "1F", "stanca stanco")
    del row["WRONG-REF"]
    with pytest.raises(MustSheError, match="MuST-SHE row 1: missing column\\(s\\) WRONG-REF"):
        write_definition(tmp_path / "def.tsv", [row])


def test_deprecated_lang_and_json_still_score_and_say_so(tmp_path, capsys):
    definition = _rows_definition(tmp_path)
    hypotheses = tmp_path / "h.txt"
    hypotheses.write_text("Ero stanca.\nSono nato.\n", encoding="utf-8")
    assert main(["--definition", str(definition), "--hypotheses", str(hypotheses), "--out", str(tmp_path / "new.json"), "--tgt-lang", "it"]) == 0
    capsys.readouterr()
    assert main(["--definition", str(definition), "--hypotheses", str(hypotheses), "--json", str(tmp_path / "old.json"), "--lang", "it"]) == 0
    err = capsys.readouterr().err
    assert "note: --lang is deprecated; use --tgt-lang" in err and "note: --json is deprecated; use --out" in err
    assert (tmp_path / "old.json").read_text() == (tmp_path / "new.json").read_text()
