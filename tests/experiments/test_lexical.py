"""Lexical features (issue 15) on hand-tagged French sentences with fr_core_news_sm 3.8."""

import json

import pytest

from experiments import lexical as lexical_cli
from experiments.analysis.lexical import UNIVERSAL_POS, LexicalError, doc_features, entity_labels, lexical_rows, load_pipeline
from extract.manifest import Utterance, write_manifest

# checked against the tagger's actual output (fr_core_news_sm 3.8 tags these unambiguously and as a grammar would)
SENTENCES = {
    "Nous avons acheté une grande maison à Paris.": {
        "pos": {"PRON": 1, "AUX": 1, "VERB": 1, "DET": 1, "ADJ": 1, "NOUN": 1, "ADP": 1, "PROPN": 1, "PUNCT": 1},
        "entities": {"LOC": 1},
        "words": 8,  # every token but the full stop
        "content": 4,  # acheté, grande, maison, Paris
        "function": 3,  # Nous, avons, une
    },
    "Emmanuel Macron a rencontré les ministres à Paris.": {
        "pos": {"PROPN": 3, "AUX": 1, "VERB": 1, "DET": 1, "NOUN": 1, "ADP": 1, "PUNCT": 1},
        "entities": {"PER": 1, "LOC": 1},
        "words": 8,
        "content": 5,  # Emmanuel, Macron, rencontré, ministres, Paris
        "function": 2,  # a, les
    },
}


@pytest.fixture(scope="module")
def nlp():
    return load_pipeline("fr_core_news_sm", "fr")


@pytest.mark.parametrize("sentence", SENTENCES)
def test_pos_entities_and_density_by_hand(nlp, sentence):
    expected = SENTENCES[sentence]
    features, reasons = doc_features(nlp(sentence), entity_labels(nlp))
    assert {tag: features[f"pos_{tag}"] for tag in UNIVERSAL_POS} == {tag: expected["pos"].get(tag, 0) for tag in UNIVERSAL_POS}
    assert features["entities"] == sum(expected["entities"].values())
    assert {label: features[f"ent_{label}"] for label in ("LOC", "MISC", "ORG", "PER")} == {
        label: expected["entities"].get(label, 0) for label in ("LOC", "MISC", "ORG", "PER")
    }
    assert features["words"] == expected["words"]
    assert features["lexical_density"] == pytest.approx(expected["content"] / expected["words"])  # 0.5 and 0.625
    assert features["lexical_complexity"] == pytest.approx(expected["content"] / expected["function"])
    assert reasons == {}


def test_text_without_words_gets_null_with_a_reason(nlp):
    features, reasons = doc_features(nlp("..."), entity_labels(nlp))
    assert features["words"] == 0 and features["lexical_density"] is None and features["lexical_complexity"] is None
    assert set(reasons) == {"lexical_density", "lexical_complexity"}


def test_rows_keep_the_manifest_order(nlp):
    utterances = [Utterance(f"u{i}", "a.wav", "fr", text, "female", "s") for i, text in enumerate(SENTENCES)]
    rows = list(lexical_rows(utterances, nlp, batch_size=1))
    assert [r["id"] for r in rows] == ["u0", "u1"] and rows[1]["features"]["pos_PROPN"] == 3


def test_pipelines_that_cannot_serve(nlp):
    import spacy

    assert entity_labels(spacy.blank("fr")) is None
    with pytest.raises(LexicalError, match="spaCy pipeline 'xx_not_a_pipeline' is not installed"):
        load_pipeline("xx_not_a_pipeline", "fr")


def test_cli(tmp_path, capsys):
    utterances = [Utterance("fr-0", "a.wav", "fr", next(iter(SENTENCES)), "female", "s1"), Utterance("es-0", "b.wav", "es", "Hola.", "male", "s2")]
    manifest = write_manifest(tmp_path / "m.jsonl", utterances)
    out = tmp_path / "lexical.jsonl"
    assert lexical_cli.main(["--manifest", str(manifest), "--spacy-model", "fr_core_news_sm", "--out", str(out)]) == 2
    assert "--language" in capsys.readouterr().err
    assert lexical_cli.main(["--manifest", str(manifest), "--spacy-model", "fr_core_news_sm", "--language", "fr", "--out", str(out), "--quiet"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["fr-0"] and rows[0]["features"]["lexical_density"] == 0.5 and rows[0]["pipeline"].startswith("fr_core_news_sm")
    assert lexical_cli.main(["--manifest", str(manifest), "--spacy-model", "xx_not_a_pipeline", "--language", "fr", "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: spaCy pipeline 'xx_not_a_pipeline' is not installed") and len(error.strip().splitlines()) == 1
    assert lexical_cli.main(["--manifest", str(manifest), "--spacy-model", "fr_core_news_sm", "--language", "de", "--out", str(out)]) == 2


def test_a_pipeline_of_another_language_is_refused(tmp_path, capsys):
    """French tags on English text give numbers that look like features and mean nothing (#20)."""
    manifest = write_manifest(tmp_path / "en.jsonl", [Utterance("en-0", "a.wav", "en", "We bought a house.", "female", "s1")])
    out = tmp_path / "lexical.jsonl"
    for language in ([], ["--language", "en"]):
        assert lexical_cli.main(["--manifest", str(manifest), "--spacy-model", "fr_core_news_sm", *language, "--out", str(out), "--quiet"]) == 2
        error = capsys.readouterr().err
        assert error == "error: spaCy pipeline 'fr_core_news_sm' is for language 'fr', not the records' language en; give a pipeline of en\n"
        assert not out.exists()
    with pytest.raises(LexicalError, match="is a folder but not a spaCy pipeline"):
        load_pipeline(str(tmp_path), "en")
