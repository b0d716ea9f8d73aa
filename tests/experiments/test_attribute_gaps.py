"""Error-rate gaps between the groups of any speaker attribute (issue 32 item 1): hand-computed
rates, E and Δrel, k groups against a reference, labels checked against the transcribed manifest."""

from __future__ import annotations

import csv
import json

import pytest

from experiments import asr_gap
from experiments.results.records import gap_task
from experiments.scoring.gaps import gap_report, hypotheses_attribute, read_hypotheses
from extract.attributes import LabelError
from extract.provenance import file_sha256

REFERENCE = "cat dog bird fish frog"  # five words; no number words (the normaliser would respell them)
# speaker -> (accent, errors in each of its two utterances): north 2 errors in 20 words, south 4, west 1;
# a speaker without an accent is left out
SPEAKERS = {"n0": ("north", (1, 0)), "n1": ("north", (0, 1)), "s0": ("south", (1, 1)), "s1": ("south", (2, 0)), "w0": ("west", (0, 0)), "w1": ("west", (1, 0))}
SPEAKERS |= {"q0": (None, (5, 5))}


def _hypothesis(errors: int) -> str:
    words = REFERENCE.split()
    return " ".join(["toad"] * errors + words[errors:])


@pytest.fixture
def transcription(tmp_path):
    """A manifest with ``extra.accent``, the hypotheses transcribed from it and their settings file."""
    manifest, hypotheses = tmp_path / "manifest.jsonl", tmp_path / "hyps.jsonl"
    utterances, rows = [], []
    for number, (speaker, (accent, errors)) in enumerate(SPEAKERS.items()):
        gender = "female" if number % 2 else "male"
        for k, count in enumerate(errors):
            uid = f"{speaker}-{k}"
            extra = {"accent": accent} if accent else {}
            utterances.append({"id": uid, "audio": f"{uid}.wav", "language": "en", "text": REFERENCE, "gender": gender, "speaker": speaker, "extra": extra})
            rows.append({"id": uid, "reference": REFERENCE, "hypothesis": _hypothesis(count), "gender": gender, "speaker": speaker, "language": "en"})
    manifest.write_text("".join(json.dumps(u) + "\n" for u in utterances), encoding="utf-8")
    hypotheses.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    settings = {"manifest": str(manifest), "manifest_sha256": file_sha256(manifest)}
    (tmp_path / "hyps.jsonl.settings.json").write_text(json.dumps(settings), encoding="utf-8")
    return manifest, hypotheses


def test_two_groups_by_hand(transcription):
    manifest, hypotheses = transcription
    labels = hypotheses_attribute(hypotheses, "accent")
    report, counts = gap_report(read_hypotheses(hypotheses), ("south", "north"), 50, 0, estimate="full", hypotheses=hypotheses, attribute=labels)
    entry = report["languages"]["en"]
    assert {group: values["error_rate"] for group, values in entry["groups"].items()} == {"south": 20.0, "north": 10.0}
    assert entry["gap_relative"] == pytest.approx(100.0) and entry["gap_absolute"] == pytest.approx(10.0)
    assert entry["delta_rel"] == pytest.approx(100 * 10 / 15) and entry["bootstrap"]["speakers"] == {"south": 2, "north": 2}
    assert entry["unlabelled"] == 2 and report["labels"] == {
        "attribute": "accent",
        "manifest": str(manifest),
        "manifest_sha256": file_sha256(manifest),
        "unlabelled": 2,
    }
    assert report["settings"]["attribute"] == "accent" and report["settings"]["groups"] == ["south", "north"]
    assert [entry["path"] for entry in report["inputs"]] == [str(hypotheses), str(manifest)]
    assert {c["group"] for c in counts} == {"north", "south", "west"} and not any(c["speaker"] == "q0" for c in counts)
    assert gap_task(report["settings"]) == "attribute:accent:south,north"  # the task of probe --attribute accent --groups south,north
    assert gap_task({"groups": ["female", "male"]}) == "female-male"


def test_each_group_against_a_reference(transcription):
    _, hypotheses = transcription
    labels = hypotheses_attribute(hypotheses, "accent")
    entry = gap_report(read_hypotheses(hypotheses), ("south", "west", "north"), 50, 0, estimate="full", attribute=labels)[0]["languages"]["en"]
    assert entry["reference"] == "north" and list(entry["comparisons"]) == ["south", "west"]
    assert entry["comparisons"]["south"]["gap_relative"] == pytest.approx(100.0)
    assert entry["comparisons"]["west"]["gap_relative"] == pytest.approx(100 * (5 - 10) / 10)  # west: 1 error in 20 words
    assert entry["comparisons"]["west"]["bootstrap"]["mean"].keys() == {"west", "north"}


