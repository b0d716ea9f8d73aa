"""Many runs as submitit jobs: a SLURM job array on a cluster, submitit's local executor on one machine.

``--executor slurm|local`` on the stages ``experiments.stage_table`` marks ``job_array``: ``experiments.extract`` (one task per shard of ``--num-shards``: the
library call :func:`extract.jobs.extract` on that shard), ``experiments.transcribe`` (one task:
:func:`extract.jobs.transcribe`) and ``experiments.probe --grid`` (one task per group of
``--cells-per-task`` cells: :func:`probing.grid.run_all` writing its own task file, merged into the
results file afterwards). Without ``--executor`` everything runs in the calling process, as before.

- Finished work is skipped before anything is submitted: shards whose parts are all complete, a
  hypotheses file that holds every id, grid cells with a current row. Rerunning the same command
  therefore resubmits only what did not finish; ``--tasks 3,7`` picks tasks by number.
- Each task's output and errors are in submitit's log files under ``--log-folder``; a failed task is
  reported with them and the command exits with status 1.
- Concurrent tasks never write one file: extraction parts are claimed one writer each
  (``extract.store.PartClaim``), a hypotheses file by its transcription (``extract.appendlog``), and
  grid tasks claim their own ``OUT.tasks/task-NNNNN.jsonl`` and append to it under a lock. A task
  killed with SIGKILL leaves its claim: rerun with ``--reclaim-stale`` to take it over.
"""

from __future__ import annotations

import argparse
import math
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from experiments.options import add_options, from_args
from experiments.stage_table import JOB_ARRAY_STAGES
from extract.errors import UserError
from extract.options import Checked, option

EXECUTORS = ("local", "slurm")
TASK_MEMORY_SHARE = 0.8  # grid tasks: runs that set no memory_gb budget get this share of --task-memory-gb


class SchedulingError(UserError, ValueError):
    """Scheduling options that cannot work as given (no SLURM here, a task number that does not exist)."""


@dataclass
class Task:
    number: int  # stable across resubmissions: shard index, or grid task index
    name: str
    function: Callable
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)


@dataclass
class Outcome:
    task: Task
    job_id: str
    stdout: Path
    stderr: Path
    error: str | None = None  # None: finished


EXECUTOR_GROUP = "running as submitit jobs"  # the --help heading of the executor's options


@dataclass(frozen=True)
class ExecutorOptions(Checked):
    """How a command's tasks are submitted (``--executor`` and the SLURM options); declared once, the
    flags are derived (:func:`experiments.options.add_options`) and read back by :func:`executor_options`."""

    executor: str | None = option(
        None,
        "submit through submitit: 'slurm' (a job array) or 'local' (processes on this machine); default: run here, in this process",
        choices=EXECUTORS,
        group=EXECUTOR_GROUP,
    )
    partition: str | None = option(None, "SLURM partition (default: the cluster's)", group=EXECUTOR_GROUP)
    account: str | None = option(None, "SLURM account (default: the user's)", group=EXECUTOR_GROUP)
    gpus: int = option(0, "GPUs per task (pass --device cuda with it)", least=0, group=EXECUTOR_GROUP)
    cpus: int = option(4, "CPU cores per task", least=1, group=EXECUTOR_GROUP)
    task_memory_gb: float = option(16.0, "memory per task in GB (--mem-gb: deprecated spelling)", positive=True, aliases=("--mem-gb",), group=EXECUTOR_GROUP)
    time_min: int = option(240, "time limit per task in minutes", least=1, group=EXECUTOR_GROUP)
    array_parallelism: int = option(32, "SLURM: tasks of the array running at once", least=1, group=EXECUTOR_GROUP)
    log_folder: str | None = option(None, "submitit's pickles and per-task logs (default: logs/submitit/<command>)", group=EXECUTOR_GROUP)
    tasks: str | None = option(
        None, "only these task numbers, comma-separated (e.g. a failed one: --tasks 3); default: every unfinished task", group=EXECUTOR_GROUP
    )
    no_wait: bool = option(False, "submit and return; rerun the same command later to see what is left (and, for grids, to merge)", group=EXECUTOR_GROUP)


@dataclass(frozen=True)
class GridTasks(Checked):
    """How a probe grid is split into executor tasks (``probe`` and ``study run``; :func:`submit_grid`)."""

    cells_per_task: int = option(1, "with --executor: probe grid cells per task (default 1)", least=1)


def add_executor_arguments(parser: argparse.ArgumentParser, what: str, pick_tasks: bool = True) -> None:
    """The flags of :class:`ExecutorOptions`; ``what`` says what one task is (for the help). Without
    ``pick_tasks`` there is no ``--tasks`` (``args.tasks`` is None): a command of several stages
    (``experiments.study``) resubmits every unfinished task of each."""
    parser.add_argument_group(EXECUTOR_GROUP, f"one task = {what}; finished work is skipped before submitting")
    add_options(parser, ExecutorOptions, skip=() if pick_tasks else ("tasks",))
    if not pick_tasks:
        parser.set_defaults(tasks=None)


