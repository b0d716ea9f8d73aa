"""Nothing silently wrong in the study layer (hostile-input round 3): each option checked by one
function shared by its command-line flag and the study file, claims judged by more than a pid,
outputs set aside instead of deleted, labels that cannot become spreadsheet formulas."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys

import pytest

from experiments.probe import main as probe_main
from experiments.study.__main__ import main as study_main
from extract.claims import Claim, ClaimError, process_identity, stale_holder
from extract.device import device_problem
from extract.provenance import label_problem
from extract.spec import ModelSpec, ModelSpecError
from extract.supersede import SUPERSEDED, SupersedeError, set_aside
from probing.data import ProbeError
from probing.grid import GridError, load_yaml
from probing.run import ProbeConfig
from tests.experiments.study.test_study import (  # noqa: F401  (tiny_whisper: a fixture)
    STUDY,
    assert_edit_refused,
    one_error_line,
    tiny_whisper,
    write_corpus,
    write_study,
)

# --- one validation per option --------------------------------------------------------------------


@pytest.mark.parametrize(
    "options, named",
    [
        ({"max_epochs": 0}, "max_epochs must be at least 1 (0 epochs would score an untrained probe), got 0"),
        ({"lr": float("nan")}, "lr must be a finite positive number, got nan"),
        ({"lr": 0.0}, "lr must be a finite positive number, got 0.0"),
        ({"c": float("inf")}, "c must be a finite positive number, got inf"),
        ({"max_iter": 0}, "max_iter must be at least 1, got 0"),
    ],
)
def test_probe_training_options_are_checked_where_every_run_is_built(options, named):
    with pytest.raises(ProbeError) as refused:
        ProbeConfig(store="s", site="x", probe="attention", **options)
    assert str(refused.value) == named


@pytest.mark.parametrize("flags, named", [(["--max-epochs", "0"], "max_epochs must be at least 1"), (["--lr", "nan"], "lr must be a finite positive number")])
def test_probe_command_refuses_untrainable_options_in_one_line(tmp_path, capsys, flags, named):
    with pytest.raises(SystemExit) as exited:
        probe_main(["--store", str(tmp_path), "--site", "x", "--probe", "attention", "--device", "cpu", "--out", str(tmp_path / "p.jsonl"), *flags])
    assert exited.value.code == 2 and named in capsys.readouterr().err
    assert not (tmp_path / "p.jsonl").exists()


def test_a_device_this_machine_lacks_is_named():
    assert device_problem("cpu") is None
    assert device_problem("tpu") == "'tpu' is not a device; give cpu, cuda, cuda:N or mps"
    import torch

    if not torch.cuda.is_available():
        assert device_problem("cuda") == "cuda: no GPU is visible here (torch.cuda.is_available() is false); use cpu"


def test_a_checkpoint_that_is_a_file_is_refused_before_loading(tmp_path):
    config = tmp_path / "config.json"
    config.write_text("{}")
    with pytest.raises(ModelSpecError) as refused:
        ModelSpec("whisper", str(config)).check_checkpoint()
    assert str(refused.value) == f"{config} is a file; a local checkpoint is the folder holding config.json and the weights"


@pytest.mark.parametrize("label", ["=HYPERLINK(1)", "+cmd", "-1", "@sum", "a\nb"])
def test_a_label_that_a_spreadsheet_runs_or_that_breaks_a_row_is_refused(label):
    assert label_problem(label) is not None
    assert label_problem("whisper-base") is None and label_problem("") is None


def test_duplicate_yaml_keys_are_refused_naming_both_lines(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("name: tiny\nout: x\nprobes: {probes: [mean]}\nname: other\n")
    with pytest.raises(GridError) as refused:
        load_yaml(path, "study file", "x")
    assert str(refused.value) == f"{path}: key 'name' is given twice, on line 1 and on line 4; keep one of them"
    path.write_text("m: {name: a, family: whisper, name: b}\n")
    with pytest.raises(GridError, match="key 'name' is given twice, on line 1; keep one of them"):
        load_yaml(path, "study file", "x")
    path.write_text("a:\n  b: 1\n  b: 2\n")
    with pytest.raises(GridError, match="key 'b' is given twice, on line 2 and on line 3"):
        load_yaml(path, "study file", "x")


# --- the study file, refused by --dry-run in one line naming the file and key ---------------------


@pytest.mark.parametrize(
    "edit, expected",
    [
        (("iterations: 50", "iterations: 0"), "tiny.yaml: behaviour.gap.iterations: iterations must be at least 1, got 0"),
        (("mdl: false", "mdl: false, lr: .nan"), "tiny.yaml: probes: lr must be a finite positive number, got nan"),
        (("mdl: false", "mdl: false, max_epochs: 0"), "tiny.yaml: probes: max_epochs must be at least 1"),
        (("mdl: false", "mdl: false, sites: [encoder.layer.9]"), "tiny.yaml: probes.sites: 'encoder.layer.9' is no site of the models it probes"),
        (("device: cpu", "device: tpu"), "tiny.yaml: device: 'tpu' is not a device"),
        (("name: tiny", "name: ''"), "tiny.yaml: name: is empty; give the study's name"),
        (("out: runs/tiny", "out: ''"), "tiny.yaml: out: is empty"),
        (("out: runs/tiny", "out: manifests/en.jsonl"), "tiny.yaml: out: {root}/manifests/en.jsonl is a file; give a folder"),
        (("mdl: false}}", "mdl: false}}\nreport: {{site: encoder.layer.9}}"), "tiny.yaml: report.site: 'encoder.layer.9' is no site of the study's models"),
        (("name: tiny\n", "name: tiny\nname: other\n"), "tiny.yaml: key 'name' is given twice, on line 1 and on line 2"),
        (
            ("es: manifests/es.jsonl}}}}", "es: manifests/es.jsonl}}}}\n  - {{name: cv2, task: asr, manifests: {{en: manifests/en.jsonl}}}}"),
            "tiny.yaml: corpora[1].manifests.en: {root}/manifests/en.jsonl is also corpora[0].manifests.en",
        ),
    ],
)
def test_a_study_option_its_command_refuses_is_refused_by_the_dry_run(tmp_path, tiny_whisper, capsys, edit, expected):  # noqa: F811
    assert_edit_refused(tmp_path, tiny_whisper, capsys, STUDY, edit, expected)


def test_a_checkpoint_naming_a_file_is_refused_by_the_dry_run(tmp_path, capsys):
    write_corpus(tmp_path)
    study = write_study(tmp_path, tmp_path / "manifests" / "en.jsonl")
    assert study_main(["run", str(study), "--dry-run"]) == 2
    assert "tiny.yaml: models[0].checkpoint: " in one_error_line(capsys)


def test_the_device_flag_is_checked_before_the_plan(tmp_path, tiny_whisper, capsys):  # noqa: F811
    write_corpus(tmp_path)
    study = write_study(tmp_path, tiny_whisper)
    with pytest.raises(SystemExit) as exited:
        study_main(["run", str(study), "--dry-run", "--device", "tpu"])
    assert exited.value.code == 2 and "argument --device: 'tpu' is not a device" in capsys.readouterr().err


def test_a_huge_value_is_shown_cut_in_the_error_line(tmp_path, tiny_whisper, capsys):  # noqa: F811
    write_corpus(tmp_path)
    bomb = "sites: [&a [x,x,x,x,x,x,x,x,x], &b [*a,*a,*a,*a,*a,*a,*a,*a,*a], &c [*b,*b,*b,*b,*b,*b,*b,*b,*b], [*c,*c,*c,*c,*c,*c,*c,*c,*c]]"
    study = write_study(tmp_path, tiny_whisper, STUDY.replace("sites: [encoder.layer.0, encoder.final]", bomb))
    assert study_main(["run", str(study), "--dry-run"]) == 2
    assert len(one_error_line(capsys)) < 600


# --- claims judged by more than a pid -------------------------------------------------------------


def _lock(tmp_path, **holder):
    target = tmp_path / "out.jsonl"
    target.with_name("out.jsonl.lock").write_text(json.dumps({"host": socket.gethostname(), "since": "2026-11-20T00:00:00+0000", **holder}))
    return target


@pytest.mark.skipif(not os.path.exists("/proc/1/stat"), reason="process start times are read from /proc")
def test_a_claim_whose_pid_is_another_process_now_is_stale_and_reclaimed(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        target = _lock(tmp_path, pid=sleeper.pid)  # claimed "2026-11-20", by a process started just now: the pid was reused
        assert stale_holder(target.with_name("out.jsonl.lock")) is not None
        target = _lock(tmp_path, pid=sleeper.pid, start_ticks=process_identity(sleeper.pid)["start_ticks"] + 1)
        assert stale_holder(target.with_name("out.jsonl.lock")) is not None
        target = _lock(tmp_path, pid=sleeper.pid, since="2999-01-01T00:00:00+0000", **process_identity(sleeper.pid))
        assert stale_holder(target.with_name("out.jsonl.lock")) is None  # the writer itself: live
        with pytest.raises(ClaimError, match="is being written by"):
            Claim(target, reclaim_stale=True)
    finally:
        sleeper.kill()
        sleeper.wait()
    notes = []
    with Claim(_lock(tmp_path, pid=1), reclaim_stale=True, on_reclaim=notes.append):
        pass
    assert "reclaimed the stale claim of pid 1" in notes[0]


@pytest.mark.parametrize("holder", [{"pid": "999999"}, {"pid": -5}, {"pid": True}, {"pid": None}, {"pid": 1, "since": 42}, {"pid": 1, "boot_id": "x"}])
def test_a_claim_with_a_garbage_pid_or_from_another_boot_is_stale(tmp_path, holder):
    if holder["pid"] == 1 and not os.path.exists("/proc/1/stat"):
        pytest.skip("a live pid is told from its writer by /proc's start time and boot id")
    target = _lock(tmp_path, **holder)
    assert stale_holder(target.with_name("out.jsonl.lock")) is not None
    with pytest.raises(ClaimError, match="stale claim"):
        Claim(target)


def test_a_claim_records_the_process_start_beside_its_pid(tmp_path):
    with Claim(tmp_path / "out.jsonl") as claim:
        holder = json.loads((tmp_path / "out.jsonl.lock").read_text())
        assert holder == claim.holder and holder["pid"] == os.getpid()
        if os.path.exists("/proc/self/stat"):
            assert holder["start_ticks"] == process_identity(os.getpid())["start_ticks"] and holder["boot_id"]


# --- set aside, never deleted ---------------------------------------------------------------------


def test_set_aside_moves_outputs_under_a_dated_folder_keeping_their_paths(tmp_path):
    (tmp_path / "stores" / "m").mkdir(parents=True)
    (tmp_path / "stores" / "m" / "part.h5").write_text("x")
    (tmp_path / "hyps.jsonl").write_text("y")
    folder = set_aside([tmp_path / "stores" / "m", tmp_path / "stores" / "m" / "part.h5", tmp_path / "hyps.jsonl", tmp_path / "none"], tmp_path)
    assert folder.parent == tmp_path / SUPERSEDED
    assert (folder / "stores" / "m" / "part.h5").read_text() == "x" and (folder / "hyps.jsonl").read_text() == "y"
    assert not (tmp_path / "stores" / "m").exists() and set_aside([tmp_path / "none"], tmp_path) is None


def test_set_aside_refuses_an_output_a_writer_claims(tmp_path):
    (tmp_path / "h.jsonl").write_text("y")
    with Claim(tmp_path / "h.jsonl"):
        with pytest.raises(SupersedeError, match="is claimed by a writer"):
            set_aside([tmp_path / "h.jsonl"], tmp_path)
    assert (tmp_path / "h.jsonl").exists()


# --- the F0 baseline's store ----------------------------------------------------------------------


def test_an_f0_part_is_sized_by_its_records_not_by_a_megabyte_chunk(tmp_path):
    import numpy as np

    from extract.store import PartWriter, StoreAttributes

    attributes = StoreAttributes(model_id="f0", family="praat", site_modules={"f0": "praat"}, storage_dtype="float32", config={"label": "f0"})
    path = tmp_path / "part-00000.h5"
    with PartWriter(path, {"f0": 3}, "float32", attributes, max_rows=18) as writer:
        for index in range(18):
            writer.add(
                f"u{index}",
                {"f0": np.ones((1, 3), np.float32)},
                {"speaker": "s", "gender": "female", "language": "en", "split": "", "dataset": "d", "duration": 0.5},
            )
    assert path.stat().st_size < 200_000  # 1.07 MB with a 1 MB chunk


# --- a study recovers from its own earlier outputs ------------------------------------------------

SMALL = STUDY.replace("{{en: manifests/en.jsonl, it: manifests/it.jsonl, es: manifests/es.jsonl}}", "{{en: manifests/en.jsonl}}").replace(
    "controls: [none, shuffled]", "controls: [none]"
)


def _probe_runs(out):
    return [json.loads(line)["run_id"] for line in (out / "probes" / "probes.jsonl").read_text().splitlines()]


def test_a_study_recovers_from_changed_options_a_moved_folder_an_edited_manifest_and_a_killed_run(tmp_path, tiny_whisper, capsys):  # noqa: F811
    write_corpus(tmp_path)
    study = write_study(tmp_path, tiny_whisper, SMALL)
    out = tmp_path / "runs" / "tiny"
    assert study_main(["run", str(study), "--quiet"]) == 0
    first = _probe_runs(out)
    assert len(first) == 2

    # the grid's options changed: the new rows supersede the old ones, which are set aside, not lost
    study.write_text(study.read_text().replace("positions: 20", "positions: 30"))
    assert study_main(["run", str(study), "--quiet"]) == 0
    assert len(_probe_runs(out)) == 2 and not set(_probe_runs(out)) & set(first)
    (aside,) = (out / ".superseded").iterdir()
    assert _probe_runs(aside) == first + _probe_runs(out)  # the file as it was
    capsys.readouterr()

    # the study folder copied: its probes are recomputed (a run id counts the store's path) and supersede the copied rows
    import shutil

    shutil.copytree(out, tmp_path / "runs" / "copy", symlinks=True)
    copy = tmp_path / "copy.yaml"
    copy.write_text(study.read_text().replace("runs/tiny", "runs/copy"))
    assert study_main(["run", str(copy), "--quiet"]) == 0
    assert len(_probe_runs(tmp_path / "runs" / "copy")) == 2
    capsys.readouterr()

    # --redo with --stages that would then wait for the stage it sets aside: refused before anything moves
    # (round 4's N23, N23r: the stores were moved, then the --stages refused), the dry run alike
    aside_before = sorted((out / ".superseded").iterdir())
    for dry in ([], ["--dry-run"]):
        assert study_main(["run", str(study), "--quiet", "--redo", "extract", "--stages", "collect", *dry]) == 2
        line = one_error_line(capsys)
        assert "--stages collect: collect" in line and line.endswith("--redo extract would set outputs aside that these stages wait for: nothing was moved")
    assert sorted((out / ".superseded").iterdir()) == aside_before and (out / "stores" / "wt" / "cv-en").is_dir()

    # the manifest edited: the store written from it as it was is refused by the plan (the run and the
    # dry run alike), naming --redo; nothing is rebuilt from stale labels
    manifest = tmp_path / "manifests" / "en.jsonl"
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    rows[0]["gender"] = "male" if rows[0]["gender"] == "female" else "female"
    manifest.write_text("".join(json.dumps(row) + "\n" for row in rows))
    before = (out / "RESULTS.md").read_text()
    assert study_main(["run", str(study), "--quiet", "--stages", "probe,asr_gap,collect,correlate,figures,report"]) == 2
    line = one_error_line(capsys)
    assert "stores/wt/cv-en was written from" in line and "rerun with --redo extract" in line, line
    assert (out / "RESULTS.md").read_text() == before
    assert study_main(["run", str(study), "--dry-run"]) == 2
    assert "rerun with --redo extract" in one_error_line(capsys)

    # --redo sets the old stores and hypotheses aside and computes them anew from the edited manifest
    assert study_main(["run", str(study), "--quiet", "--redo", "extract,transcribe"]) == 0
    assert "earlier outputs set aside" in capsys.readouterr().out
    assert len(list((out / ".superseded").iterdir())) >= 2
    assert study_main(["run", str(study), "--dry-run"]) == 0
    assert re.search(r"\d+ to do", capsys.readouterr().out) is None

    # a killed run's claim on probes.jsonl: refused with the advice, which --reclaim-stale follows
    study.write_text(study.read_text().replace("positions: 30", "positions: 25"))
    lock = out / "probes" / "probes.jsonl.lock"
    lock.write_text(json.dumps({"host": socket.gethostname(), "pid": 999_999_999, "since": "2026-11-20T00:00:00+0000"}))
    assert study_main(["run", str(study), "--quiet"]) == 2
    assert "rerun with --reclaim-stale" in one_error_line(capsys)
    assert study_main(["run", str(study), "--quiet", "--reclaim-stale"]) == 0
    assert len(_probe_runs(out)) == 2 and not lock.exists()


def test_the_f0_baseline_refuses_a_file_or_another_models_store_as_out(tmp_path, capsys):
    from experiments.f0_baseline import main as f0_main
    from tests.synthetic_store import write_store

    manifests = write_corpus(tmp_path)
    assert f0_main(["--manifest", str(manifests["en"]), "--out", str(manifests["it"]), "--quiet"]) == 2
    assert one_error_line(capsys) == f"error: --out {manifests['it']} is a file; give a folder for the F0 store (it is created if missing)"
    store = write_store(tmp_path / "store")
    assert f0_main(["--manifest", str(manifests["en"]), "--out", str(store), "--quiet"]) == 2
    assert "holds the store of another model (label None), not an F0 store; give a new --out" in one_error_line(capsys)


def test_a_store_whose_parts_lost_their_config_is_refused_not_relabelled(tmp_path):
    import h5py

    from extract.store import DamagedPartError, ShardReader
    from tests.synthetic_store import write_store

    store = write_store(tmp_path / "store")
    for part in sorted(store.glob("*.h5")):
        with h5py.File(part, "a") as handle:
            del handle.attrs["config"]
    with pytest.raises(DamagedPartError, match="no config attribute"):
        ShardReader(store)


def test_every_stale_output_is_named_in_one_line_with_the_redo_that_sets_them_all_aside(tmp_path, tiny_whisper, capsys):  # noqa: F811
    """A manifest edit makes the store and the hypotheses built from it stale: one line names the first,
    counts the rest and gives ``--redo extract,transcribe``; a dry run with that ``--redo`` previews the
    plan instead of refusing it (the newcomer walkthrough's finding after issue 30)."""
    write_corpus(tmp_path)
    study = write_study(tmp_path, tiny_whisper, SMALL)
    assert study_main(["run", str(study), "--quiet"]) == 0
    capsys.readouterr()
    manifest = tmp_path / "manifests" / "en.jsonl"
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    rows[0]["gender"] = "male" if rows[0]["gender"] == "female" else "female"
    manifest.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert study_main(["run", str(study), "--dry-run"]) == 2
    line = one_error_line(capsys)
    assert "stores/wt/cv-en was written from" in line and "(and 1 more output(s) of extract, transcribe)" in line, line
    assert line.endswith("rerun with --redo extract,transcribe to set them aside and rebuild them and what depends on them"), line
    assert study_main(["run", str(study), "--dry-run", "--redo", "extract,transcribe"]) == 0
    planned = capsys.readouterr().out
    assert "set aside by --redo" in planned and "a run would set their outputs aside" in planned, planned


@pytest.mark.parametrize("checkpoint", ["folder", "tiny-random"])
def test_a_site_the_model_lacks_is_refused_by_the_dry_run_before_any_model_loads(tmp_path, tiny_whisper, capsys, checkpoint):  # noqa: F811
    """The newcomer walkthrough after issue 30: ``sites: [encoder.layer.9]`` on a two-layer Whisper
    passed ``--dry-run`` and failed only once the model had loaded."""
    write_corpus(tmp_path)
    study = write_study(tmp_path, tiny_whisper, STUDY.replace("sites: [encoder.layer.0, encoder.final]", "sites: [encoder.layer.0, encoder.layer.9]"))
    if checkpoint == "tiny-random":
        study.write_text(study.read_text().replace(f"checkpoint: {tiny_whisper}", "checkpoint: tiny-random"))
    assert study_main(["run", str(study), "--dry-run"]) == 2
    line = one_error_line(capsys)
    sites = "encoder.embed, encoder.layer.0, encoder.layer.1, encoder.final"
    assert f"models[0].sites: unknown site(s) encoder.layer.9 for wt (whisper); its sites: {sites}" in line, line
