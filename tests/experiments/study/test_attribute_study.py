"""A study file whose probe grid names an attribute task (issue 32 item 1): planned (a missing
attribute refused by --dry-run, in one line) and run end to end with a tiny random Whisper."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile

from experiments.study.__main__ import main
from extract.manifest import Utterance, write_manifest
from tests.experiments.study.toy_study import toy_study_head

RATE = 16_000
STUDY = """\
name: accents
out: runs/accents
device: cpu
models:
  - {{name: tiny, family: whisper, checkpoint: tiny-random, sites: [encoder.final], transcribe: false}}
corpora:
  - {{name: toy, task: asr, manifests: {{en: toy-en.jsonl}}}}
probes: {{probes: [mean], controls: [none], seeds: [0], task: "{task}"}}
"""


def write_accents(root: Path) -> Path:
    """Eight speakers, two half-second tones each; accent north or south, each with two female and two male speakers."""
    rows = []
    for number in range(8):
        speaker, accent = f"s{number}", ("north", "south")[number % 2]
        gender = ("female", "male")[(number // 2) % 2]
        for clip in range(2):
            path = root / "audio" / f"{speaker}-{clip}.wav"
            path.parent.mkdir(parents=True, exist_ok=True)
            t = np.arange(RATE // 2) / RATE
            soundfile.write(path, (0.3 * np.sin(2 * np.pi * (140.0 + 20 * number) * t)).astype(np.float32), RATE)
            rows.append(Utterance(path.stem, str(path), "en", "one two", gender, speaker, dataset="toy", extra={"accent": accent}))
    return write_manifest(root / "toy-en.jsonl", rows)


def test_a_study_probes_an_attribute(tmp_path, capsys):
    write_accents(tmp_path)
    missing = tmp_path / "missing.yaml"
    missing.write_text(STUDY.format(task="attribute:age"))
    assert main(["run", str(missing), "--dry-run"]) == 2
    error = capsys.readouterr().err
    assert "probes: tiny toy-en" in error and "no utterance has a value of extra.age" in error and error.count("\n") == 1
    study = tmp_path / "accents.yaml"
    study.write_text(STUDY.format(task="attribute:accent"))
    assert main(["run", str(study), "--quiet"]) == 0
    (row,) = [json.loads(line) for line in (tmp_path / "runs/accents/probes/probes.jsonl").read_text().splitlines()]
    assert row["config"]["task"] == "attribute:accent" and row["classes"] == ["north", "south"] and row["labels"]["unlabelled"] == 0


def test_the_pages_study_file_plans(tmp_path, capsys):
    """docs/attributes.md's study file, as written, planned with --dry-run on a placeholder corpus with extra.engine."""
    import re

    from tests.paths import CHECKOUT

    page = (CHECKOUT / "docs" / "attributes.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```yaml\n(.*?)```", page, re.S)
    rows = []
    for number in range(8):
        speaker, engine, gender = f"v{number}", ("espeak", "kokoro")[number % 2], ("female", "male")[(number // 2) % 2]
        path = tmp_path / "DATA" / "audio" / f"{speaker}.wav"
        path.parent.mkdir(parents=True, exist_ok=True)
        soundfile.write(path, np.zeros(RATE // 2, dtype=np.float32), RATE)
        for language in ("en", "es"):  # every voice speaks both, as the demo corpus's do
            rows.append(Utterance(f"{speaker}-{language}", str(path), language, "one two", gender, speaker, dataset="demo", extra={"engine": engine}))
    write_manifest(tmp_path / "DATA" / "manifest.jsonl", rows)
    study = tmp_path / "engines.yaml"
    study.write_text(block, encoding="utf-8")
    assert main(["run", str(study), "--dry-run"]) == 0, capsys.readouterr().err
    planned = capsys.readouterr().out
    assert "wb demo-all encoder.final mean control=none seed=0 task=attribute:engine" in planned
    for language in ("en", "es"):
        assert f"wb demo-all encoder.layer.3 positional control=shuffled seed=0 language={language} task=attribute:engine:espeak,kokoro" in planned
    assert "wb demo-all (engine: espeak,kokoro)" in planned, planned


GAPS_STUDY = (
    toy_study_head("accents", "en: toy-en.jsonl")
    + """\
transcribe: {{max_new_tokens: 4}}
probes: {{probes: [positional], controls: [none], seeds: [0], positions: 10, task: "attribute:accent:north,south"}}
behaviour:
  gap:
    - {{iterations: 10}}
    - {{attribute: {attribute}, groups: [{groups}], iterations: 10}}
"""
)


def test_a_study_scores_an_attribute_gap_and_collect_joins_it_with_the_attribute_probe(tmp_path, capsys, monkeypatch):
    """behaviour.gap with an attribute comparison beside the gender one: both reports written under
    their own names, the attribute's joined with the probe of the same task and never with gender's."""
    import transformers

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda *args, **kwargs: (_ for _ in ()).throw(OSError("no hub in this test")))
    write_accents(tmp_path)
    study = tmp_path / "accents.yaml"
    study.write_text(GAPS_STUDY.format(attribute="accent", groups="north, south"))
    assert main(["run", str(study), "--quiet"]) == 0, capsys.readouterr()
    behaviour = tmp_path / "runs/accents/behaviour/tiny"
    assert sorted(path.name for path in behaviour.glob("*.json")) == ["gap-toy-en.json", "gap_accent_north-south-toy-en.json"]
    report = json.loads((behaviour / "gap_accent_north-south-toy-en.json").read_text())
    assert report["settings"]["attribute"] == "accent" and report["settings"]["groups"] == ["north", "south"]
    assert list(report["languages"]["en"]["groups"]) == ["north", "south"] and report["labels"]["unlabelled"] == 0
    assert "attribute" not in json.loads((behaviour / "gap-toy-en.json").read_text())["settings"]
    import csv

    with open(tmp_path / "runs/accents/results/f1_vs_gap.csv", newline="") as table:
        (joined,) = list(csv.DictReader(table))
    assert joined["task"] == "attribute:accent:north,south" and float(joined["gap_relative"]) == report["languages"]["en"]["gap_relative"]
    collected = json.loads((tmp_path / "runs/accents/results/collect.json").read_text())
    assert [gap["task"] for gap in collected["unmatched"]["gaps_without_probe"]] == ["female-male"]
    from experiments import asr_gap

    hypotheses = tmp_path / "runs/accents/hyps/tiny/toy-en.jsonl"
    for name, flags in (("gap-toy-en.json", []), ("gap_accent_north-south-toy-en.json", ["--attribute", "accent", "--groups", "north,south"])):
        by_hand = tmp_path / "by-hand" / name  # the same comparison with asr_gap: the same bytes, the gender report as without the attribute's
        assert asr_gap.main(["--hypotheses", str(hypotheses), "--iterations", "10", *flags, "--out", str(by_hand)]) == 0
        assert (behaviour / name).read_bytes() == by_hand.read_bytes(), name
        assert (behaviour / name).with_suffix(".counts.jsonl").read_bytes() == by_hand.with_suffix(".counts.jsonl").read_bytes()
    figures = json.loads((tmp_path / "runs/accents/figures/figures.json").read_text())["figures"]
    (scatter,) = [figure for figure in figures if figure["kind"] == "f1_vs_gap"]
    assert scatter["paths"] == ["f1_vs_gap-tiny-toy-accent_north-south.png", "f1_vs_gap-tiny-toy-accent_north-south.pdf"]
    capsys.readouterr()
    assert main(["run", str(study), "--dry-run"]) == 0
    assert "asr_gap     2 of 2 done" in capsys.readouterr().out  # its labels' manifest is among its inputs, unchanged


@pytest.mark.parametrize(
    "attribute, groups, expected",
    [
        ("age", "teens, thirties", "behaviour.gap[1].attribute: no utterance of toy-en ({manifest}) has extra.age; the attributes its utterances have: accent"),
        ("accent", "north, west", "behaviour.gap[1].groups: no utterance of toy-en ({manifest}) has accent 'west'; its values: north, south; "),
        ("accent", "north", "behaviour.gap[1].groups: expected two or more different values of accent (strings or whole numbers), got ['north']"),
        ("acc:ent", "north, south", "behaviour.gap[1].attribute: attribute 'acc:ent': name a key of the manifest's extra"),
        (
            "gender",
            "female, male",
            "has extra.gender; the attributes its utterances have: accent; gender is each utterance's own label, not extra's: compare it without attribute",
        ),
        # a comma would spell the task of [north, south, west] (one report file for both comparisons)
        ("accent", '"north,south", west', "behaviour.gap[1].groups: accent 'north,south' holds a comma, which the gap's task and report name cannot spell"),
    ],
)
def test_an_attribute_gap_the_manifest_cannot_give_is_one_line_naming_the_study_file_and_key(tmp_path, capsys, attribute, groups, expected):
    write_accents(tmp_path)
    study = tmp_path / "accents.yaml"
    study.write_text(GAPS_STUDY.format(attribute=attribute, groups=groups).replace("acc:ent", '"acc:ent"'))
    assert main(["run", str(study), "--dry-run"]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: {study}: ") and expected.format(manifest=tmp_path / "toy-en.jsonl") in error and error.count("\n") == 1, error
    assert not (tmp_path / "runs").exists()


def test_an_attribute_gap_needs_its_groups_named(tmp_path, capsys):
    write_accents(tmp_path)
    study = tmp_path / "accents.yaml"
    study.write_text(GAPS_STUDY.format(attribute="accent", groups="north, south").replace(", groups: [north, south]", ""))
    assert main(["run", str(study), "--dry-run"]) == 2
    assert "behaviour.gap[1].groups: an attribute comparison names its groups: two or more values of accent" in capsys.readouterr().err


def test_a_study_grid_applies_an_attribute_probe_to_another_corpus(tmp_path, capsys):
    """apply_to beside an attribute task in a grid: planned (it was refused before the other store's
    attribute could be read from its manifest)."""
    write_accents(tmp_path)
    other = tmp_path / "other"
    write_accents(other)
    rows = [json.loads(line) for line in (other / "toy-en.jsonl").read_text().splitlines()]
    (other / "toy-en.jsonl").write_text("".join(json.dumps(row | {"dataset": "toy2", "speaker": "o" + row["speaker"]}) + "\n" for row in rows))
    study = tmp_path / "applied.yaml"
    text = STUDY.format(task="attribute:accent").replace("probes: [mean]", "probes: [attention]").replace('"}', '", apply_to: toy2}')
    second = "\n  - {name: toy2, task: asr, manifests: {en: other/toy-en.jsonl}}"
    study.write_text(text.replace("manifests: {en: toy-en.jsonl}}", "manifests: {en: toy-en.jsonl}}" + second))
    assert main(["run", str(study), "--dry-run"]) == 0, capsys.readouterr().err
    assert "tiny toy-en encoder.final attention control=none seed=0 task=attribute:accent applied to toy2-en" in capsys.readouterr().out


def test_results_md_lists_each_comparison_of_a_gap_of_three_groups_or_more(tmp_path):
    """A gap of groups [x, y, z] compares x and y with z: long.csv has its E as
    comparisons.x.gap_relative and comparisons.y.gap_relative (no gap_relative of its own), and
    RESULTS.md's "Other gap comparisons" lists both (it listed two-group comparisons only)."""
    from experiments.results.collect import write_csv
    from experiments.study.report import _other_gaps_section

    columns = ["kind", "model", "dataset", "language", "task", "metric", "value"]
    common = {"kind": "asr_gap", "model": "m", "dataset": "d", "language": "en"}
    three = common | {"task": "attribute:g:x.1,y,z"}
    rows = [
        common | {"task": "attribute:accent:north,south", "metric": "gap_relative", "value": "10.0"},
        three | {"metric": "comparisons.x.1.gap_relative", "value": "50.0"},
        three | {"metric": "comparisons.y.gap_relative", "value": "-25.0"},
        three | {"metric": "comparisons.y.delta_rel", "value": "-28.6"},
        three | {"metric": "comparisons.y.bootstrap.gap_relative", "value": "4.4"},
        common | {"task": "female-male", "metric": "gap_relative", "value": "3.0"},
    ]
    long = write_csv(rows, columns, tmp_path / "long.csv")
    lines = _other_gaps_section({"long": long})
    assert "| attribute:accent:north,south | m | d | en | +10.00 |" in lines
    assert "| attribute:g: x.1-z (of 3 groups) | m | d | en | +50.00 |" in lines and "| attribute:g: y-z (of 3 groups) | m | d | en | -25.00 |" in lines
    assert not any("female-male" in line or "28.6" in line or "4.4" in line for line in lines)


@pytest.mark.parametrize(
    ("task", "probes", "controls", "expected"),
    [
        ("attribute:nosuch:a,b", "mean", "none", "no utterance has a value of extra.nosuch; the attributes its utterances have: accent"),  # N11
        ("attribute:accent", "positional", "none", "--probe positional tells two classes apart, and attribute:accent has 3 classes"),  # N12
        ("attribute:accent", "mean", "none, shuffled", "the shuffled control is defined for two classes, and attribute:accent has 3 classes"),  # N13
    ],
)
def test_the_dry_run_refuses_what_the_probe_stage_would(tmp_path, capsys, task, probes, controls, expected):
    """Round 4's N11-N13 (issue 42): the plan says what the probe stage would refuse, before anything is extracted."""
    manifest = write_accents(tmp_path)
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    for number, row in enumerate(rows):
        row["extra"]["accent"] = ("north", "south", "west")[(number // 2) % 3]  # three accents, by speaker
    manifest.write_text("".join(json.dumps(row) + "\n" for row in rows))
    study = tmp_path / "s.yaml"
    text = STUDY.format(task=task).replace("probes: [mean], controls: [none]", f"probes: [{probes}], controls: [{controls}]")
    study.write_text(text.replace("seeds: [0],", "seeds: [0], positions: 10," if probes == "positional" else "seeds: [0],"))
    assert main(["run", str(study), "--dry-run"]) == 2
    error = capsys.readouterr().err
    assert expected in error and error.count("\n") == 1 and "probes: tiny toy-en" in error, error
    assert not (tmp_path / "runs").exists()
