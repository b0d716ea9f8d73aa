"""``python -m experiments.study``: a tiny study end to end (a tiny random multilingual Whisper saved as
a checkpoint folder, a generated three-language corpus), its rerun doing nothing, ``--dry-run``
writing nothing, the study file's one-line refusals, and the papers' study files planned against
placeholder manifests."""

import csv
import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile

from experiments.study.__main__ import main
from experiments.study.placeholders import write_placeholders
from experiments.study.schema import load_study
from extract.claims import claim_path
from extract.manifest import Utterance, write_manifest
from extract.provenance import file_sha256
from extract.store import ShardReader
from probing.results import load_rows
from tests.experiments.study.toy_study import toy_study_head
from tests.paths import CHECKOUT
from tests.tiny_whisper import save_tiny_whisper

CHECKOUT = CHECKOUT
STUDIES = CHECKOUT / "experiments" / "studies"
LANGUAGES = ("en", "it", "es")
RATE = 16_000


@pytest.fixture(scope="module")
def tiny_whisper(tmp_path_factory) -> Path:
    """A multilingual tiny random Whisper (it transcribes every test language through the library)
    with a 2-second input window (100 encoder frames)."""
    return save_tiny_whisper(tmp_path_factory.mktemp("tiny-whisper"), languages=LANGUAGES, source_positions=100, chunk_seconds=2)


PITCH_GAP = {"en": 120.0, "it": 30.0, "es": 8.0}  # female minus male pitch: what the probes can read differs by language
FEMALE_WORDS = {"en": 3, "it": 4, "es": 5}  # reference lengths: with hypotheses of one length, the error rates differ by gender and language
WORDS = "one two three four five six".split()


