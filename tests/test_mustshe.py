import json

import pytest

from experiments.mustshe import Entry, MustSheError, main, read_definition, score, sentence_counts

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
    definition = _definition(tmp_path, [
        ["it-1", "en-it", "1", "I was tired.", "Ero stanca.", "Ero stanco.", "A", "She", "1F", "A", "stanca stanco"],
        ["it-2", "en-it", "2", "I was born there.", "Sono nato lì.", "Sono nata lì.", "B", "He", "1M", "A", "nato nata;solo sola"],
        ["it-3", "en-it", "3", "I am the only one.", "Sono l'unica.", "Sono l'unico.", "C", "She", "1F", "A", "Unica unico"],
    ])
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
    assert main(["--definition", str(definition), "--hypotheses", str(hypotheses), "--json", str(tmp_path / "o.json")]) == 2
    assert "2 hypotheses for 1 MuST-SHE entries" in capsys.readouterr().err
    hypotheses.write_text("Ero stanca.\n", encoding="utf-8")
    assert main(["--definition", str(definition), "--hypotheses", str(hypotheses), "--json", str(tmp_path / "o.json"), "--lang", "it"]) == 0
    assert json.loads((tmp_path / "o.json").read_text())["global"]["accuracy"] == 100.0


def test_malformed_genderterms(tmp_path):
    definition = _definition(tmp_path, [["it-1", "en-it", "1", "x", "y", "z", "A", "She", "1F", "A", "stanca"]])
    with pytest.raises(MustSheError, match="def.tsv:2: GENDERTERMS entry 'stanca' is not a 'correct wrong' pair"):
        read_definition(definition)


def test_transcribe_rows_are_matched_by_id_and_each_sentence_gets_a_translation_gender(tmp_path):
    definition = _definition(tmp_path, [
        ["it-1", "en-it", "1", "x", "y", "z", "A", "She", "1F", "A", "stanca stanco"],
        ["it-2", "en-it", "2", "x", "y", "z", "B", "He", "1M", "A", "nato nata;solo sola"],
        ["it-3", "en-it", "3", "x", "y", "z", "C", "She", "1F", "A", "unica unico"],
        ["it-4", "en-it", "4", "x", "y", "z", "D", "He", "1M", "A", "stanco stanca"],
    ])
    rows = [("it-3", "Sono l'unico."), ("it-1", "Ero stanca."), ("it-4", "Boh."), ("it-2", "Sono nata lì, da solo.")]
    hypotheses = tmp_path / "hyps.jsonl"
    hypotheses.write_text("".join(json.dumps({"id": i, "hypothesis": h}) + "\n" for i, h in rows), encoding="utf-8")
    assert main(["--definition", str(definition), "--hypotheses", str(hypotheses), "--json", str(tmp_path / "o.json"), "--lang", "it"]) == 0
    sentences = [json.loads(line) for line in (tmp_path / "o.sentences.jsonl").read_text().splitlines()]
    assert [(s["id"], s["translation_gender"]) for s in sentences] == [
        ("it-1", "feminine"), ("it-2", "mixed"), ("it-3", "masculine"), ("it-4", "none"),
    ]
    hypotheses.write_text(json.dumps({"id": "it-1", "hypothesis": "Ero stanca."}) + "\n", encoding="utf-8")
    assert main(["--definition", str(definition), "--hypotheses", str(hypotheses), "--json", str(tmp_path / "o.json")]) == 2
