"""A study's run, its stages in the stage table's order (``experiments.stage_table``), each through
the :class:`~experiments.study.context.StudyStage` its record names: :func:`plan` (a unit per output,
finished or not), :func:`run` (the unfinished ones, here or, for the table's job arrays, as one
submitit job array per stage: :mod:`experiments.scheduling`) and :func:`run_study`, the run as one call.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from experiments.stage_table import BY_NAME, STUDY_STAGES, StageRecord
from experiments.study.context import Context, StudyStage, Unit
from experiments.study.schema import StudyError, load_study

if TYPE_CHECKING:
    from experiments.scheduling import ExecutorOptions

STAGES = STUDY_STAGES  # in the order a study runs them
SHOWN = 12  # units listed per stage in the printed plan


def study_stage(name: str) -> StudyStage:
    """The plan and run of the study stage ``name``: ``NAME`` of the module its record in the stage
    table names under ``experiments.study.stages``."""
    return StageRecord.resolve(f"experiments.study.stages.{BY_NAME[name].study}:{name.upper()}")


def plan(context: Context, stages: Iterable[str] = STAGES) -> dict[str, list[Unit]]:
    """The units of ``stages``. Every stage up to the last of them is planned, in order, whether asked
    for or not: a unit is up to date only when the outputs it reads are (a store whose manifest
    changed makes its probes wait for extract, a probe to do makes collect wait, ...)."""
    stages = tuple(stages)
    context.outdated, context.unfinished, context.stale = {}, set(), []
    planned = {}
    for stage in STAGES[: max(STAGES.index(stage) for stage in stages) + 1] if stages else ():
        planned[stage] = study_stage(stage).plan(context)
        if any(not unit.done for unit in planned[stage]):
            context.unfinished.add(stage)
    refuse_stale(context)
    return {stage: planned[stage] for stage in stages}


def refuse_stale(context: Context) -> None:
    """Every stale output of the plan in one line: the first, how many more, and the ``--redo`` that
    sets them all aside (a run would otherwise stop at the first, after the stages before it ran)."""
    if not context.stale:
        return
    stages = [stage for stage in STAGES if any(stale.stage == stage for stale in context.stale)]
    more = f" (and {len(context.stale) - 1} more output(s) of {', '.join(stages)})" if len(context.stale) > 1 else ""
    raise StudyError(f"{context.stale[0]}{more}; rerun with --redo {','.join(stages)} to set them aside and rebuild them and what depends on them")


def check_subset(planned: dict[str, list[Unit]], stages: tuple[str, ...], study_path: Path) -> None:
    """A stage run without an earlier stage (``--stages``) whose output one of its units reads and
    which is not up to date is refused, naming both: it would compute from stale inputs."""
    for stage in stages:
        for unit in planned.get(stage, []):
            if unit.waits is not None and unit.waits not in stages:
                raise StudyError(
                    f"{study_path}: --stages {','.join(stages)}: {stage} ({unit.what}) {unit.note}; add {unit.waits} to --stages "
                    f"(or leave --stages out; --redo {unit.waits} sets its outputs aside to compute them anew)"
                )


def describe(planned: dict[str, list[Unit]]) -> list[str]:
    """The plan as printed lines: per stage how many outputs are finished, then those to do."""
    lines = []
    for stage, units in planned.items():
        todo = [unit for unit in units if not unit.done]
        summary = "nothing to do here" if not units else f"{len(units) - len(todo)} of {len(units)} done" + (f", {len(todo)} to do" if todo else "")
        lines.append(f"  {stage:<11} {summary}")
        for unit in todo[:SHOWN]:
            lines.append(f"    - {unit.what}" + (f" ({unit.note})" if unit.note else ""))
        if len(todo) > SHOWN:
            lines.append(f"    ... and {len(todo) - SHOWN} more")
    return lines


def run(context: Context, stages: Iterable[str], executor: ExecutorOptions | None = None) -> int:
    """Computes the unfinished outputs of ``stages``, in order, each stage planned anew (earlier stages
    may have written its inputs); with ``executor`` a job-array stage's go to submitit as one job
    array (its log folder ``OUT/logs/submitit/STAGE`` unless the options name one). Stops after a
    stage whose submitted tasks failed (1), or that was submitted without waiting (``--no-wait``:
    rerun to go on)."""
    stages = tuple(stages)
    check_subset(plan(context, stages), stages, context.study.path)
    for name in stages:
        units = plan(context, [name])[name]
        todo = [unit for unit in units if not unit.done]
        if not todo:
            continue
        started, stage, status = time.time(), study_stage(name), 0
        submitted = executor is not None and BY_NAME[name].job_array
        if submitted:
            options = replace(executor, log_folder=executor.log_folder or str(context.layout.logs / "submitit" / name))
            status = stage.submit(context, todo, len(units) - len(todo), options)
        else:
            stage.run(context, todo)
        print(f"[study] {name}: {time.time() - started:.1f} s", flush=True)
        if status:
            return status
        if submitted and options.no_wait and any(not unit.done for unit in plan(context, [name])[name]):
            print(f"[study] {name}: submitted without waiting; rerun the same study to go on once its tasks have finished", flush=True)
            return 0
    return 0


def redo(context: Context, stages: Iterable[str]) -> Path | None:
    """``--redo``: the outputs of ``stages`` that exist moved to ``OUT/.superseded/STAMP/`` (:mod:`extract.supersede`),
    so that the run computes them anew; returns that folder (None: nothing was there)."""
    from extract.supersede import set_aside

    paths = [path for stage in stages for path in study_stage(stage).outputs(context)]
    return set_aside([path for path in paths if path.exists()], context.study.out)


def print_lines(lines: list[str]) -> None:
    sys.stdout.write("".join(line + "\n" for line in lines))
    sys.stdout.flush()


def run_study(
    path: str | Path,
    stages: Iterable[str] = STAGES,
    root: str | Path | None = None,
    device: str | None = None,
    show_progress: bool = True,
    reclaim_stale: bool = False,
) -> int:
    """Runs the ``stages`` of the study file at ``path`` (all by default, in order) that are not done
    yet, on this machine; returns 0, or 1 when a stage failed. ``root``: the folder its relative
    paths start from (default: the study file's folder); ``device``: default the study's, else
    :func:`extract.device.default_device`. A study that cannot run as written is a
    :class:`experiments.study.schema.StudyError` naming the file and the key. What
    ``python -m experiments.study run STUDY.yaml`` does without an executor, for notebooks and scripts."""
    from extract.device import default_device, device_problem

    study = load_study(path, root)
    if device is None and study.device is not None and device_problem(study.device):
        raise StudyError(f"{study.path}: device: {device_problem(study.device)} (or give device=...)")
    context = Context(study, device or study.device or default_device(), show_progress=show_progress, reclaim_stale=reclaim_stale)
    return run(context, stages)