def write_corpus(root: Path, dataset: str = "cv") -> dict[str, Path]:
    """One manifest per language: 3 speakers per gender, 3 half-second clips each: a tone (higher
    for female speakers, by the language's :data:`PITCH_GAP`) in noise, read from a reference of
    4 words (male) or the language's :data:`FEMALE_WORDS`."""
    rng = np.random.default_rng(0)
    manifests = {}
    for language in LANGUAGES:
        rows = []
        for gender in ("female", "male"):
            for speaker in range(3):
                pitch = 110.0 + 12.0 * speaker + (PITCH_GAP[language] if gender == "female" else 0.0)
                for clip in range(3):
                    t = np.arange(RATE // 2) / RATE
                    audio = 0.3 * np.sin(2 * np.pi * pitch * t) + 0.1 * rng.standard_normal(len(t))
                    path = root / "audio" / f"{language}-{gender}-{speaker}-{clip}.wav"
                    path.parent.mkdir(parents=True, exist_ok=True)
                    soundfile.write(path, audio.astype(np.float32), RATE)
                    text = " ".join(WORDS[: FEMALE_WORDS[language] if gender == "female" else 4])
                    rows.append(Utterance(path.stem, str(path), language, text, gender, f"{language}-{gender[0]}{speaker}", dataset=dataset))
        manifests[language] = write_manifest(root / "manifests" / f"{language}.jsonl", rows)
    return manifests


STUDY = """\
name: tiny
out: runs/tiny
device: cpu
models:
  - {{name: wt, family: whisper, checkpoint: {checkpoint}, revision: null, dtype: float32, random_init: false}}
corpora:
  - {{name: cv, task: asr, manifests: {{en: manifests/en.jsonl, it: manifests/it.jsonl, es: manifests/es.jsonl}}}}
sites: [encoder.layer.0, encoder.final]
transcribe: {{max_new_tokens: 6}}
probes: {{probes: [positional], controls: [none, shuffled], seeds: [0], positions: 20, mdl: false}}
behaviour: {{gap: {{iterations: 50}}}}
"""


ALL_MANIFESTS = "en: manifests/en.jsonl, it: manifests/it.jsonl, es: manifests/es.jsonl"


def write_study(folder: Path, checkpoint: Path, text: str = STUDY) -> Path:
    path = folder / "tiny.yaml"
    path.write_text(text.format(checkpoint=checkpoint))
    return path


def _rows(path: Path) -> list[dict]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _mtimes(folder: Path) -> dict[str, int]:
    return {str(path.relative_to(folder)): path.stat().st_mtime_ns for path in sorted(folder.rglob("*")) if path.is_file()}


@pytest.fixture(scope="module")
def tiny_study(tmp_path_factory, tiny_whisper):
    """The tiny study run once; returns its file, its out folder and the first run's output."""
    folder = tmp_path_factory.mktemp("study")
    write_corpus(folder)
    study = write_study(folder, tiny_whisper)
    return study, folder / "runs" / "tiny"


def test_a_tiny_study_runs_end_to_end_and_its_rerun_only_checks(tiny_study, capsys):
    study, out = tiny_study
    assert main(["run", str(study), "--quiet"]) == 0
    first = capsys.readouterr().out
    assert "[study] results:" in first
    assert sorted(path.name for path in (out / "stores" / "wt").iterdir()) == ["cv-en", "cv-es", "cv-it"]
    probes = load_rows(out / "probes" / "probes.jsonl")
    assert len(probes) == 3 * 2 * 2  # languages x sites x controls
    assert {row["subject"]["model"] for row in probes.values()} == {"wt"}

    table = _rows(out / "results" / "f1_vs_gap.csv")
    assert [(row["language"], row["site"]) for row in table] == [(lang, site) for lang in sorted(LANGUAGES) for site in ("encoder.layer.0", "encoder.final")]
    for row in table:
        probe = next(
            r
            for r in probes.values()
            if r["subject"]["language"] == row["language"] and r["config"]["site"] == row["site"] and r["config"]["control"] == "none"
        )
        gap = json.loads((out / "behaviour" / "wt" / f"gap-cv-{row['language']}.json").read_text())
        assert (row["model"], row["dataset"], row["task"]) == ("wt", "cv", "female-male")
        assert float(row["f1_s"]) == pytest.approx(probe["f1_s"])
        assert float(row["gap_relative"]) == pytest.approx(gap["languages"][row["language"]]["gap_relative"])
        assert gap["settings"]["iterations"] == 50 and gap["subject"]["model"] == "wt"

    correlations = json.loads((out / "results" / "correlations.json").read_text())
    assert [(entry["site"], entry["n"]) for entry in correlations["f1_vs_gap"]] == [("encoder.layer.0", 3), ("encoder.final", 3)]
    final = correlations["f1_vs_gap"][1]
    xs = [float(row["f1_s"]) for row in table if row["site"] == "encoder.final"]
    ys = [float(row["gap_relative"]) for row in table if row["site"] == "encoder.final"]
    assert final["pearson_r"] == pytest.approx(np.corrcoef(xs, ys)[0, 1])

    results = (out / "RESULTS.md").read_text()
    assert results.startswith("# tiny: results")
    assert f"| wt | cv | encoder.final | fixed | 3 | {final['pearson_r']:+.3f} |" in results
    for row in (row for row in table if row["site"] == "encoder.final"):
        entry = json.loads(Path(row["gap_source"]).read_text())["languages"][row["language"]]
        rates = f"{entry['metric'].upper()} female {entry['groups']['female']['error_rate']:.2f}, male {entry['groups']['male']['error_rate']:.2f}"
        both_fail = min(entry["groups"]["female"]["error_rate"], entry["groups"]["male"]["error_rate"]) >= 100  # a random model's transcripts
        mark = " ‡" if both_fail else ""
        shown = f"| {row['language']} | female-male | fixed | {float(row['f1_s']):.2f} | {rates} | {float(row['gap_relative']):+.2f}{mark} |"
        assert shown in results, results
    if "‡" in results:
        assert "both groups' error rates are 100 % or more" in results
    figures = json.loads((out / "figures" / "figures.json").read_text())["figures"]
    assert {figure["kind"] for figure in figures} == {"f1_vs_gap", "f1_s_by_site", "gaps"}
    assert all((out / "figures" / name).stat().st_size > 0 for figure in figures for name in figure["paths"])
    assert "[f1_vs_gap-wt-cv.png](figures/f1_vs_gap-wt-cv.png)" in results

    before = _mtimes(out)
    started = time.time()
    assert main(["run", str(study), "--quiet"]) == 0
    elapsed = time.time() - started
    rerun = capsys.readouterr().out
    assert _mtimes(out) == before  # nothing recomputed, nothing rewritten
    for stage, count in (("extract", 3), ("transcribe", 3), ("probe", 12), ("asr_gap", 3), ("collect", 1), ("report", 1)):
        assert f"  {stage:<11} {count} of {count} done\n" in rerun
    assert elapsed < 10, f"the rerun took {elapsed:.1f} s"  # measured: 0.4 s on an idle 2-core machine


def test_dry_run_plans_and_writes_nothing(tmp_path, tiny_whisper, capsys, monkeypatch):
    import extract.spec

    def refuse(*args, **kwargs):
        raise AssertionError("a dry run loaded a model")

    monkeypatch.setattr(extract.spec, "load_extractor", refuse)
    monkeypatch.setattr(extract.spec, "load_generator", refuse)
    write_corpus(tmp_path)
    study = write_study(tmp_path, tiny_whisper)
    assert main(["run", str(study), "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert not (tmp_path / "runs").exists()
    assert "  extract     0 of 3 done, 3 to do\n    - wt cv-en\n" in printed
    assert "  probe       0 of 12 done, 12 to do\n" in printed  # the study lists its sites: the runs are known before extraction
    assert "[study] dry run: nothing loaded, nothing written" in printed


def test_stages_subset_with_executor_one_job_array_per_stage(tmp_path, tiny_whisper, monkeypatch, capsys):
    """--stages runs those stages only; --executor submits each stage's unfinished work as one array
    of numbered tasks through experiments.scheduling (its submitit call replaced here by running
    each task in this process)."""
    import experiments.scheduling as scheduling

    submitted = {}

    def run_here(args, name, tasks, skipped, rerun_hint):
        submitted[name] = ([task.number for task in tasks], [task.name for task in tasks], skipped, args.log_folder)
        for task in tasks:
            task.function(*task.args, **task.kwargs)
        return 0

    monkeypatch.setattr(scheduling, "run_tasks", run_here)
    write_corpus(tmp_path)
    study = write_study(
        tmp_path,
        tiny_whisper,
        STUDY.replace("en: manifests/en.jsonl, it: manifests/it.jsonl, es: manifests/es.jsonl", "en: manifests/en.jsonl, it: manifests/it.jsonl"),
    )
    assert main(["run", str(study), "--stages", "extract,transcribe", "--executor", "local", "--quiet"]) == 0
    out = tmp_path / "runs" / "tiny"
    assert submitted["extract"] == ([0, 1], ["wt cv-en shard 1/1", "wt cv-it shard 1/1"], 0, str(out / "logs" / "submitit" / "extract"))
    assert submitted["transcribe"][:3] == ([0, 1], ["wt cv-en (asr)", "wt cv-it (asr)"], 0)
    assert sorted(path.name for path in (out / "stores" / "wt").iterdir()) == ["cv-en", "cv-it"]
    assert len((out / "hyps" / "wt" / "cv-it.jsonl").read_text().splitlines()) == 18
    assert sorted(path.name for path in out.iterdir()) == ["hyps", "stores"]  # no probe, score or table
    submitted.clear()
    assert main(["run", str(study), "--stages", "extract,transcribe", "--executor", "local", "--quiet"]) == 0
    assert submitted == {}  # nothing left to submit
    capsys.readouterr()


def write_st_corpus(root: Path) -> None:
    """Fucci et al.'s shape in miniature: a MuST-C-like manifest the probe learns from (en-es,
    3 speakers per gender) and a MuST-SHE definition read by 2 other speakers per gender (category
    1F or 1M, one gendered term each), with its manifest through the MuST-SHE recipe."""
    from extract.corpora.must_she import must_she, write_definition

    rng = np.random.default_rng(1)

    def clip(path: Path, pitch: float) -> Path:
        t = np.arange(RATE // 2) / RATE
        path.parent.mkdir(parents=True, exist_ok=True)
        soundfile.write(path, (0.3 * np.sin(2 * np.pi * pitch * t) + 0.1 * rng.standard_normal(len(t))).astype(np.float32), RATE)
        return path

    rows = []
    for gender, pitch in (("female", 230.0), ("male", 110.0)):
        for speaker in range(3):
            for number in range(3):
                path = clip(root / "mustc" / f"{gender}-{speaker}-{number}.wav", pitch + 12 * speaker)
                speaker_id = f"ted-{gender[0]}{speaker}"
                rows.append(Utterance(path.stem, str(path), "en", "i am tired", gender, speaker_id, dataset="must_c", translation="estoy cansada"))
    write_manifest(root / "manifests" / "mustc-en-es.jsonl", rows)
    definition = []
    for gender, pitch, term in (("She", 240.0, "cansada cansado"), ("He", 105.0, "cansado cansada")):
        for speaker in range(2):
            for number in range(2):
                identifier = f"{gender.lower()}-{speaker}-{number}"
                clip(root / "mustshe" / "wav" / f"{identifier}.wav", pitch + 12 * speaker)
                reference = "estoy " + term.split()[0]
                definition.append(
                    {"ID": identifier, "LANG": "en-es", "TALK": f"t{speaker}", "SRC": "i am tired", "REF": reference, "WRONG-REF": "estoy " + term.split()[1]}
                    | {"SPEAKER": f"she-{gender}{speaker}", "GENDER": gender, "CATEGORY": f"1{gender[0]}", "TEXT-CATEGORY": "-", "GENDERTERMS": term}
                )
    tsv = write_definition(root / "mustshe" / "MONOLINGUAL.es.tsv", definition)
    write_manifest(root / "manifests" / "mustshe-en-es.jsonl", must_she(tsv).utterances)


ST_STUDY = """\
name: st
out: runs/st
device: cpu
models:
  - {{name: wt, family: whisper, checkpoint: {checkpoint}, sites: [encoder.final]}}
corpora:
  - {{name: must_c, task: st, manifests: {{en-es: manifests/mustc-en-es.jsonl}}}}
  - {{name: must_she, task: st, manifests: {{en-es: manifests/mustshe-en-es.jsonl}}, mustshe: {{en-es: mustshe/MONOLINGUAL.es.tsv}}}}
transcribe: {{max_new_tokens: 4, translate_by_forcing: true}}
probes: {{probes: [attention], controls: [none], seeds: [0], corpora: [must_c], apply_to: must_she, max_epochs: 2, lr: 0.001}}
"""


def test_a_tiny_translation_study_joins_the_applied_probe_with_mustshe_accuracy(tmp_path, tiny_whisper, capsys):
    write_st_corpus(tmp_path)
    study = write_study(tmp_path, tiny_whisper, ST_STUDY)
    assert main(["run", str(study), "--quiet"]) == 0
    out = tmp_path / "runs" / "st"
    (probe,) = load_rows(out / "probes" / "probes.jsonl").values()
    scores = json.loads((out / "behaviour" / "wt" / "mustshe-must_she-en-es.json").read_text())
    (row,) = _rows(out / "results" / "f1_vs_mustshe.csv")
    assert (row["model"], row["site"], row["tgt_lang"]) == ("wt", "encoder.final", "es")
    assert float(row["applied_f1_macro"]) == pytest.approx(probe["applied_f1_macro"])
    assert float(row["category_1_accuracy"]) == pytest.approx(scores["category_1"]["accuracy"])
    assert probe["applied_to"]["subject"]["dataset"] == "must_she" and probe["subject"]["dataset"] == "must_c"
    results = (out / "RESULTS.md").read_text()
    assert row["site_role"] == "final"
    assert f"| wt | encoder.final | final | es | {float(row['applied_f1_macro']):.2f} | {float(row['category_1_accuracy']):.2f} |" in results
    assert "No correlation at the final sites: a correlation needs at least 3 rows, got 1 (n = 1)." in results
    correlations = json.loads((out / "results" / "correlations.json").read_text())
    assert correlations["f1_vs_mustshe"]["where"] == {"site_role": "final"}
    assert not (out / "hyps" / "wt" / "must_c-en-es.jsonl").exists()  # the probe's training corpus is not translated
    capsys.readouterr()


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def dry_run_refusal(study: Path, capsys) -> str:
    """The one error line with which ``study run --dry-run`` refuses ``study`` (status 2)."""
    assert main(["run", str(study), "--dry-run"]) == 2
    return one_error_line(capsys)


def assert_edit_refused(tmp_path: Path, checkpoint: Path, capsys, template: str, edit: tuple[str, str], expected: str, write_inputs=None) -> None:
    """``template`` with ``edit`` applied (its text must be in the template) is refused by the dry run
    in one line that names the study file and holds ``expected`` (``{root}``: ``tmp_path``), and
    nothing is written. ``write_inputs(tmp_path)`` writes the manifests (default :func:`write_corpus`)."""
    assert edit[0] in template
    (write_inputs or write_corpus)(tmp_path)
    study = write_study(tmp_path, checkpoint, template.replace(*edit))
    line = dry_run_refusal(study, capsys)
    assert line.startswith(f"error: {study}: "), line
    assert expected.format(root=tmp_path) in line, line
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "edit, expected",
    [
        (("checkpoint:", "chekpoint:"), "tiny.yaml: models[0]: unknown key 'chekpoint'; did you mean 'checkpoint'?"),
        (("task: asr", "task: mt"), "tiny.yaml: corpora[0].task: 'mt' is not one of asr, st"),
        (
            ("it: manifests/it.jsonl", "it: manifests/missing.jsonl"),
            "tiny.yaml: 1 input file(s) do not exist, relative to the study file's folder {root}: corpora[0].manifests.it: {root}/manifests/missing.jsonl; ",
        ),
        (("probes: {{probes", "probe: {{probes"), "tiny.yaml: top level: unknown key 'probe'; did you mean 'probes'?"),
        (("positions: 20", "positions: twenty"), "tiny.yaml: probes: positions is int, got 'twenty' (str)"),
        (("iterations: 50", "iteration: 50"), "tiny.yaml: behaviour.gap: unknown key 'iteration'; did you mean 'iterations'?"),
        (("random_init: false", "random_init: 'no'"), "tiny.yaml: models[0].random_init: expected true or false, got 'no' (a string)"),
    ],
)
def test_a_study_file_error_is_one_line_naming_the_file_and_key(tmp_path, tiny_whisper, capsys, edit, expected):
    assert_edit_refused(tmp_path, tiny_whisper, capsys, STUDY, edit, expected)


def test_a_manifest_of_another_dataset_or_language_is_refused_before_anything_runs(tmp_path, tiny_whisper, capsys):
    write_corpus(tmp_path, dataset="common_voice")
    study = write_study(tmp_path, tiny_whisper)
    assert "records dataset 'common_voice', not 'cv'; the tables join on it" in dry_run_refusal(study, capsys)
    write_corpus(tmp_path)
    study = write_study(tmp_path, tiny_whisper, STUDY.replace("it: manifests/it.jsonl", "it: manifests/es.jsonl"))
    assert "is in 'es', not 'it'; give each language its own manifest" in dry_run_refusal(study, capsys)


@pytest.mark.parametrize(
    "name, manifests, plan",
    [
        (
            "attanasio2024",
            49,
            [
                "  extract     0 of 98 done, 98 to do",
                "  transcribe  0 of 98 done, 98 to do",
                "  asr_gap     0 of 108 done, 108 to do",
                "  acoustic    0 of 49 done, 49 to do",
                "  lexical     0 of 32 done, 32 to do",
                "  feature_gaps 0 of 3 done, 3 to do",
            ],
        ),
        (
            "boito2022",
            2,
            [
                "  extract     0 of 6 done, 6 to do",
                "    - lb-f-1k-large mtedx_probe-fr",
                "  transcribe  0 of 1 done, 1 to do",
                "    - xlsr-53-french mtedx-fr (asr)",
                "  probe       0 of 6 done, 6 to do",
                "  asr_gap     0 of 1 done, 1 to do",
            ],
        ),
        (
            "fucci2025",
            4,
            [
                "  extract     0 of 12 done, 12 to do",
                "  transcribe  0 of 9 done, 9 to do",
                "  probe       0 of 15 done, 15 to do",
                "  mustshe     0 of 9 done, 9 to do",
            ],
        ),
    ],
)
def test_the_papers_studies_plan_against_placeholder_manifests(tmp_path, capsys, monkeypatch, name, manifests, plan):
    """Planned as on a machine with the spaCy pipelines of attanasio2024.yaml's lexical analysis
    installed (without them the plan names them: tests/experiments/study/test_study_analyses.py)."""
    monkeypatch.setattr("experiments.scoring.spacy_pipeline.pipeline_problem", lambda name: None)
    study_file = STUDIES / f"{name}.yaml"
    assert len([path for path in write_placeholders(study_file, tmp_path) if path.suffix == ".jsonl"]) == manifests
    assert main(["run", str(study_file), "--root", str(tmp_path), "--dry-run"]) == 0
    printed = capsys.readouterr().out
    for line in plan:
        assert line in printed
    assert not (tmp_path / "runs").exists()
    study = load_study(study_file, tmp_path)
    assert study.out == tmp_path / "runs" / name


POOLED_STUDY = """\
name: pooled
out: runs/pooled
device: cpu
models:
  - {{name: wt, family: whisper, checkpoint: {checkpoint}, sites: [encoder.layer.0, encoder.final]}}
  - {{name: wt-en, family: whisper, checkpoint: {checkpoint}, sites: [encoder.final], languages: [en]}}
  - {{name: tiny-s2t, family: s2t, checkpoint: tiny-random, sites: [encoder.final], languages: [en, it], transcribe: false}}
corpora:
  - {{name: cv, task: asr, manifests: {{all: manifests/all.jsonl}}}}
transcribe: {{max_new_tokens: 6}}
probes:
  - {{models: [wt], sites: [encoder.layer.0], positions: 20}}
  - {{models: [wt], sites: [encoder.final], positions: 20, mdl: true}}
  - {{models: [wt, wt-en], sites: [encoder.final], languages: [en, it, es], positions: 20}}
  - {{models: [tiny-s2t], probes: [mean], split: loso}}
  - {{models: [f0], probes: [mean], split: loso}}
baselines: {{f0: {{corpora: [cv]}}}}
behaviour: {{gap: {{iterations: 50}}}}
"""


def write_pooled_corpus(root: Path) -> Path:
    """The three languages of :func:`write_corpus` in one manifest (a pooled part)."""
    manifests = write_corpus(root)
    from extract.manifest import read_manifest

    return write_manifest(root / "manifests" / "all.jsonl", [u for language in LANGUAGES for u in read_manifest(manifests[language])])


def test_a_pooled_part_with_a_list_of_grids_joins_per_language_probes_to_per_language_gaps(tmp_path, tiny_whisper, capsys):
    """One manifest of three languages (key all): one store and one hypotheses file per model; the
    gap report splits per language; the per-language probes join those gaps in f1_vs_gap.csv; the
    pooled probes (language en+es+it) join none; a model restricted to [en] reads a filtered
    manifest; a tiny random model runs through the study; the MDL run exists once; a dry run writes
    nothing."""
    write_pooled_corpus(tmp_path)
    study = write_study(tmp_path, tiny_whisper, POOLED_STUDY)
    out = tmp_path / "runs" / "pooled"
    assert main(["run", str(study), "--dry-run"]) == 0
    assert not out.exists()
    planned = capsys.readouterr().out
    assert "  probe       0 of 8 done, 8 to do\n" in planned  # 1 + 1 + (3 + 1: wt-en reads English only) + 1 + 1 (f0)
    assert "  f0          0 of 1 done, 1 to do\n    - f0 cv-all\n" in planned
    assert main(["run", str(study), "--quiet"]) == 0
    capsys.readouterr()
    filtered = out / "manifests" / "wt-en" / "cv-all.jsonl"
    assert {json.loads(line)["language"] for line in filtered.read_text().splitlines()} == {"en"}
    store_config = ShardReader(out / "stores" / "wt-en" / "cv-all").info.config
    assert store_config["manifest_sha256"] == file_sha256(filtered)
    assert len((out / "hyps" / "wt-en" / "cv-all.jsonl").read_text().splitlines()) == 18
    assert len((out / "hyps" / "wt" / "cv-all.jsonl").read_text().splitlines()) == 54
    assert not (out / "hyps" / "tiny-s2t").exists()

    gap = json.loads((out / "behaviour" / "wt" / "gap-cv-all.json").read_text())
    assert sorted(gap["languages"]) == sorted(LANGUAGES)
    table = _rows(out / "results" / "f1_vs_gap.csv")
    assert sorted((row["model"], row["language"], row["site"]) for row in table) == sorted(
        [("wt", language, "encoder.final") for language in LANGUAGES] + [("wt-en", "en", "encoder.final")]
    )
    for row in table:
        if row["model"] == "wt":
            assert float(row["gap_relative"]) == pytest.approx(gap["languages"][row["language"]]["gap_relative"])
    long = _rows(out / "results" / "long.csv")
    pooled = {(row["site"], row["language"]) for row in long if row["kind"] == "probe" and row["model"] == "wt" and row["metric"] == "f1_s"}
    assert pooled == {("encoder.layer.0", "en+es+it"), ("encoder.final", "en+es+it")} | {("encoder.final", language) for language in LANGUAGES}
    mdl = [row for row in long if row["model"] == "wt" and row["metric"] == "compression"]
    assert [(row["site"], row["language"]) for row in mdl] == [("encoder.final", "en+es+it")]
    loso = {
        (row["model"], row["language"], row["split"]) for row in long if row["kind"] == "probe" and row["model"] == "tiny-s2t" and row["metric"] == "f1_macro"
    }
    assert loso == {("tiny-s2t", "en+it", "loso")}
    (f0,) = [row for row in long if row["kind"] == "probe" and row["model"] == "praat-f0" and row["metric"] == "f1_macro"]
    assert (f0["site"], f0["probe"], f0["split"], f0["language"], f0["dataset"]) == ("f0", "mean", "loso", "en+es+it", "cv")
    assert (out / "stores" / "f0" / "cv-all").is_dir()
    collected = json.loads((out / "results" / "collect.json").read_text())
    assert {(item["model"], item["language"]) for item in collected["unmatched"]["probes_without_gap"]} >= {("wt", "en+es+it")}


@pytest.mark.parametrize(
    "edit, expected",
    [
        (
            ("- {{models: [wt], sites: [encoder.layer.0]", "- {{modles: [wt], sites: [encoder.layer.0]"),
            "probes[0]: unknown key 'modles'; did you mean 'models'?",
        ),
        (("models: [tiny-s2t]", "models: [tiny-t2s]"), "probes[3].models: 'tiny-t2s' is not one of wt, wt-en, tiny-s2t"),
        (("{{all: manifests/all.jsonl}}", "{{en: manifests/en.jsonl, all: manifests/all.jsonl}}"), "probes[2].languages: a language filter needs pooled parts"),
        (("transcribe: false", "transcribe: [common_voice]"), "models[2].transcribe: 'common_voice' is not one of cv"),
        (("baselines: {{f0: {{corpora: [cv]}}}}", ""), "probes[4].models: 'f0' is not one of wt, wt-en, tiny-s2t"),
        (("{{corpora: [cv]}}", "{{corpora: [cv], range_by: voice}}"), "baselines.f0.range_by: 'voice' is not one of speaker, record"),
    ],
)
def test_a_grid_list_error_is_one_line_naming_the_file_and_key(tmp_path, tiny_whisper, capsys, edit, expected):
    assert_edit_refused(tmp_path, tiny_whisper, capsys, POOLED_STUDY, edit, expected, write_inputs=write_pooled_corpus)


def test_a_model_language_the_pooled_part_lacks_is_refused_before_anything_runs(tmp_path, tiny_whisper, capsys):
    write_pooled_corpus(tmp_path)
    study = write_study(tmp_path, tiny_whisper, POOLED_STUDY.replace("languages: [en]}", "languages: [fr]}"))
    line = dry_run_refusal(study, capsys)
    assert f"{study}: models[1].languages: cv-all ({tmp_path}/manifests/all.jsonl) has no utterance in 'fr'; its languages: en, es, it" in line
    assert not (tmp_path / "runs").exists()


def test_the_tiny_random_checkpoint_is_each_familys_tiny_model_labelled_so():
    from extract.families import FAMILIES
    from extract.spec import ModelSpec, load_extractor

    for family in FAMILIES:
        spec = ModelSpec(family, "tiny-random", device="cpu")
        assert spec.label() == spec.fingerprint() == spec.resolved_checkpoint() == f"tiny-random-{family}"
    extractor = load_extractor(ModelSpec("s2t", "tiny-random", device="cpu"))
    assert (extractor.checkpoint, extractor.fingerprint) == ("tiny-random-s2t", "tiny-random-s2t")


TWO_GAPS_STUDY = """\
name: tiny
out: runs/tiny
device: cpu
models:
  - {{name: wt, family: whisper, checkpoint: {checkpoint}, sites: [encoder.final]}}
corpora:
  - {{name: cv, task: asr, manifests: {{en: manifests/en.jsonl, it: manifests/it.jsonl}}}}
transcribe: {{max_new_tokens: 6}}
probes: {{probes: [positional], controls: [none], seeds: [0], positions: 20}}
behaviour:
  gap:
    - {{iterations: 50}}
    - {{groups: [other, male], languages: [en], iterations: 50}}
"""


def test_a_second_gap_comparison_is_scored_on_its_languages_and_reported_apart(tmp_path, tiny_whisper, capsys):
    """Attanasio et al. 2024 §4.2: "other" against "male" on some languages, beside female against male."""
    manifests = write_corpus(tmp_path)
    from extract.manifest import read_manifest

    english = read_manifest(manifests["en"])
    others = [Utterance(f"en-other-{k}", row.audio, "en", "one two three four", "other", f"en-o{k // 3}", dataset="cv") for k, row in enumerate(english[:9])]
    write_manifest(manifests["en"], [*english, *others])
    study = write_study(tmp_path, tiny_whisper, TWO_GAPS_STUDY)
    assert main(["run", str(study), "--quiet"]) == 0
    printed = capsys.readouterr().out
    out = tmp_path / "runs" / "tiny"
    behaviour = sorted(path.name for path in (out / "behaviour" / "wt").iterdir() if path.suffix == ".json")
    assert behaviour == ["gap-cv-en.json", "gap-cv-it.json", "gap_other-male-cv-en.json"], printed
    other = json.loads((out / "behaviour" / "wt" / "gap_other-male-cv-en.json").read_text())
    assert other["settings"]["groups"] == ["other", "male"] and list(other["languages"]) == ["en"]
    long = _rows(out / "results" / "long.csv")
    (row,) = [r for r in long if r["kind"] == "asr_gap" and r["task"] == "other-male" and r["metric"] == "gap_relative"]
    assert float(row["value"]) == pytest.approx(other["languages"]["en"]["gap_relative"])
    results = (out / "RESULTS.md").read_text()
    assert "## Other gap comparisons" in results and f"| other-male | wt | cv | en | {float(row['value']):+.2f} |" in results
    figures = json.loads((out / "figures" / "figures.json").read_text())["figures"]
    assert [figure["model"] for figure in figures if figure["kind"] == "gaps"] == ["wt"]  # the bars: female against male only


@pytest.mark.parametrize(
    "gap, expected",
    [
        ("[{groups: [other, male]}, {groups: [other, male], languages: [en]}]", "behaviour.gap[1].groups: other,male is compared in behaviour.gap[0] already"),
        ("[{groups: [other, male], languages: [de]}]", "behaviour.gap[0].languages: 'de' is not one of en, es, it"),
        ("[]", "behaviour.gap: expected a mapping or a non-empty list of mappings"),
    ],
)
def test_a_gap_list_error_is_one_line_naming_the_comparison(tmp_path, tiny_whisper, capsys, gap, expected):
    write_corpus(tmp_path)
    study = write_study(
        tmp_path, tiny_whisper, STUDY.replace("behaviour: {{gap: {{iterations: 50}}}}", "behaviour: {{gap: " + gap.replace("{", "{{").replace("}", "}}") + "}}")
    )
    assert expected in dry_run_refusal(study, capsys)


def test_every_missing_manifest_is_named_at_once_with_what_to_do(capsys):
    study_file = STUDIES / "attanasio2024.yaml"
    assert main(["run", str(study_file), "--dry-run"]) == 2
    line = one_error_line(capsys)
    assert "49 input file(s) do not exist, relative to the study file's folder" in line and "(49 in all)" in line
    assert "corpora[0].manifests.ar:" in line and "give --root the folder that holds them" in line and "--placeholders DIR" in line


def test_placeholders_are_written_by_the_command_never_over_a_file_and_the_plan_reads_them(tmp_path, capsys):
    study_file = STUDIES / "fucci2025.yaml"
    root = tmp_path / "data"
    assert main(["run", str(study_file), "--placeholders", str(root)]) == 0
    printed = capsys.readouterr().out
    written = sorted(path for path in root.rglob("*") if path.is_file())
    assert f"wrote {len(written)} placeholder files under {root}" in printed and f"--root {root} --dry-run" in printed
    manifest = next(path for path in written if path.suffix == ".jsonl")
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    speakers = [("female", f"f{i}") for i in range(3)] + [("male", f"m{i}") for i in range(3)]
    assert sorted((row["gender"], row["speaker"]) for row in rows) == [speaker for speaker in speakers for _ in range(3)]  # three lines each
    before = {path: path.read_bytes() for path in written}
    assert main(["run", str(study_file), "--placeholders", str(root)]) == 2
    assert "exists" in one_error_line(capsys) and {path: path.read_bytes() for path in written} == before
    assert main(["run", str(study_file), "--root", str(root), "--dry-run"]) == 0


@pytest.mark.parametrize("argv", [["--root"], ["--root", ""], ["--root", "  "]])
def test_root_without_a_folder_is_one_line_naming_the_unset_variable(argv, capsys):
    assert main(["run", str(STUDIES / "fucci2025.yaml"), *argv, "--dry-run"]) == 2
    line = one_error_line(capsys)
    assert "--root needs a folder, and got none: is the shell variable it names unset or empty" in line


def write_four_voices(root: Path, splits: dict[str, str] | None = None, clips: int = 2) -> None:
    """The newcomer audit's corpus: 2 speakers per gender (f0, f1, m0, m1), English and Italian,
    ``clips`` half-second tones each; ``splits``: speaker -> the manifest's split."""
    for language in ("en", "it"):
        rows = []
        for gender in ("female", "male"):
            for speaker in range(2):
                name = f"{gender[0]}{speaker}"
                for clip in range(clips):
                    path = root / "audio" / f"{language}-{name}-{clip}.wav"
                    path.parent.mkdir(parents=True, exist_ok=True)
                    t = np.arange(RATE // 2) / RATE
                    soundfile.write(path, (0.3 * np.sin(2 * np.pi * (220.0 if gender == "female" else 110.0 + 10 * speaker) * t)).astype(np.float32), RATE)
                    split = (splits or {}).get(name)
                    rows.append(Utterance(path.stem, str(path), language, "one two", gender, name, dataset="toy", **({"split": split} if split else {})))
        write_manifest(root / f"toy-{language}.jsonl", rows)


FOUR_VOICES = (
    toy_study_head("four", "en: toy-en.jsonl, it: toy-it.jsonl", family="{family}")
    + """\
probes: {{probes: [{probe}], controls: [none], seeds: [0], positions: 10{options}}}
behaviour: {{gap: {{iterations: 10}}}}
"""
)


def four_voices_study(folder: Path, family: str = "whisper", probe: str = "positional", options: str = "") -> Path:
    path = folder / "four.yaml"
    path.write_text(FOUR_VOICES.format(family=family, probe=probe, options=options))
    return path


def test_a_study_accepts_the_stratified_split_the_probe_command_accepts(tmp_path, capsys):
    """Two speakers a gender: the fixed split refuses an attention probe (3 speakers a class), the
    stratified split (speakers shared) takes it, in the study as on the command line."""
    write_four_voices(tmp_path, clips=5)
    refused = four_voices_study(tmp_path, probe="attention")
    assert "the fixed split needs at least 3" in dry_run_refusal(refused, capsys)
    study = four_voices_study(tmp_path, probe="attention", options=", split: stratified")
    assert main(["run", str(study), "--dry-run"]) == 0
    assert "error" not in capsys.readouterr().err


@pytest.mark.parametrize(
    "splits, probe, options, expected",
    [
        (
            None,
            "attention",
            "",
            "(attention probe): the speakers in language en (the manifest gives no train and test split): the fixed split needs at least 3 ",
        ),
        (
            {"f0": "train", "m0": "train", "f1": "test", "m1": "test"},
            "attention",
            "",
            "the manifest's train split in language en (its dev split is carved from it): the fixed split needs at least 2 ",
        ),
        ({"f0": "train", "m0": "train", "f1": "train", "m1": "test"}, "positional", "", "the test split in language en lacks one of the classes male/female"),
        (
            None,
            "attention",
            ", split: loso",
            "leave-one-speaker-out in language en needs at least 3 male speakers (one held out, one for the dev split, one to train on), "
            "got 2 (m0, m1; speakers in language en: 2 male, 2 female)",
        ),
        # two clips a speaker: 20 % of two rounds to none, so no speaker has a test clip
        (None, "positional", ", split: stratified", "the speaker-stratified test split in language en lacks one of the classes male/female (0 male, 0 female"),
    ],
)
def test_the_dry_run_refuses_a_probe_split_the_run_would_refuse(tmp_path, capsys, splits, probe, options, expected):
    write_four_voices(tmp_path, splits)
    study = four_voices_study(tmp_path, probe=probe, options=options)
    line = dry_run_refusal(study, capsys)
    assert line.startswith(f"error: {study}: probes: tiny toy-en") and expected in line, line
    assert not (tmp_path / "runs").exists()


def test_the_dry_run_refuses_transcribing_with_a_tiny_random_model_that_has_no_tokenizer_offline(tmp_path, capsys):
    write_four_voices(tmp_path)
    study = four_voices_study(tmp_path, family="s2t")
    assert "models[0] (tiny): the tiny random s2t model (checkpoint tiny-random) has no tokenizer offline" in dry_run_refusal(study, capsys)
    study.write_text(study.read_text().replace("checkpoint: tiny-random,", "checkpoint: tiny-random, transcribe: false,"))
    assert main(["run", str(study), "--dry-run"]) == 0


def test_four_voices_with_tiny_random_whisper_run_offline_to_a_scatter_and_a_changed_manifest_is_refused_by_the_plan(tmp_path, capsys, monkeypatch):
    """The audit's first study: tiny-random Whisper (transcribing offline), 2 speakers per gender in two
    languages, the default split with positional probes: one run, no failed attempt, probe rows joined
    with the gaps. Then a manifest edited after extraction is refused by the dry run, naming the store."""
    import transformers

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda *args, **kwargs: (_ for _ in ()).throw(OSError("no hub in this test")))
    write_four_voices(tmp_path)
    study = four_voices_study(tmp_path)
    assert main(["run", str(study), "--quiet"]) == 0, capsys.readouterr()
    out = tmp_path / "runs" / "four"
    assert [(row["language"], row["site"]) for row in _rows(out / "results" / "f1_vs_gap.csv")] == [("en", "encoder.final"), ("it", "encoder.final")]
    results = (out / "RESULTS.md").read_text()
    assert "| error rate per group |" in results and " female " in results and "† unreliable interval: en: only 2 speakers in a group" in results
    capsys.readouterr()
    manifest = tmp_path / "toy-en.jsonl"
    manifest.write_text(manifest.read_text().replace('"speaker": "m1"', '"speaker": "m2"'))
    line = dry_run_refusal(study, capsys)
    assert f"{out / 'stores' / 'tiny' / 'toy-en'} was written from {manifest} as it was before or with other settings (sha256 " in line
    assert "the extraction would refuse to add to it (and 1 more output(s) of extract, transcribe); rerun with --redo extract,transcribe" in line
    shutil.rmtree(out / "stores")  # the hypotheses too, once the stores are gone (the plan reads them first)
    assert main(["run", str(study), "--dry-run", "--stages", "transcribe"]) == 2
    line = one_error_line(capsys)
    assert (
        f"{out / 'hyps' / 'tiny' / 'toy-en.jsonl'} was written from {manifest} as it was before or with other settings "
        "(other settings: manifest_sha256: " in line
    )
    assert "the transcription would refuse to add to it" in line


def test_finished_transcripts_decoded_with_another_max_new_tokens_are_stale_not_done(tmp_path, capsys):
    """decoding.overrides (num_beams, max_new_tokens) bind the hypotheses they produced: after the
    study's bound changes, the plan names the file and the --redo instead of calling it done."""
    write_four_voices(tmp_path)
    study = four_voices_study(tmp_path)
    study.write_text(study.read_text() + "transcribe: {num_beams: 1, max_new_tokens: 4}\n")
    assert main(["run", str(study), "--stages", "transcribe", "--quiet"]) == 0, capsys.readouterr()
    hypotheses = tmp_path / "runs" / "four" / "hyps" / "tiny" / "toy-en.jsonl"
    recorded = json.loads(hypotheses.with_name("toy-en.jsonl.settings.json").read_text())["decoding"]["overrides"]
    assert recorded == {"num_beams": 1, "max_new_tokens": 4}
    capsys.readouterr()
    assert main(["run", str(study), "--dry-run", "--stages", "transcribe"]) == 0
    assert "2 of 2 done" in capsys.readouterr().out  # the same settings: finished
    study.write_text(study.read_text().replace("max_new_tokens: 4", "max_new_tokens: 6"))
    assert main(["run", str(study), "--dry-run", "--stages", "transcribe"]) == 2
    line = one_error_line(capsys)
    assert f"{hypotheses} was written from " in line and "--redo transcribe" in line
    assert "(other settings: decoding.overrides: {'num_beams': 1, 'max_new_tokens': 4} vs {'num_beams': 1, 'max_new_tokens': 6})" in line


def test_loso_probes_reach_the_scatter_and_probe_scores_without_a_gap_are_shown(tmp_path, capsys):
    """The docs recommend leave-one-speaker-out for small corpora: its positional rows are joined with
    the gaps (split loso), and a kind no gap joins (mean) still has its numbers in RESULTS.md."""
    write_four_voices(tmp_path)
    study = four_voices_study(tmp_path, probe="positional, mean", options=", split: loso")
    assert main(["run", str(study), "--quiet"]) == 0, capsys.readouterr()
    out = tmp_path / "runs" / "four"
    assert [(row["language"], row["split"]) for row in _rows(out / "results" / "f1_vs_gap.csv")] == [("en", "loso"), ("it", "loso")]
    results = (out / "RESULTS.md").read_text()
    assert "## Probe scores without a gap" in results
    assert "| tiny | toy | en | encoder.final | mean | loso | F1 |" in results and "| tiny | toy | it | encoder.final | mean | loso | F1 |" in results


def test_the_site_heatmap_never_averages_fixed_and_loso_rows(tmp_path):
    from types import SimpleNamespace

    from experiments.results.collect import LONG, write_csv
    from experiments.study import report

    def row(model, split, value, site="encoder.final"):
        return {"kind": "probe", "model": model, "dataset": "toy", "language": "en", "site": site, "probe": "positional", "control": "none"} | {
            "seed": 0, "task": "female-male", "split": split, "applied_to": "", "metric": "f1_s", "site_index": 1, "value": value, "source": "p:1"
        }  # fmt: skip

    layout = SimpleNamespace(results=tmp_path / "results", figures=tmp_path / "figures", out=tmp_path)
    layout.results.mkdir()
    write_csv([row("both", "fixed", 80.0), row("both", "loso", 20.0), row("loso-only", "loso", 60.0)], LONG, layout.results / "long.csv")
    drawn = []
    plots = SimpleNamespace(site_heatmap=lambda scores, sites, languages, out, **options: drawn.append((scores, options["title"])) or [out])
    report._site_heatmaps(layout, plots)
    assert drawn == [
        ({("encoder.final", "en"): 80.0}, "both on toy\nspeaker-disjoint split"),
        ({("encoder.final", "en"): 60.0}, "loso-only on toy\nleave-one-speaker-out"),
    ]


def test_a_stopped_run_s_claim_on_a_transcript_is_refused_by_the_dry_run_naming_reclaim_stale(tmp_path, tiny_whisper, capsys):
    write_corpus(tmp_path)
    study = write_study(tmp_path, tiny_whisper)
    hypotheses = tmp_path / "runs" / "tiny" / "hyps" / "wt" / "cv-en.jsonl"
    hypotheses.parent.mkdir(parents=True)
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    gone = {"host": socket.gethostname(), "pid": int(finished.stdout), "since": "2026-11-27T05:07:01+0000"}
    claim_path(hypotheses).write_text(json.dumps(gone))

    line = dry_run_refusal(study, capsys)
    assert f"{hypotheses} is claimed by pid {gone['pid']}" in line and "which is gone" in line and "--reclaim-stale" in line

    assert main(["run", str(study), "--dry-run", "--reclaim-stale"]) == 0
    assert "which is gone: --reclaim-stale takes it over and resumes" in capsys.readouterr().out


@pytest.mark.parametrize(
    "first, second, fails",
    [(100.0, 100.0, True), (100.0, 250.0, True), (99.9, 100.0, False), (0.0, 0.0, False), (None, 100.0, False)],
)
def test_a_language_where_both_groups_fail_is_marked_in_results(first, second, fails):
    from experiments.study.report import all_fail

    assert all_fail(first, second) is fails
