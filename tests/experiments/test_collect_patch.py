"""``collect --patch``: patch summaries (``experiments.patch``'s ``OUT.summary.json``) joined to probe
rows per site in ``f1_vs_patch.csv`` and their effects in ``long.csv``; the other outputs unchanged
without the flag; a wrong file, a newer schema or a malformed site refused in one line; and one
summary written by a patch run on the tiny-random Whisper, end to end."""

import json

import pytest

from experiments.collect import main as collect_main
from experiments.results.collect import read_csv
from tests.experiments.test_collect import SITE, _gap, _probe_row, _run_collect, _write_rows

OTHER_SITE = "encoder.final"


def _pairing(effect, pairs=4, speakers=2):
    return {"pairs": pairs, "scored": pairs, "not_patched": 0, "speakers": speakers, "effect": effect}


def _summary(path, model="m", dataset="cv", languages=("en",), task="asr", sites=None, **changes):
    """A patch summary as ``experiments.patch`` writes it, by hand."""
    sites = sites or {
        SITE: {"site_index": 0, "pairings": {"cross": _pairing(12.0), "within": _pairing(2.0)}, "cross_minus_within": 10.0, "ci95": [4.0, 16.0]},
        OTHER_SITE: {"site_index": 1, "pairings": {"cross": _pairing(1.0)}},
    }
    subject = {"model": model, "family": "whisper", "task": task, "tgt_lang": None, "dataset": dataset, "languages": list(languages)}
    summary = {"kind": "patch_summary", "schema": 1, "subject": subject, "frames": "speech", "rows": 12, "sites": sites} | changes
    path.write_text(json.dumps(summary))
    return path


def _collect(tmp_path, probes, *patch, capsys=None):
    argv = ["--probes", str(probes), "--gaps", str(_gap(tmp_path, model="m", languages=("en",))), "--out", str(tmp_path / "out")]
    assert collect_main(argv + (["--patch", *map(str, patch)] if patch else [])) == 0
    return tmp_path / "out"


def test_f1_vs_patch_joins_the_gender_probe_at_each_site_with_its_models_effect(tmp_path, capsys):
    rows = [_probe_row("r1", f1_s=70.0), _probe_row("r2", seed=1, f1_s=80.0), _probe_row("r3", site=OTHER_SITE, f1_s=60.0)]
    rows += [_probe_row("r4", model="n", f1_s=50.0), _probe_row("r5", site="encoder.layer.1", f1_s=55.0)]
    rows.append(_probe_row("r6", f1_s=40.0) | {"config": _probe_row("r6")["config"] | {"task": "attribute:age"}})  # not gender: never joined
    summary = _summary(tmp_path / "p.jsonl.summary.json")
    out = _collect(tmp_path, _write_rows(tmp_path / "probes.jsonl", rows), summary)
    table = read_csv(out / "f1_vs_patch.csv")
    assert [(row["site"], row["f1_s"], row["seeds"], row["cross_effect"], row["within_effect"]) for row in table] == [
        (SITE, "75.0", "0 1", "12.0", "2.0"),
        (OTHER_SITE, "60.0", "0", "1.0", ""),
    ]
    first = table[0]
    assert (first["cross_minus_within"], first["ci95_low"], first["ci95_high"], first["patch_task"], first["frames"]) == (
        "10.0",
        "4.0",
        "16.0",
        "asr",
        "speech",
    )
    assert (first["model"], first["dataset"], first["language"], first["task"], first["split"]) == ("m", "cv", "en", "female-male", "fixed")
    assert first["patch_source"] == str(summary) and first["probe_runs"] == "r1 r2"
    collected = json.loads((out / "collect.json").read_text())
    assert collected["tables"]["f1_vs_patch"]["rows"] == 2
    assert [(u["model"], u["site"]) for u in collected["unmatched"]["probes_without_patch"]] == [("n", SITE), ("m", "encoder.layer.1")]
    assert collected["unmatched"]["patch_without_probe"] == []
    assert "2 f1_vs_patch rows" in capsys.readouterr().out