def _accent_gap_argv(hypotheses, out, groups: str) -> list[str]:
    return ["--hypotheses", str(hypotheses), "--out", str(out), "--attribute", "accent", "--groups", groups, "--iterations", "20"]


def test_the_command(transcription, tmp_path, capsys):
    manifest, hypotheses = transcription
    out = tmp_path / "gap.json"
    argv = _accent_gap_argv(hypotheses, out, "south,west,north")
    assert asr_gap.main(argv) == 0
    printed = capsys.readouterr().out
    assert "E(south, north)" in printed and "E(west, north)" in printed and "left out 2 without accent" in printed
    assert json.loads(out.read_text())["languages"]["en"]["reference"] == "north"
    with pytest.raises(SystemExit):
        asr_gap.main(["--hypotheses", str(hypotheses), "--out", str(out), "--attribute", "accent"])
    assert "--attribute accent needs --groups" in capsys.readouterr().err
    manifest.write_text(manifest.read_text(encoding="utf-8").replace('"west"', '"western"'), encoding="utf-8")
    assert asr_gap.main(argv) == 2
    error = capsys.readouterr().err
    assert f"{manifest} changed since the transcription {hypotheses} was built from it" in error and error.count("\n") == 1


def test_gender_as_an_attribute_is_refused_with_what_to_give(transcription, capsys):
    _, hypotheses = transcription
    argv = ["--hypotheses", str(hypotheses), "--out", str(hypotheses.parent / "g.json"), "--attribute", "gender", "--groups", "female,male"]
    assert asr_gap.main(argv) == 2
    error = capsys.readouterr().err
    assert "has extra.gender" in error and "gender is each utterance's own label, not extra's: leave out --attribute" in error and error.count("\n") == 1


def test_labels_without_a_settings_file(transcription):
    manifest, hypotheses = transcription
    (hypotheses.parent / "hyps.jsonl.settings.json").unlink()
    with pytest.raises(LabelError, match="has no settings file naming its manifest; pass --labels MANIFEST"):
        hypotheses_attribute(hypotheses, "accent")
    with pytest.raises(LabelError, match="records no manifest sha256"):
        hypotheses_attribute(hypotheses, "accent", manifest)


def test_collect_joins_attribute_rows_with_attribute_gaps_only(tmp_path):
    """One store probed for gender and for accent, one transcription scored both ways: each probe row
    joins the gap of its own task, never the other's."""
    from experiments.collect import main as collect_main
    from experiments.scoring.gaps import save_gap_report
    from probing.grid import run_all
    from probing.run import ProbeConfig
    from tests.attribute_corpus import SITE, write_attribute_corpus

    speakers = {f"{accent}-{s}": accent for accent in ("north", "south", "west") for s in range(4)}
    manifest, store = write_attribute_corpus(tmp_path / "corpus", speakers, label="tiny")
    tasks = ("female-male", "attribute:accent:south,north")
    run_all([ProbeConfig(str(store), SITE, positions=4, task=task) for task in tasks], tmp_path / "probes.jsonl")
    hypotheses = tmp_path / "hyps.jsonl"
    rows = []
    for line in manifest.read_text(encoding="utf-8").splitlines():
        utterance = json.loads(line)
        errors = (2 if utterance["extra"]["accent"] == "south" else 0) + int(utterance["id"][-1]) % 2
        fields = {key: utterance[key] for key in ("id", "gender", "speaker", "language")}
        rows.append(fields | {"reference": REFERENCE, "hypothesis": _hypothesis(errors), "model": "tiny", "task": "asr", "dataset": "synthetic"})
    hypotheses.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    (tmp_path / "hyps.jsonl.settings.json").write_text(json.dumps({"manifest": str(manifest), "manifest_sha256": file_sha256(manifest)}), encoding="utf-8")
    reports = (("gender.json", ("female", "male"), None), ("accent.json", ("south", "north"), "accent"), ("three.json", ("south", "west", "north"), "accent"))
    for name, groups, attribute in reports:
        labels = hypotheses_attribute(hypotheses, attribute) if attribute else None
        report, counts = gap_report(read_hypotheses(hypotheses), groups, 20, 0, hypotheses=hypotheses, attribute=labels)
        save_gap_report(report, counts, tmp_path / name)
    out = tmp_path / "collected"
    argv = ["--probes", str(tmp_path / "probes.jsonl"), "--gaps", *(str(tmp_path / name) for name, _, _ in reports), "--out", str(out)]
    assert collect_main(argv) == 0
    with (out / "f1_vs_gap.csv").open(newline="") as handle:
        joined = {row["task"]: row["gap_source"] for row in csv.DictReader(handle)}
    assert joined == {"female-male": str(tmp_path / "gender.json"), "attribute:accent:south,north": str(tmp_path / "accent.json")}
    with (out / "long.csv").open(newline="") as handle:  # three groups: no probe task names them; their gaps are in the long table
        metrics = {row["metric"] for row in csv.DictReader(handle) if row["task"] == "attribute:accent:south,west,north"}
    assert {"comparisons.south.gap_relative", "comparisons.west.delta_rel"} <= metrics


