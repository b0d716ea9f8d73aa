"""transcribe --engine ctranslate2 (extract.families.whisper_ct2): a tiny random Whisper checkpoint converted
with CTranslate2's converter decodes what the transformers engine decodes; conversion cached by fingerprint;
settings, labels, resume and refusals; the bundled base on both engines (slow)."""

import json
import shutil
import sys

import numpy as np
import pytest

from experiments.study import study_file
from experiments.transcribe import main as transcribe_main
from extract.families.generation import GenerationError, GenerationOptions
from extract.families.whisper_ct2 import converted_model, import_ctranslate2
from extract.jobs import TranscriptionJob
from extract.manifest import Utterance, write_manifest
from extract.spec import ModelSpec, load_generator
from extract.stage_options import TranscribeOptions
from tests.tiny_whisper import save_tiny_whisper

pytest.importorskip("ctranslate2")
CT2 = GenerationOptions(max_new_tokens=6, engine="ctranslate2", compute_type="float32")


@pytest.fixture(autouse=True)
def cache(tmp_path_factory, monkeypatch):
    """One conversion cache for the module's tests, away from the checkout's."""
    monkeypatch.setenv("SPEECH_GENDER_CACHE", str(tmp_path_factory.getbasetemp() / "ct2-cache"))


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A multilingual tiny random Whisper (en, it, es) with a 2 s window: 15 times less work than 30 s."""
    return save_tiny_whisper(tmp_path_factory.mktemp("tiny") / "whisper-tiny", languages=("en", "it", "es"), source_positions=100, chunk_seconds=2)


def audios(count=3):
    rng = np.random.default_rng(0)
    return [(0.1 * rng.standard_normal(8000 + 2000 * index)).astype(np.float32) for index in range(count)]


@pytest.mark.parametrize("task, tgt_lang, language", [("asr", None, "en"), ("asr", None, "it"), ("st", "en", "it")])
def test_the_converted_checkpoint_decodes_what_transformers_decodes(checkpoint, task, tgt_lang, language):
    spec = ModelSpec("whisper", str(checkpoint), device="cpu")
    reference = load_generator(spec, GenerationOptions(max_new_tokens=6)).generate(audios(), language, task, tgt_lang)
    generator = load_generator(spec, CT2)
    assert generator.engine == "ctranslate2" and generator.compute_type == "float32"
    assert generator.generate(audios(), language, task, tgt_lang) == reference
    assert all(reference)  # a random model's words: the comparison is not of empty strings


def test_an_english_only_checkpoint_takes_no_language_token_and_refuses_other_languages(tmp_path):
    spec = ModelSpec("whisper", str(save_tiny_whisper(tmp_path / "english", source_positions=100, chunk_seconds=2)), device="cpu")
    generator = load_generator(spec, CT2)
    assert generator.prompt("en", "asr", "en") == [generator.generation_config.decoder_start_token_id, generator.generation_config.no_timestamps_token_id]
    assert generator.generate(audios(1), "en", "asr") == load_generator(spec, GenerationOptions(max_new_tokens=6)).generate(audios(1), "en", "asr")
    with pytest.raises(GenerationError, match="English-only"):
        generator.generate(audios(1), "it", "asr")


def test_max_new_tokens_bounds_the_output(checkpoint):
    generator = load_generator(ModelSpec("whisper", str(checkpoint), device="cpu"), GenerationOptions(max_new_tokens=3, engine="ctranslate2"))
    assert all(len(text.split()) <= 3 for text in generator.generate(audios(), "en", "asr"))
    assert generator.new_tokens(4) == 3 and generator.compute_type == "int8"  # the CPU's default


def test_a_checkpoint_is_converted_once_and_keyed_by_its_content(checkpoint, tmp_path):
    first = converted_model(ModelSpec("whisper", str(checkpoint), device="cpu"))
    stamp = (first / "model.bin").stat().st_mtime_ns
    copy = shutil.copytree(checkpoint, tmp_path / "another-spelling")
    assert converted_model(ModelSpec("whisper", str(copy), device="cpu")) == first
    assert (first / "model.bin").stat().st_mtime_ns == stamp


def manifest_of(tmp_path, tone, count=4):
    utterances = [
        Utterance(id=f"u{i}", audio=str(tone(f"u{i}.wav", seconds=0.5 + 0.2 * i)), language="en", text="t", gender="female", speaker=f"s{i}")
        for i in range(count)
    ]
    utterances.append(Utterance(id="bad", audio=str(tmp_path / "missing.wav"), language="en", text="x", gender="male", speaker="s9"))
    path = tmp_path / "manifest.jsonl"
    write_manifest(path, utterances)
    return path


def run(checkpoint, manifest, out, *extra):
    argv = ["--family", "whisper", "--checkpoint", str(checkpoint), "--task", "asr", "--manifest", str(manifest), "--out", str(out)]
    try:
        return transcribe_main([*argv, "--device", "cpu", "--max-new-tokens", "4", "--batch-seconds", "4", "--quiet", *extra])
    except SystemExit as exit:  # an option refused while the flags are read
        return exit.code


def test_the_command_writes_labelled_rows_records_the_engine_and_resumes(checkpoint, tmp_path, tone, capsys):
    manifest, out = manifest_of(tmp_path, tone), tmp_path / "hyps.jsonl"
    assert run(checkpoint, manifest, out, "--engine", "ctranslate2", "--compute-type", "float32", "--limit", "3") == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["id"] for row in rows] == ["u0", "u1", "u2"] and {row["model"] for row in rows} == {"whisper-tiny-ct2-float32"}
    settings = json.loads((tmp_path / "hyps.jsonl.settings.json").read_text())
    assert (settings["engine"], settings["compute_type"]) == ("ctranslate2", "float32")
    assert settings["decoding"]["overrides"] == {"max_new_tokens": 4}
    capsys.readouterr()
    assert run(checkpoint, manifest, out, "--engine", "ctranslate2", "--compute-type", "float32") == 0  # resumes: the rest, bad audio skipped
    printed = capsys.readouterr().out
    assert "2 of 5 utterances to do (3 already in" in printed and "1 skipped for bad audio" in printed
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["u0", "u1", "u2", "u3"]
    assert run(checkpoint, manifest, out) == 2  # the transformers engine does not continue a ctranslate2 file
    error = capsys.readouterr().err
    assert "records other settings than this run" in error and "engine: 'ctranslate2' vs None" in error and len(error.splitlines()) == 1


def test_the_default_engine_records_what_it_recorded_before_engines_existed(checkpoint, tmp_path, tone, capsys):
    spec = ModelSpec("whisper", str(checkpoint), device="cpu")
    job = TranscriptionJob.of(TranscribeOptions(task="asr"), spec, manifest_of(tmp_path, tone), tmp_path / "h.jsonl")
    settings = job.settings("c", {}, fingerprint="f")
    assert "engine" not in settings and "compute_type" not in settings and job.model_name() == spec.label()
    assert job.options == GenerationOptions(decoder=None)  # engine transformers, compute type None: the defaults
    out = tmp_path / "old.jsonl"
    assert run(checkpoint, job.manifest, out, "--limit", "1") == 0
    recorded = json.loads((tmp_path / "old.jsonl.settings.json").read_text())
    assert "engine" not in recorded
    (tmp_path / "old.jsonl.settings.json").write_text(json.dumps(recorded))  # as an older run wrote it
    assert run(checkpoint, job.manifest, out, "--limit", "2", "--engine", "transformers") == 0


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--family", "s2t", "--engine", "ctranslate2"], "--engine ctranslate2 runs Whisper checkpoints only, not the s2t family"),
        (["--engine", "ctranslate2", "--intervene", "eraser.pt"], "--engine ctranslate2 cannot apply --intervene"),
        (["--compute-type", "int8"], "--compute-type is an option of --engine ctranslate2"),
        (["--checkpoint", "tiny-random", "--engine", "ctranslate2"], "random weights (--random-init, tiny-random) need the transformers engine"),
    ],
)
def test_what_the_engine_cannot_do_is_refused_in_one_line(checkpoint, tmp_path, tone, capsys, extra, message):
    assert run(checkpoint, manifest_of(tmp_path, tone, 1), tmp_path / "h.jsonl", *extra) == 2
    error = capsys.readouterr().err
    assert message in error and len(error.splitlines()) == 1
    assert not (tmp_path / "h.jsonl").exists()


def test_decoder_states_refuse_the_ctranslate2_engine(checkpoint, tmp_path, tone):
    from extract.decoder_run import DecoderStatesJob, run_decoder_states

    spec = ModelSpec("whisper", str(checkpoint), device="cpu")
    job = DecoderStatesJob(task="asr", spec=spec, manifest=manifest_of(tmp_path, tone, 1), out=tmp_path / "store")
    with pytest.raises(GenerationError, match="only the transformers engine has"):
        run_decoder_states(job, show_progress=False, generator=load_generator(spec, CT2))


def test_a_missing_ctranslate2_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)
    with pytest.raises(GenerationError, match=r"speech-gender-probing\[ctranslate2\]"):
        import_ctranslate2()


def test_the_engine_and_compute_type_are_study_keys():
    assert {"engine", "compute_type"} <= set(study_file.Transcribe.model_fields)
    with pytest.raises(ValueError, match="'onnx' is not one of transformers, ctranslate2"):
        study_file.Transcribe.model_validate({"engine": "onnx"})
    with pytest.raises(ValueError, match="'int4' is not one of int8, int8_float16, float16, float32"):
        study_file.Transcribe.model_validate({"compute_type": "int4"})


@pytest.mark.slow
def test_the_bundled_base_transcribes_alike_on_both_engines():
    """The bundled base (a CTranslate2 model as shipped, int8) and its transformers conversion on a clear Kokoro sentence."""
    import soxr

    from experiments.recipes.democorpus import kokoro
    from experiments.scoring.asr_metrics import corpus_error_rate, error_counts

    sentence = "I think we should meet again next week to finish the report."
    audio, rate = kokoro.synthesize(sentence, "jf_alpha", "en-us")
    clip = soxr.resample(audio, rate, 16_000).astype(np.float32)
    spec = ModelSpec("whisper", "bundled-base", device="cpu")
    reference = load_generator(spec, GenerationOptions(num_beams=1)).generate([clip], "en", "asr")
    hypothesis = load_generator(spec, GenerationOptions(num_beams=1, engine="ctranslate2")).generate([clip], "en", "asr")
    assert hypothesis == [sentence] and corpus_error_rate([error_counts(reference[0], hypothesis[0], "en")]) <= 10


def test_a_study_transcribes_on_the_engine_its_transcribe_keys_name(tmp_path, checkpoint, capsys):
    from experiments.study.__main__ import main as study_main
    from tests.experiments.study.test_study import STUDY, write_corpus, write_study

    write_corpus(tmp_path)
    keys = "transcribe: {{max_new_tokens: 6, engine: ctranslate2, compute_type: float32}}"
    study = write_study(tmp_path, checkpoint, STUDY.replace("transcribe: {{max_new_tokens: 6}}", keys))
    assert study_main(["run", str(study), "--stages", "transcribe", "--quiet"]) == 0, capsys.readouterr()
    hypotheses = tmp_path / "runs" / "tiny" / "hyps" / "wt" / "cv-en.jsonl"
    assert {json.loads(line)["model"] for line in hypotheses.read_text().splitlines()} == {"wt-ct2-float32"}
    assert json.loads(hypotheses.with_name("cv-en.jsonl.settings.json").read_text())["engine"] == "ctranslate2"
    capsys.readouterr()
    assert study_main(["run", str(study), "--dry-run", "--stages", "transcribe"]) == 0
    assert "3 of 3 done" in capsys.readouterr().out
