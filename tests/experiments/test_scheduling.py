"""Runs through submitit (experiments.scheduling): grids through the local executor give the rows of
an in-process run, failed tasks are reported with their logs and resubmitted alone, concurrent
writers lose nothing, shards and transcriptions already finished are not submitted."""

import argparse
import json
from pathlib import Path

import pytest
import yaml

from experiments import probe as probe_cli
from experiments import scheduling
from extract.jobs import ExtractionJob, TranscriptionJob
from extract.spec import ModelSpec
from probing.results import load_rows, merge_task_results, task_results_file, task_results_folder
from tests.synthetic_store import write_store

SITE = "encoder.layer.0"
RESULT_KEYS = ("run_id", "store_identity", "f1_macro", "accuracy", "recall", "f1_s", "codelength_online_bits", "splits")


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("scheduling")
    good = write_store(root / "good", speakers_per_gender=5, utterances_per_speaker=6, dim=4, length_range=(4, 10))
    no_test = write_store(root / "no-test", speakers_per_gender=1, utterances_per_speaker=4, dim=4, length_range=(4, 10))  # one voice per gender: no split
    return good, no_test


def _grid(tmp_path, stores, out, probes=("positional", "mean"), **options):
    path = tmp_path / f"{out}.yaml"
    grid = {"out": str(tmp_path / f"{out}.jsonl"), "stores": [str(s) for s in stores], "sites": [SITE], "probes": list(probes), "seeds": [0]}
    path.write_text(yaml.safe_dump(grid | {"options": {"mdl": True, "positions": 10, **options}}))
    return path, Path(grid["out"])


def _local(*extra):
    return ["--executor", "local", "--cpus", "1", "--task-memory-gb", "2", "--time-min", "5", *extra]


def test_a_grid_through_the_local_executor_gives_the_in_process_rows(tmp_path, stores, capsys):
    in_process, out_a = _grid(tmp_path, stores[:1], "a")
    through, out_b = _grid(tmp_path, stores[:1], "b")
    assert probe_cli.main(["--grid", str(in_process)]) == 0
    assert probe_cli.main(["--grid", str(through), *_local("--cells-per-task", "2", "--log-folder", str(tmp_path / "logs"))]) == 0
    assert "2 tasks" not in capsys.readouterr().out  # two cells, one task
    a, b = load_rows(out_a), load_rows(out_b)
    assert sorted(a) == sorted(b) and len(a) == 2
    for run_id in a:
        for key in RESULT_KEYS:
            assert a[run_id].get(key) == b[run_id].get(key), key
    assert not task_results_folder(out_b).exists()  # merged and cleaned up
    assert {p.name for p in (out_b.parent / "b.jsonl.arrays").iterdir()} == {p.name for p in (out_a.parent / "a.jsonl.arrays").iterdir()}


def test_a_failed_task_is_reported_with_its_log_and_resubmitted_alone(tmp_path, stores, capsys):
    path, out = _grid(tmp_path, stores, "c", probes=["positional"])
    options = _local("--log-folder", str(tmp_path / "logs"))
    assert probe_cli.main(["--grid", str(path), *options]) == 1
    printed = capsys.readouterr().out
    assert "2 tasks: 0 finished already, 2 to submit" in printed and "1 tasks finished, 1 failed" in printed
    (failed,) = [line for line in printed.splitlines() if " failed: " in line]
    assert (
        "task 1 (positional encoder.layer.0 seed 0" in failed and "ProbeError: positional probe on" in failed and "resubmit it alone with --tasks 1" in failed
    )
    log = Path(failed.split("log: ")[1].split(" (output")[0])
    assert log.is_file() and "the fixed split needs at least 2" in log.read_text()
    assert len(load_rows(out)) == 1  # the good store's cell was merged
    assert probe_cli.main(["--grid", str(path), *options, "--tasks", "1"]) == 1
    assert "2 tasks: 1 finished already, 1 to submit" in capsys.readouterr().out


def _args(**overrides):
    """The parsed flags of :class:`scheduling.ExecutorOptions`."""
    values = dict(executor="local", partition=None, account=None, gpus=0, cpus=4, task_memory_gb=16.0, time_min=60, array_parallelism=8, log_folder=None)
    return argparse.Namespace(**(values | {"tasks": None, "no_wait": False} | overrides))


def _options(**overrides):
    return scheduling.executor_options(_args(**overrides), "cuda")