def test_long_csv_has_one_line_per_site_pairing_and_measure_with_the_interval(tmp_path):
    out = _collect(tmp_path, _write_rows(tmp_path / "probes.jsonl", [_probe_row("r1", f1_s=70.0)]), _summary(tmp_path / "s.json"))
    patch = [row for row in read_csv(out / "long.csv") if row["kind"] == "patch"]
    at_site = {row["metric"]: row["value"] for row in patch if row["site"] == SITE}
    assert at_site["cross.effect"] == "12.0" and at_site["within.effect"] == "2.0" and at_site["cross.pairs"] == "4.0"
    assert (at_site["cross_minus_within"], at_site["ci95_low"], at_site["ci95_high"]) == ("10.0", "4.0", "16.0")
    assert {(row["model"], row["dataset"], row["language"], row["task"], row["site_index"]) for row in patch if row["site"] == SITE} == {
        ("m", "cv", "en", "asr", "0")
    }
    assert {row["metric"] for row in patch if row["site"] == OTHER_SITE} == {f"cross.{m}" for m in ("pairs", "scored", "not_patched", "speakers", "effect")}


def test_without_patch_the_outputs_are_those_of_collect_before_the_flag(tmp_path):
    probes = _write_rows(tmp_path / "probes.jsonl", [_probe_row("r1", f1_s=70.0)])
    with_patch = _collect(tmp_path, probes, _summary(tmp_path / "s.json"))
    kept = {name: (with_patch / name).read_text() for name in ("f1_vs_gap.csv", "f1_vs_mustshe.csv", "long.csv")}
    (with_patch / "f1_vs_patch.csv").unlink()
    plain = _collect(tmp_path, probes)
    assert not (plain / "f1_vs_patch.csv").exists()
    assert (plain / "f1_vs_gap.csv").read_text() == kept["f1_vs_gap.csv"] and (plain / "f1_vs_mustshe.csv").read_text() == kept["f1_vs_mustshe.csv"]
    assert kept["long.csv"].startswith((plain / "long.csv").read_text()) and ",patch," not in (plain / "long.csv").read_text()
    collected = json.loads((plain / "collect.json").read_text())
    assert list(collected["tables"]) == ["f1_vs_gap", "f1_vs_mustshe", "long"]
    assert list(collected["unmatched"]) == ["probes_without_gap", "gaps_without_probe", "applied_probes_without_mustshe", "mustshe_without_probe"]


def test_a_summary_of_several_languages_joins_the_probe_of_those_languages_only(tmp_path):
    rows = [_probe_row("r1", f1_s=70.0), _probe_row("r2", language="en+it", f1_s=65.0)]
    out = _collect(tmp_path, _write_rows(tmp_path / "probes.jsonl", rows), _summary(tmp_path / "s.json", languages=("it", "en")))
    assert {(row["language"], row["f1_s"]) for row in read_csv(out / "f1_vs_patch.csv")} == {("en+it", "65.0")}


def _refused(tmp_path, patch, capsys):
    probes = _write_rows(tmp_path / "probes.jsonl", [_probe_row("r1", f1_s=70.0)])
    status, error = _run_collect(["--probes", probes, "--patch", *patch, "--out", tmp_path / "out"], capsys)
    assert status == 2 and len(error.splitlines()) == 1, error
    assert not (tmp_path / "out").exists()
    return error


def test_the_rows_file_is_refused_naming_its_first_line_and_the_summary_to_give(tmp_path, capsys):
    rows = _write_rows(tmp_path / "p.jsonl", [{"kind": "patch_row", "schema": 1, "row_id": "a", "pair": "x", "site": SITE}] * 2)
    assert (
        _refused(tmp_path, [rows], capsys)
        == f"error: {rows}:1: a patch row, not a patch summary; give --patch {rows}.summary.json (the run's per-site effects)"
    )


def test_a_gap_report_given_as_patch_is_refused_naming_its_flag(tmp_path, capsys):
    gap = _gap(tmp_path, model="m", languages=("en",))
    assert _refused(tmp_path, [gap], capsys) == f"error: {gap}: given as --patch, but it is a asr_gap result; give it as --gaps"


def test_a_newer_schema_is_refused(tmp_path, capsys):
    summary = _summary(tmp_path / "s.json", schema=3)
    error = _refused(tmp_path, [summary], capsys)
    assert error == f"error: {summary}: a patch summary of schema 3, newer than this code reads (2); update the package"


@pytest.mark.parametrize(
    "sites, named",
    [
        ({SITE: {"pairings": {}}}, f"sites.{SITE}: not a site of a patch summary (no site_index or pairings)"),
        ({SITE: {"site_index": 0, "pairings": {"cross": _pairing("12")}}}, f"sites.{SITE}: pairings.cross.effect is '12' (str), not a number"),
        ({SITE: {"site_index": 0, "pairings": {}, "ci95": [1.0]}}, f"sites.{SITE}: ci95 is [1.0], not [low, high]"),
        ({SITE: {"site_index": 0, "pairings": {"cross": 5}}}, f"sites.{SITE}: pairings.cross is not a pairing of a patch summary (cross or within, an object)"),
    ],
)
def test_a_malformed_site_is_one_line_naming_file_and_site(tmp_path, capsys, sites, named):
    summary = _summary(tmp_path / "s.json", sites=sites)
    assert _refused(tmp_path, [summary], capsys) == f"error: {summary}: {named}; rerun python -m experiments.patch"