def test_a_group_no_utterance_has_is_refused_naming_the_values(transcription, tmp_path, capsys):
    out = tmp_path / "gap.json"
    assert asr_gap.main(_accent_gap_argv(transcription[1], out, "south,east")) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: --groups south,east: no transcribed utterance has accent 'east' (in ") and error.count("\n") == 1
    assert "its values are north, south, west)" in error and not out.exists()


# --- three groups by hand: asr_gap and the study's report agree ------------------------------------

# speaker -> (group, errors in each utterance of "cat dog bird fish": four words each):
# x 4 errors in 16 words (25 %), y 2 in 16 (12.5 %), z (the reference) 4 in 24 (1/6)
THREE = {"x0": ("x", (1, 1)), "x1": ("x", (2, 0)), "y0": ("y", (0, 1)), "y1": ("y", (1, 0))}
THREE |= {"z0": ("z", (1, 0)), "z1": ("z", (0, 1)), "z2": ("z", (1, 1))}


def _three_groups(folder):
    reference = "cat dog bird fish"
    manifest, hypotheses, utterances, rows = folder / "manifest.jsonl", folder / "hyps.jsonl", [], []
    for number, (speaker, (group, errors)) in enumerate(THREE.items()):
        gender = "female" if number % 2 else "male"
        for k, count in enumerate(errors):
            uid = f"{speaker}-{k}"
            utterances.append(
                {"id": uid, "audio": f"{uid}.wav", "language": "en", "text": reference, "gender": gender, "speaker": speaker, "extra": {"g": group}}
            )
            hypothesis = " ".join(["toad"] * count + reference.split()[count:])
            rows.append({"id": uid, "reference": reference, "hypothesis": hypothesis, "gender": gender, "speaker": speaker, "language": "en"})
    manifest.write_text("".join(json.dumps(u) + "\n" for u in utterances), encoding="utf-8")
    hypotheses.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (folder / "hyps.jsonl.settings.json").write_text(json.dumps({"manifest": str(manifest), "manifest_sha256": file_sha256(manifest)}), encoding="utf-8")
    return manifest, hypotheses


def test_three_groups_by_hand_in_asr_gap_and_in_the_studys_report(tmp_path):
    """E(A, ref) = 100 (A - ref) / ref and Δrel = 100 (A - ref) / ((A + ref) / 2), each group against
    the last: x 25 % vs z 16.67 %: E 50, Δrel 40; y 12.5 % vs z: E -25, Δrel -28.57. The study's
    report (experiments.study.stages.behaviour.gap_behaviour) is the bytes asr_gap writes."""
    from experiments.study.stages.behaviour import gap_behaviour

    manifest, hypotheses = _three_groups(tmp_path)
    by_command = tmp_path / "asr_gap.json"
    argv = ["--hypotheses", str(hypotheses), "--out", str(by_command), "--attribute", "g", "--groups", "x,y,z", "--iterations", "20"]
    assert asr_gap.main(argv) == 0
    entry = json.loads(by_command.read_text())["languages"]["en"]
    assert {group: values["error_rate"] for group, values in entry["groups"].items()} == pytest.approx({"x": 25.0, "y": 12.5, "z": 100 / 6})
    assert entry["reference"] == "z" and list(entry["comparisons"]) == ["x", "y"]
    x, y = entry["comparisons"]["x"], entry["comparisons"]["y"]
    assert (x["gap_relative_full"], x["delta_rel"], x["gap_absolute"]) == pytest.approx((50.0, 40.0, 25 - 100 / 6))
    assert (y["gap_relative_full"], y["delta_rel"], y["gap_absolute"]) == pytest.approx(
        (-25.0, 100 * (12.5 - 100 / 6) / ((12.5 + 100 / 6) / 2), 12.5 - 100 / 6)
    )
    assert y["delta_rel"] == pytest.approx(-28.5714, abs=1e-4) and x["bootstrap"]["speakers"] == {"x": 2, "z": 3}
    options = {
        "groups": ["x", "y", "z"],
        "attribute": "g",
        "iterations": 20,
        "seed": 0,
        "normalizer": "whisper",
        "cer_spaces": "drop",
        "gap_estimate": "resampled",
    }
    in_study = tmp_path / "study.json"
    gap_behaviour(options, hypotheses, in_study, manifest).compute()
    assert in_study.read_bytes() == by_command.read_bytes()