def test_slurm_options_become_submitit_parameters_and_bad_ones_are_refused(capsys):
    slurm = scheduling.ExecutorOptions("slurm", partition="gpu", account="lab", gpus=1, time_min=60, array_parallelism=4)
    parameters = scheduling.executor_parameters(slurm, "extract")
    assert parameters == {
        "name": "extract",
        "timeout_min": 60,
        "cpus_per_task": 4,
        "mem_gb": 16.0,
        "gpus_per_node": 1,
        "slurm_array_parallelism": 4,
        "slurm_partition": "gpu",
        "slurm_account": "lab",
    }
    assert "slurm_partition" not in scheduling.executor_parameters(_options(partition="gpu"), "x")
    with pytest.raises(scheduling.SchedulingError, match="--gpus 1 with --device cpu: .* pass --device cuda"):
        scheduling.executor_options(_args(gpus=1), "cpu")
    for flag, value in (("cpus", 0), ("time_min", 0), ("array_parallelism", 0), ("gpus", -1), ("task_memory_gb", 0.0)):
        with pytest.raises(SystemExit):
            _options(**{flag: value})
        reason = "must be positive" if flag == "task_memory_gb" else "must be at least"
        assert capsys.readouterr().err.startswith(f"error: --{flag.replace('_', '-')} {value}: {reason}")
    if __import__("shutil").which("sbatch") is None:
        with pytest.raises(scheduling.SchedulingError, match="no sbatch"):
            _options(executor="slurm")
    tasks = [scheduling.Task(n, str(n), print) for n in range(4)]
    assert [t.number for t in scheduling.select(tasks, "1,3", total=4)] == [1, 3]
    with pytest.raises(scheduling.SchedulingError, match="task numbers"):
        scheduling.select(tasks, "one", total=4)


def test_complete_shards_are_not_submitted(tmp_path):
    import h5py

    job = ExtractionJob(ModelSpec("whisper"), tmp_path / "m.jsonl", tmp_path / "store", num_shards=3, utterances_per_part=2)
    # 10 utterances: shard 0 holds 0, 3, 6, 9 (two parts), shards 1 and 2 three each (two parts)
    assert scheduling.shard_parts(job, 10, 0) == ["shard0000of0003-part00000.h5", "shard0000of0003-part00001.h5"]
    job.out.mkdir()
    for name in scheduling.shard_parts(job, 10, 1):
        with h5py.File(job.out / name, "w") as handle:
            handle.attrs["complete"] = True
    with h5py.File(job.out / scheduling.shard_parts(job, 10, 2)[0], "w") as handle:
        handle.attrs["complete"] = True
    tasks, finished = scheduling.extraction_tasks(job, 10)
    assert finished == 1 and [t.number for t in tasks] == [0, 2]
    assert [t.args[0].shard_index for t in tasks] == [0, 2] and tasks[0].kwargs == {"show_progress": False, "reclaim_stale": False}


def test_a_finished_transcription_is_not_submitted(tmp_path):
    out = tmp_path / "hyps.jsonl"
    job = TranscriptionJob(ModelSpec("whisper"), tmp_path / "m.jsonl", out, "asr")
    assert len(scheduling.transcription_tasks(job, ["a", "b"])[0]) == 1
    out.write_text("\n".join(json.dumps({"id": i, "hypothesis": ""}) for i in ("a", "b")) + "\n")
    assert scheduling.transcription_tasks(job, ["a", "b"]) == ([], 1)
    assert len(scheduling.transcription_tasks(job, ["a", "b", "c"])[0]) == 1


def test_merge_names_a_damaged_task_file(tmp_path):
    out = tmp_path / "r.jsonl"
    path = task_results_file(out, 3)
    path.parent.mkdir()
    path.write_text('{"run_id": "x"}\nnot json\n')
    with pytest.raises(ValueError, match=r"task-00003.jsonl:2"):
        merge_task_results(out)
    assert path.exists() and not out.exists()


def test_a_task_number_that_does_not_exist_is_refused(tmp_path, stores, capsys):
    """``--tasks 99`` on a 2-task grid said "0 to submit" and exited 0 (#118)."""
    path, _ = _grid(tmp_path, stores[:1], "t")
    assert probe_cli.main(["--grid", str(path), *_local("--log-folder", str(tmp_path / "logs"), "--tasks", "1,99")]) == 2
    captured = capsys.readouterr()
    assert captured.err == "error: --tasks 99: no such task; this run has 2 tasks, numbered 0..1\n" and "to submit" not in captured.out
    assert not (tmp_path / "logs").exists()


def test_select_counts_finished_tasks_among_the_valid_numbers(capsys):
    unfinished = [scheduling.Task(n, str(n), print) for n in (0, 2)]  # tasks 1 and 3 finished already
    assert [t.number for t in scheduling.select(unfinished, "1,2", total=4)] == [2]
    assert "note: --tasks 1: finished already" in capsys.readouterr().err
    with pytest.raises(scheduling.SchedulingError, match=r"^--tasks 4, -1: no such task; this run has 4 tasks, numbered 0..3$"):
        scheduling.select(unfinished, "4,-1,0", total=4)
    # a transcription is one task, number 0, whether finished or not
    with pytest.raises(scheduling.SchedulingError, match=r"^--tasks 1: no such task; this run has 1 task, numbered 0$"):
        scheduling.run_tasks(scheduling.ExecutorOptions("local", tasks="1"), "transcribe", [], 1, "")
