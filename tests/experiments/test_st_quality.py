import json
from pathlib import Path

import pytest

from experiments.scoring.translation_quality import bleu_chrf, evaluate, reference_streams
from experiments.st_quality import main

ROWS = [
    {
        "id": "a",
        "source": "I was very tired last night.",
        "reference": "Ero molto stanca ieri sera.",
        "hypothesis": "Ero molto stanca ieri sera.",
        "gender": "female",
    },
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
    assert main(["--hypotheses", str(hypotheses), "--out", str(tmp_path / "o.json"), "--no-comet"]) == 0
    result = json.loads((tmp_path / "o.json").read_text())
    assert set(result["groups"]) == {"all", "female", "male"} and "comet" not in result["groups"]["all"]


COMET_CHECKPOINT = Path.home() / ".cache" / "huggingface" / "hub" / "models--Unbabel--wmt22-comet-da"


@pytest.mark.skipif(not COMET_CHECKPOINT.exists(), reason="no COMET checkpoint on this machine and no hub access to fetch one")
def test_real_comet_model():
    from experiments.scoring.translation_quality import comet_scorer

    scores = comet_scorer()([{"src": "I was tired.", "mt": "Ero stanca.", "ref": "Ero stanca."}])
    assert 0.5 < scores[0] <= 1.1


def _cli(tmp_path, content) -> int:
    hypotheses = tmp_path / "h.jsonl"
    hypotheses.write_bytes(content) if isinstance(content, bytes) else hypotheses.write_text(content, encoding="utf-8")
    return main(["--hypotheses", str(hypotheses), "--out", str(tmp_path / "o.json"), "--no-comet"])


def _jsonl(*rows):
    return "".join(json.dumps(r) + "\n" for r in rows)


@pytest.mark.parametrize(
    "content, message",
    [
        (_jsonl(ROWS[0], ROWS[1], ROWS[0]), "h.jsonl:3: duplicate id 'a', first on {dir}/h.jsonl:1"),  # used to be scored twice
        (_jsonl(ROWS[0], {**ROWS[1], "hypothesis": None}), "h.jsonl:2: hypothesis must be a string, got null"),
        (_jsonl(ROWS[0], {**ROWS[1], "hypothesis": 1990}), "h.jsonl:2: hypothesis must be a string, got int 1990"),
        (_jsonl(ROWS[0], {**ROWS[1], "reference": None}), "h.jsonl:2: reference must be a string or a non-empty list of strings, got null"),
        (_jsonl({k: v for k, v in ROWS[0].items() if k != "hypothesis"}), "h.jsonl:1: missing key(s) hypothesis"),
        (_jsonl({k: v for k, v in ROWS[0].items() if k != "id"}), "h.jsonl:1: missing key(s) id"),
        (_jsonl({**ROWS[0], "gender": "manly woman"}), "h.jsonl:1: unrecognised gender value 'manly woman'"),
        ("\n", "h.jsonl: holds no translation rows (empty file)"),
        (_jsonl(ROWS[0]).replace("stanca", "stanc\u00e0").encode("latin-1"), "h.jsonl:1: not UTF-8"),
        (_jsonl({**ROWS[0], "tgt_lang": "it"}, {**ROWS[1], "tgt_lang": "fr"}), "h.jsonl: rows translate into several languages ['fr', 'it']"),
    ],
)
def test_cli_refuses_bad_rows_with_one_line(tmp_path, capsys, content, message):
    assert _cli(tmp_path, content) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and message.format(dir=tmp_path) in err
    assert not (tmp_path / "o.json").exists()


def test_cli_refuses_a_directory(tmp_path, capsys):
    assert main(["--hypotheses", str(tmp_path), "--out", str(tmp_path / "o.json"), "--no-comet"]) == 2
    assert f"error: {tmp_path}: is a directory" in capsys.readouterr().err


def test_target_language_from_transcribe_rows_picks_the_tokenizer(tmp_path):
    # experiments.transcribe writes `tgt_lang`; the old code looked for `target_language` and always used 13a
    rows = [{"id": "z", "source": "I am tired.", "reference": "我很累。", "hypothesis": "我很累。", "gender": "female", "tgt_lang": "zh"}]
    assert _cli(tmp_path, _jsonl(*rows)) == 0
    result = json.loads((tmp_path / "o.json").read_text())
    assert result["target_language"] == "zh" and "tok:zh" in result["groups"]["all"]["bleu_signature"]


@pytest.mark.parametrize(
    ("device", "gpus", "expected"),
    [
        (None, None, (0, None)),  # the default: COMET on the CPU, as before --device existed
        ("cpu", None, (0, None)),
        ("cpu", 0, (0, None)),
        (None, 2, (2, None)),  # --gpus alone, as before: cuda
        ("cuda", None, (1, None)),
        ("cuda", 2, (2, None)),
        ("cuda:3", None, (1, [3])),
        ("cuda:3", 1, (1, [3])),
    ],
)
def test_comet_runs_where_device_and_gpus_say(device, gpus, expected):
    from experiments.st_quality import comet_devices

    assert comet_devices(device, gpus) == expected


@pytest.mark.parametrize(
    ("device", "gpus", "message"),
    [
        ("cpu", 1, "--gpus 1 with --device cpu"),
        ("mps", None, "--device mps: COMET runs on cpu or cuda"),
        ("cuda:0", 2, "names one GPU"),
        (None, -1, "at least 0"),
    ],
)
def test_contradicting_device_and_gpus_are_refused(device, gpus, message):
    from experiments.st_quality import comet_devices

    with pytest.raises(ValueError, match=message):
        comet_devices(device, gpus)


def test_a_contradiction_is_one_line_before_anything_is_scored(tmp_path, capsys):
    hypotheses = tmp_path / "h.jsonl"
    hypotheses.write_text("".join(json.dumps(row | {"tgt_lang": "it"}) + "\n" for row in ROWS))
    assert main(["--hypotheses", str(hypotheses), "--out", str(tmp_path / "q.json"), "--device", "cpu", "--gpus", "1"]) == 2
    assert capsys.readouterr().err == "error: --gpus 1 with --device cpu: COMET would not use them; pass --device cuda\n"
    assert not (tmp_path / "q.json").exists()


STAND_IN_COMET = Path(__file__).resolve().parents[1] / "fixtures" / "stand_in_comet"


def _hypotheses(tmp_path) -> Path:
    path = tmp_path / "hyps.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    return path


def test_comet_in_another_interpreter_gives_the_in_process_scores(tmp_path, monkeypatch):
    """The same stand-in COMET scores the same segments here and through --comet-python (a subprocess
    that runs experiments/scoring/comet_worker.py by its path)."""
    import sys

    from experiments.scoring import translation_quality

    checkpoint = tmp_path / "model.ckpt"
    checkpoint.write_text("weights")
    monkeypatch.syspath_prepend(str(STAND_IN_COMET))
    monkeypatch.setenv("PYTHONPATH", str(STAND_IN_COMET))
    real = sys.modules.pop("comet", None)  # an unbabel-comet imported earlier (the legacy stack) gives way to the stand-in
    segments = [{"src": r["source"], "mt": r["hypothesis"], "ref": r["reference"]} for r in ROWS]
    try:
        here = translation_quality.comet_scorer(str(checkpoint))(segments)
    finally:
        sys.modules.pop("comet", None)
        if real is not None:
            sys.modules["comet"] = real
    there = translation_quality.comet_scorer(str(checkpoint), python=sys.executable)(segments)
    assert here == there == [(len(s["mt"]) + 7) / (len(s["ref"]) + len(s["src"]) + 1) for s in segments]
    out = tmp_path / "o.json"
    assert main(["--hypotheses", str(_hypotheses(tmp_path)), "--out", str(out), "--comet-model", str(checkpoint), "--comet-python", sys.executable]) == 0
    groups = json.loads(out.read_text())["groups"]
    assert groups["all"]["comet"] == pytest.approx(100 * sum(there) / len(there))


def test_without_comet_here_the_scores_are_bleu_and_chrf_and_comet_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    from experiments.scoring import translation_quality

    monkeypatch.setattr(translation_quality, "comet_installed", lambda: False)
    monkeypatch.setattr("experiments.st_quality.comet_installed", lambda: False)
    hypotheses, out = _hypotheses(tmp_path), tmp_path / "o.json"
    assert main(["--hypotheses", str(hypotheses), "--out", str(out)]) == 0
    assert "COMET not scored: unbabel-comet is not installed here" in capsys.readouterr().out
    assert "comet" not in json.loads(out.read_text())["groups"]["all"]
    assert main(["--hypotheses", str(hypotheses), "--out", str(out), "--comet"]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "[comet] extra" in error and "numpy<2, transformers<5" in error and "--comet-python" in error
    assert main(["--hypotheses", str(hypotheses), "--out", str(out), "--comet", "--no-comet"]) == 2
    assert capsys.readouterr().err.strip() == "error: --no-comet with --comet: choose one"


def test_comet_python_that_cannot_score_is_one_line(tmp_path, monkeypatch, capsys):
    """Not an executable, or an interpreter without COMET (or without the model: offline here)."""
    import sys

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hypotheses, out = _hypotheses(tmp_path), tmp_path / "o.json"
    assert main(["--hypotheses", str(hypotheses), "--out", str(out), "--comet-python", str(tmp_path / "nowhere")]) == 2
    assert (
        capsys.readouterr().err.strip()
        == f"error: --comet-python {tmp_path / 'nowhere'}: not an executable file; give the python of an environment with unbabel-comet"
    )
    assert main(["--hypotheses", str(hypotheses), "--out", str(out), "--comet-python", sys.executable, "--comet-model", str(tmp_path / "none.ckpt")]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and error.startswith(f"error: COMET in {sys.executable} failed (exit 2): ")
    assert "unbabel-comet is not installed" in error or "cannot load COMET model" in error