def executor_parameters(options: ExecutorOptions, name: str) -> dict:
    """submitit's ``update_parameters`` for the options (shared names; SLURM-only ones prefixed ``slurm_``)."""
    parameters = {"name": name, "timeout_min": options.time_min, "cpus_per_task": options.cpus, "mem_gb": options.task_memory_gb, "gpus_per_node": options.gpus}
    if options.executor == "slurm":
        parameters["slurm_array_parallelism"] = options.array_parallelism
        if options.partition:
            parameters["slurm_partition"] = options.partition
        if options.account:
            parameters["slurm_account"] = options.account
    return parameters


def executor_options(args: argparse.Namespace, device: str) -> ExecutorOptions:
    """The parsed ``--executor`` options (a value out of bounds: one ``error:`` line naming its flag),
    refused before anything is read or submitted where they cannot work: SLURM without ``sbatch``
    here, GPUs for tasks that run on ``device`` ``cpu``."""
    options = from_args(ExecutorOptions, args)
    if options.executor == "slurm" and shutil.which("sbatch") is None:
        raise SchedulingError("--executor slurm: no sbatch on this machine (not a SLURM login node); use --executor local, or run on the cluster")
    if options.gpus and device.startswith("cpu"):
        raise SchedulingError(f"--gpus {options.gpus} with --device {device}: the tasks would not use them; pass --device cuda")
    return options


def select(tasks: list[Task], chosen: str | None, total: int) -> list[Task]:
    """The unfinished ``tasks`` numbered in ``chosen`` (``"3,7"``), or all of them. The run has
    ``total`` tasks, numbered from 0 (the finished ones included): a number outside them is refused,
    a finished one is noted and left out."""
    if not chosen:
        return tasks
    try:
        numbers = list(dict.fromkeys(int(part) for part in chosen.split(",") if part.strip()))
    except ValueError:
        raise SchedulingError(f"--tasks {chosen!r}: give task numbers separated by commas, e.g. --tasks 3,7") from None
    unknown = [number for number in numbers if not 0 <= number < total]
    if unknown:
        numbered = "numbered 0" if total == 1 else f"numbered 0..{total - 1}"
        raise SchedulingError(f"--tasks {', '.join(map(str, unknown))}: no such task; this run has {total} task{'' if total == 1 else 's'}, {numbered}")
    unfinished = {task.number for task in tasks}
    finished = [number for number in numbers if number not in unfinished]
    if finished:
        print(f"note: --tasks {', '.join(map(str, finished))}: finished already, not submitted", file=sys.stderr)
    return [task for task in tasks if task.number in numbers]


def wait(jobs: list, tasks: list[Task]) -> list[Outcome]:
    """Each task's outcome once its job has ended (a failed one keeps its error's last line)."""
    outcomes = []
    for job, task in zip(jobs, tasks):
        error = None
        try:
            job.result()
        except Exception as failure:  # noqa: BLE001 - any failure of a task is reported with its logs, not raised
            error = _last_line(str(failure)) or type(failure).__name__
        outcomes.append(Outcome(task, str(job.job_id), job.paths.stdout, job.paths.stderr, error))
    return outcomes


