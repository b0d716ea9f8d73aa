import json
from pathlib import Path

import pytest

from experiments.st_quality import bleu_chrf, evaluate, main, reference_streams

ROWS = [
    {"id": "a", "source": "I was very tired last night.", "reference": "Ero molto stanca ieri sera.", "hypothesis": "Ero molto stanca ieri sera.", "gender": "female"},
    {"id": "b", "source": "I was born there in 1990.", "reference": "Sono nato lì nel 1990.", "hypothesis": "Sono nata lì nel 1990.", "gender": "male"},
]


def test_reference_streams_transpose_multiple_references():
    assert reference_streams(["x", "y"]) == [["x", "y"]]
    assert reference_streams([["x1", "x2"], ["y1", "y2"]]) == [["x1", "y1"], ["x2", "y2"]]
    with pytest.raises(ValueError, match="same number of references"):
        reference_streams([["x1", "x2"], "y"])


def test_bleu_and_chrf_match_sacrebleu_and_record_signatures():
    import sacrebleu

    scores = bleu_chrf([r["hypothesis"] for r in ROWS], [r["reference"] for r in ROWS])
    assert scores["bleu"] == pytest.approx(sacrebleu.corpus_bleu([r["hypothesis"] for r in ROWS], [[r["reference"] for r in ROWS]]).score)
    assert "nrefs:1" in scores["bleu_signature"] and "nrefs:1" in scores["chrf_signature"]
    assert bleu_chrf(["Ero molto stanca ieri sera."], ["Ero molto stanca ieri sera."])["bleu"] == pytest.approx(100.0)


def test_evaluate_per_gender_with_a_stand_in_comet_scorer():
    calls = []

    def stand_in(segments):  # a stand-in for COMET: 1.0 for an exact match, else 0.5
        calls.append(segments)
        return [1.0 if s["mt"] == s["ref"] else 0.5 for s in segments]

    result = evaluate(ROWS, stand_in)
    assert calls[0][0] == {"src": ROWS[0]["source"], "mt": ROWS[0]["hypothesis"], "ref": ROWS[0]["reference"]}
    assert result["all"]["comet"] == pytest.approx(75.0)
    assert result["female"]["comet"] == pytest.approx(100.0) and result["male"]["comet"] == pytest.approx(50.0)
    assert result["female"]["bleu"] == pytest.approx(100.0) and result["male"]["segments"] == 1
    with pytest.raises(ValueError, match="needs the source transcript"):
        evaluate([{**ROWS[0], "source": ""}], stand_in)


def test_cli_without_comet(tmp_path):
    hypotheses = tmp_path / "h.jsonl"
    hypotheses.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    assert main(["--hypotheses", str(hypotheses), "--json", str(tmp_path / "o.json"), "--no-comet"]) == 0
    result = json.loads((tmp_path / "o.json").read_text())
    assert set(result["groups"]) == {"all", "female", "male"} and "comet" not in result["groups"]["all"]


COMET_CHECKPOINT = Path.home() / ".cache" / "huggingface" / "hub" / "models--Unbabel--wmt22-comet-da"


@pytest.mark.skipif(not COMET_CHECKPOINT.exists(), reason="no COMET checkpoint on this machine and no hub access to fetch one")
def test_real_comet_model():
    from experiments.st_quality import comet_scorer

    scores = comet_scorer()([{"src": "I was tired.", "mt": "Ero stanca.", "ref": "Ero stanca."}])
    assert 0.5 < scores[0] <= 1.1
