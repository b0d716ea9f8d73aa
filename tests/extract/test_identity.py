"""Every output names its model, data and inputs, and a run's identity is content, not spelling:
model labels (``--label``) in store configs, hypothesis rows and probe rows; one run id for every
spelling of a store's path; a resume from a changed manifest refused; behaviour outputs headed by
their schema, subject, inputs (path and sha256) and provenance."""

import hashlib
import json
from pathlib import Path

import pytest

from experiments import extract as extract_cli
from experiments.mustshe import main as mustshe_main
from experiments.reports.plots import site_condition_scores
from experiments.st_quality import main as st_quality_main
from experiments.transcribe import build_parser as transcribe_parser
from extract import jobs
from extract.families import tiny_extractor
from extract.jobs import ExtractionJob, extract
from extract.manifest import Utterance, write_manifest
from extract.provenance import file_identity, model_label, provenance
from extract.runner import SettingsMismatchError, check_settings
from extract.spec import ModelSpec
from extract.store import ShardReader, StoreError
from probing.grid import run_all
from probing.results import load_rows
from probing.run import ProbeConfig, run_probe
from tests.synthetic_store import write_store

SITE = "encoder.layer.0"


@pytest.mark.parametrize(
    "family, checkpoint, random_init, label",
    [
        ("whisper", "bundled-base", False, "whisper-base"),
        ("whisper", "bundled-base", True, "whisper-base-random"),
        ("whisper", "openai/whisper-large-v3", False, "whisper-large-v3"),
        ("seamless", "facebook/seamless-m4t-v2-large", False, "seamless-m4t-v2-large"),
        ("whisper", "/models/my-finetune/", False, "whisper-my-finetune"),
    ],
)
def test_default_labels_come_from_family_and_checkpoint(family, checkpoint, random_init, label):
    assert model_label(family, checkpoint, random_init) == label
    assert ModelSpec(family, checkpoint, device="cpu", random_init=random_init).label() == label