def _last_line(text: str) -> str:
    """The exception line of a task's traceback (submitit appends log paths after it), else the last line."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    raised = [line for line in lines if re.match(r"^[\w.]+(Error|Exception|Exit|Interrupt)\b", line)]
    return raised[-1] if raised else (lines[-1] if lines else "")


def run_tasks(options: ExecutorOptions, name: str, tasks: list[Task], skipped: int, rerun_hint: str) -> int:
    """Submits the (selected) unfinished tasks of the stage ``name``, waits unless ``--no-wait``,
    reports; 1 if any failed. Only a stage the stage table marks ``job_array`` is submitted."""
    if name not in JOB_ARRAY_STAGES:
        raise ValueError(f"{name!r} is not a job-array stage of experiments.stage_table ({', '.join(JOB_ARRAY_STAGES)})")
    chosen = select(tasks, options.tasks, len(tasks) + skipped)
    print(f"[{name}] {len(tasks) + skipped} tasks: {skipped} finished already, {len(chosen)} to submit ({options.executor} executor)")
    if not chosen:
        return 0
    import submitit

    executor = submitit.AutoExecutor(folder=Path(options.log_folder or Path("logs") / "submitit" / name), cluster=options.executor)
    executor.update_parameters(**executor_parameters(options, name))
    with executor.batch():  # every task as one job; on SLURM one job array
        jobs = [executor.submit(task.function, *task.args, **task.kwargs) for task in chosen]
    print(f"[{name}] submitted {len(jobs)} jobs ({', '.join(str(job.job_id) for job in jobs[:4])}{' ...' if len(jobs) > 4 else ''}); logs in {executor.folder}")
    if options.no_wait:
        print(f"[{name}] not waiting: {rerun_hint}")
        return 0
    outcomes = wait(jobs, chosen)
    return report(name, outcomes, rerun_hint)


def report(name: str, outcomes: list[Outcome], rerun_hint: str) -> int:
    failed = [outcome for outcome in outcomes if outcome.error is not None]
    print(f"[{name}] {len(outcomes) - len(failed)} tasks finished, {len(failed)} failed")
    for outcome in failed:
        print(
            f"[{name}] task {outcome.task.number} ({outcome.task.name}, job {outcome.job_id}) failed: {outcome.error}; "
            f"log: {outcome.stderr} (output: {outcome.stdout}); resubmit it alone with --tasks {outcome.task.number}",
        )
    if failed:
        print(f"[{name}] {rerun_hint}")
    return 1 if failed else 0


def shard_parts(job, utterances: int, shard_index: int) -> list[str]:
    """Part file names shard ``shard_index`` of ``job`` writes for a manifest of ``utterances`` (after ``--limit``)."""
    from extract.store import part_name

    mine = len(range(shard_index, utterances, job.num_shards))
    return [part_name(shard_index, job.num_shards, number) for number in range(math.ceil(mine / job.utterances_per_part))]


def extraction_tasks(job, utterances: int, reclaim_stale: bool = False) -> tuple[list[Task], int]:
    """One task per unfinished shard of ``job`` (``job.num_shards`` shards); and how many were finished."""
    from extract.jobs import extract
    from extract.store import is_complete

    tasks, finished, options = [], 0, {"show_progress": False, "reclaim_stale": reclaim_stale}
    for index in range(job.num_shards):
        if all(is_complete(Path(job.out) / name) for name in shard_parts(job, utterances, index)):
            finished += 1
            continue
        tasks.append(Task(index, f"shard {index + 1}/{job.num_shards}", extract, (replace(job, shard_index=index),), dict(options)))
    return tasks, finished


def transcription_tasks(job, ids: list[str], reclaim_stale: bool = False) -> tuple[list[Task], int]:
    """One task for a hypotheses file, unless it already holds every id of ``ids`` (``reclaim_stale``:
    the task may take over the claim a killed transcription left on it)."""
    from extract.jobs import transcribe
    from extract.runner import finished_ids

    if Path(job.out).exists() and set(ids) <= finished_ids(Path(job.out)):
        return [], 1
    return [Task(0, Path(job.out).name, transcribe, (job,), {"show_progress": False, "reclaim_stale": reclaim_stale})], 0


def probe_tasks(configs: list, out: Path, cells_per_task: int = 1, reclaim_stale: bool = False) -> tuple[list[Task], int]:
    """One task per group of grid cells that still has cells without a current row; and how many
    groups were finished. Task numbers follow the grid's order, so they stay the same on a rerun.
    ``reclaim_stale``: a task may take over the claim a killed task left on its task file."""
    from probing.grid import grid_tasks, pending, run_all

    todo = {config.run_id() for config in pending(configs, out)[0]}
    tasks, finished = [], 0
    for number, group in enumerate(grid_tasks(configs, cells_per_task)):
        if not any(config.run_id() in todo for config in group):
            finished += 1
            continue
        label = (
            f"cells {number * cells_per_task}-{number * cells_per_task + len(group) - 1}"
            if len(group) > 1
            else f"{group[0].probe} {group[0].site} seed {group[0].seed}"
        )
        tasks.append(Task(number, label, run_all, (group, out), {"task": number, "reclaim_stale": reclaim_stale}))
    return tasks, finished


def submit_grid(options: ExecutorOptions, configs: list, out: Path, cells_per_task: int = 1, reclaim_stale: bool = False) -> int:
    """``--executor`` for a probe grid: the rows of finished task files merged into ``out`` first, the
    cells without a current row submitted in groups of ``cells_per_task`` (runs without their own
    ``memory_gb`` get :data:`TASK_MEMORY_SHARE` of ``--task-memory-gb``), waited for (unless ``--no-wait``)
    and merged; 1 if a task failed. ``reclaim_stale``: a task may take over a killed task's claim."""
    from probing.grid import check_store
    from probing.results import check_results_path, merge_task_results
    from probing.run import ProbeConfig

    check_results_path(out)
    for store in sorted({c.store for c in configs} | {c.apply_to for c in configs if c.apply_to}):
        check_store(store)
    merge_task_results(out)
    budget = {"memory_gb": TASK_MEMORY_SHARE * options.task_memory_gb}
    configs = [c if c.memory_gb != ProbeConfig.memory_gb else replace(c, **budget) for c in configs]
    tasks, finished = probe_tasks(configs, out, cells_per_task, reclaim_stale)
    status = run_tasks(options, "probe", tasks, finished, f"rerun the same command: finished cells are skipped, their rows merged into {out}")
    if not options.no_wait:
        print(f"[probe] merged {merge_task_results(out, remove_folder=True)} rows into {out}")
    return status