def test_a_summary_without_its_sites_is_refused_naming_the_command_that_writes_it(tmp_path, capsys):
    summary = _summary(tmp_path / "s.json")
    document = json.loads(summary.read_text())
    del document["sites"]
    summary.write_text(json.dumps(document))
    assert _refused(tmp_path, [summary], capsys) == f"error: {summary}: a patch_summary result without its 'sites' scores; rerun python -m experiments.patch"


def test_a_summary_written_before_it_recorded_its_dataset_is_refused(tmp_path, capsys):
    summary = _summary(tmp_path / "s.json")
    document = json.loads(summary.read_text())
    del document["subject"]["dataset"]
    summary.write_text(json.dumps(document))
    error = _refused(tmp_path, [summary], capsys)
    assert error == f"error: {summary}: a patch summary without subject.dataset (written before summaries recorded them); rerun python -m experiments.patch"


def test_two_summaries_of_one_model_dataset_language_and_task_are_refused_naming_both(tmp_path, capsys):
    one, other = _summary(tmp_path / "a.json"), _summary(tmp_path / "b.json", frames="0:5")
    error = _refused(tmp_path, [one, other], capsys)
    assert (
        error == f"error: two patch summaries claim (model m, dataset cv, language en, task asr): {one} and {other}; keep one (or give them different labels)"
    )


def test_a_summary_written_by_a_patch_run_joins_end_to_end(tmp_path):
    """The tiny-random Whisper patched at one site: its summary's subject is what the join reads."""
    from experiments.patching.run import run_patching, summary_path
    from tests.experiments.test_patch import _corpus, _job

    _corpus(tmp_path)
    job = _job(tmp_path, sites=SITE, label="m")
    run_patching(job, show_progress=False)
    summary = json.loads(summary_path(job.out).read_text())
    assert {key: summary["subject"][key] for key in ("model", "family", "task", "dataset", "languages")} == {
        "model": "m",
        "family": "whisper",
        "task": "asr",
        "dataset": None,
        "languages": ["en"],
    }
    probe = _probe_row("r1", f1_s=70.0)
    probe["subject"] |= {"dataset": None, "family": "whisper"}
    argv = ["--probes", str(_write_rows(tmp_path / "probes.jsonl", [probe])), "--patch", str(summary_path(job.out)), "--out", str(tmp_path / "c")]
    assert collect_main(argv) == 0
    (row,) = read_csv(tmp_path / "c" / "f1_vs_patch.csv")
    assert (row["model"], row["site"], row["site_role"], row["f1_s"]) == ("m", SITE, "layer", "70.0")
    assert float(row["cross_effect"]) == pytest.approx(summary["sites"][SITE]["pairings"]["cross"]["effect"])


def test_a_joint_site_goes_to_long_csv_only_without_a_role(tmp_path):
    """A joint site (A+B, patched together) has no probe to join: it is in long.csv, with its summary's
    site_index and no site_role, and neither in f1_vs_patch.csv nor among the unmatched keys."""
    joint = f"{SITE}+{OTHER_SITE}"
    sites = {
        SITE: {"site_index": 0, "pairings": {"cross": _pairing(12.0)}},
        joint: {"site_index": 1, "pairings": {"cross": _pairing(20.0), "within": _pairing(5.0)}, "cross_minus_within": 15.0, "ci95": [9.0, 21.0]},
    }
    out = _collect(tmp_path, _write_rows(tmp_path / "probes.jsonl", [_probe_row("r1", f1_s=70.0)]), _summary(tmp_path / "s.json", sites=sites))
    assert [row["site"] for row in read_csv(out / "f1_vs_patch.csv")] == [SITE]
    at_joint = [row for row in read_csv(out / "long.csv") if row["kind"] == "patch" and row["site"] == joint]
    values = {row["metric"]: row["value"] for row in at_joint}
    assert (values["cross.effect"], values["within.effect"], values["cross_minus_within"], values["ci95_low"]) == ("20.0", "5.0", "15.0", "9.0")
    assert {(row["site_index"], row["site_role"]) for row in at_joint} == {("1", "")}
    assert json.loads((out / "collect.json").read_text())["unmatched"]["patch_without_probe"] == []