def test_three_spellings_of_a_store_are_one_run_and_the_rerun_skips_it(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_store(Path("stores/wb"), speakers_per_gender=5, utterances_per_speaker=3, length_range=(6, 9))
    spellings = ["stores/wb", "./stores/wb", "stores/wb/", str(tmp_path / "stores" / "wb")]
    configs = [ProbeConfig(spelling, SITE, positions=6) for spelling in spellings]
    assert len({config.run_id() for config in configs}) == 1
    run_all(configs[:1], tmp_path / "probes.jsonl")
    capsys.readouterr()
    run_all(configs[1:2], tmp_path / "probes.jsonl")
    assert "1 runs, 1 already in" in capsys.readouterr().out
    assert len((tmp_path / "probes.jsonl").read_text().splitlines()) == 1
    rows = load_rows(tmp_path / "probes.jsonl").values()
    scores, sites, conditions, _ = site_condition_scores(rows, "stores/wb/", None, "positional", None, [SITE])
    assert sites == [SITE] and conditions == ["pretrained"] and len(scores) == 1  # the heatmap's join does not depend on spelling either


def test_probe_rows_copy_the_stores_subject(tmp_path):
    config = {"label": "wl3", "checkpoint": "openai/whisper-large-v3", "revision": "abc", "random_init": False, "manifest_sha256": "12" * 32}
    labelled = write_store(
        tmp_path / "wl3", speakers_per_gender=5, utterances_per_speaker=3, language="it", dataset="cv", attributes={"family": "whisper", "config": config}
    )
    row = run_probe(ProbeConfig(str(labelled), SITE, probe="mean")).row
    assert row["schema"] == 1 and row["site_index"] == 0
    assert row["subject"] == {
        "model": "wl3",
        "family": "whisper",
        "checkpoint": "openai/whisper-large-v3",
        "revision": "abc",
        "manifest_sha256": "12" * 32,
        "dataset": "cv",
        "language": "it",
    }
    assert run_probe(ProbeConfig(str(labelled), SITE, probe="mean", language="it")).row["subject"]["language"] == "it"
    unlabelled = write_store(
        tmp_path / "old",
        speakers_per_gender=5,
        utterances_per_speaker=3,
        attributes={"family": "whisper", "config": {"checkpoint": "bundled-base", "random_init": True}},
    )
    assert run_probe(ProbeConfig(str(unlabelled), SITE, probe="mean")).row["subject"]["model"] == "whisper-base-random"  # a store from before labels


def _manifest(path: Path, tone, genders=("female", "male", "female", "male")) -> Path:
    utterances = [
        Utterance(id=f"u{i}", audio=str(tone(f"u{i}.wav", seconds=0.4)), language="en", text="x", gender=gender, speaker=f"s{i}", dataset="demo")
        for i, gender in enumerate(genders)
    ]
    write_manifest(path, utterances)
    return path


@pytest.fixture
def tiny_whisper(monkeypatch):
    monkeypatch.setattr(jobs, "load_extractor", lambda spec, keep_padding=False: tiny_extractor("whisper"))
    monkeypatch.setattr("extract.spec.load_extractor", lambda spec, keep_padding=False: tiny_extractor("whisper"))


def test_a_changed_manifest_refuses_the_resume_and_another_spelling_does_not(tmp_path, tone, tiny_whisper, monkeypatch):
    monkeypatch.chdir(tmp_path)
    manifest = _manifest(tmp_path / "m.jsonl", tone)
    spec = ModelSpec("whisper", "bundled-base", device="cpu")
    job = ExtractionJob(spec, Path("m.jsonl"), Path("store"), sites=("encoder.final",), utterances_per_part=2, label="wb")
    extract(job, show_progress=False)
    config = ShardReader("store").info.config
    first = hashlib.sha256(manifest.read_bytes()).hexdigest()
    assert (config["label"], config["manifest"], config["manifest_sha256"]) == ("wb", "m.jsonl", first)
    _, report = extract(
        ExtractionJob(spec, Path("./m.jsonl"), Path("store/"), sites=("encoder.final",), utterances_per_part=2, label="wb"), show_progress=False
    )
    assert report.resumed == 4 and report.written == 0  # the same manifest, spelled otherwise
    _manifest(tmp_path / "m.jsonl", tone, genders=("male", "male", "female", "male"))  # a corrected label
    now = hashlib.sha256(manifest.read_bytes()).hexdigest()
    with pytest.raises(StoreError) as refused:
        extract(job, show_progress=False)
    assert str(refused.value) == (
        f"store: --manifest m.jsonl changed since this store was started (sha256 {first[:12]}… then, {now[:12]}… now): use a new --out folder"
    )


def test_extract_label_flag_goes_into_the_store_config(tmp_path, tone, tiny_whisper, capsys):
    manifest = _manifest(tmp_path / "m.jsonl", tone)
    argv = ["--family", "whisper", "--checkpoint", "bundled-base", "--manifest", str(manifest), "--sites", "encoder.final", "--quiet", "--device", "cpu"]
    assert extract_cli.main([*argv, "--out", str(tmp_path / "labelled"), "--label", "my-whisper"]) == 0
    assert extract_cli.main([*argv, "--out", str(tmp_path / "default"), "--random-init"]) == 0
    assert "[extract] whisper-base-random:" in capsys.readouterr().out
    assert ShardReader(tmp_path / "labelled").info.config["label"] == "my-whisper"
    assert ShardReader(tmp_path / "default").info.config["label"] == "whisper-base-random"


def test_transcribe_takes_label_and_its_older_spelling_name():
    parser = transcribe_parser()
    common = ["--family", "whisper", "--manifest", "m.jsonl", "--task", "asr", "--out", "h.jsonl"]
    assert parser.parse_args([*common, "--label", "wb"]).label == "wb" and parser.parse_args([*common, "--name", "wb"]).label == "wb"


def test_a_transcription_resumed_from_a_changed_manifest_is_refused(tmp_path):
    path, out = tmp_path / "h.jsonl.settings.json", tmp_path / "h.jsonl"
    settings = {"model": "wb", "manifest": "m.jsonl", "manifest_sha256": "a" * 64, "provenance": provenance()}
    check_settings(path, settings, out)
    out.write_text('{"id": "u1", "hypothesis": "x"}\n')  # settings bind once the output holds a row
    check_settings(path, {**settings, "manifest": "./m.jsonl"}, out)  # another spelling of the same content
    with pytest.raises(SettingsMismatchError) as refused:
        check_settings(path, {**settings, "manifest_sha256": "b" * 64}, out)
    assert (
        str(refused.value)
        == f"{path}: --manifest m.jsonl changed since this hypotheses file was started (sha256 {'a' * 12}… then, {'b' * 12}… now): use a new --out file"
    )


def _header_is_complete(document: dict, schema: int, inputs: list[Path]):
    assert document["schema"] == schema and list(document)[:4] == ["schema", "subject", "inputs", "provenance"]
    assert document["inputs"] == [file_identity(path) for path in inputs]
    assert document["inputs"][0]["sha256"] == hashlib.sha256(inputs[0].read_bytes()).hexdigest()
    assert set(document["provenance"]) == {"package_version", "git_commit"}


def test_behaviour_outputs_name_their_subject_and_inputs(tmp_path):
    hypotheses = tmp_path / "h.jsonl"
    rows = [
        {"id": "it-1", "hypothesis": "Ero stanca.", "model": "wb", "language": "en", "task": "st", "tgt_lang": "it", "dataset": "must_she"},
        {"id": "it-2", "hypothesis": "Sono nato.", "model": "wb", "language": "en", "task": "st", "tgt_lang": "it", "dataset": "must_she"},
    ]
    hypotheses.write_text("".join(json.dumps(row) + "\n" for row in rows))
    (tmp_path / "h.jsonl.settings.json").write_text(json.dumps({"family": "whisper", "checkpoint": "c", "revision": None, "manifest_sha256": "9" * 64}))
    definition = tmp_path / "def.tsv"
    definition.write_text(
        "ID\tLANG\tTALK\tSRC\tREF\tWRONG-REF\tSPEAKER\tGENDER\tCATEGORY\tTEXT-CATEGORY\tGENDERTERMS\n"
        "it-1\ten-it\t1\tx\ty\tz\tA\tShe\t1F\tA\tstanca stanco\n"
        "it-2\ten-it\t2\tx\ty\tz\tB\tHe\t1M\tA\tnato nata\n"
    )
    assert mustshe_main(["--definition", str(definition), "--hypotheses", str(hypotheses), "--tgt-lang", "it", "--out", str(tmp_path / "ms.json")]) == 0
    scores = json.loads((tmp_path / "ms.json").read_text())
    _header_is_complete(scores, 1, [definition, hypotheses])
    assert scores["subject"] == {
        "model": "wb",
        "dataset": "must_she",
        "languages": ["en"],
        "tgt_langs": ["it"],
        "family": "whisper",
        "checkpoint": "c",
        "revision": None,
        "manifest_sha256": "9" * 64,
        "tgt_lang": "it",
    }
    assert scores["category_1"]["accuracy"] == 100.0
    translations = tmp_path / "st.jsonl"
    translations.write_text(
        "".join(json.dumps(row | {"reference": "Ero stanca.", "source": "I was tired.", "gender": "female", "speaker": "A"}) + "\n" for row in rows)
    )
    assert st_quality_main(["--hypotheses", str(translations), "--out", str(tmp_path / "st.json"), "--no-comet"]) == 0
    quality = json.loads((tmp_path / "st.json").read_text())
    _header_is_complete(quality, 1, [translations])
    assert (quality["subject"]["model"], quality["subject"]["tgt_langs"], quality["subject"]["checkpoint"]) == ("wb", ["it"], None)
