"""A study run as one library call: what ``python -m experiments.study run STUDY.yaml`` does
without an executor, for notebooks and scripts (:func:`run_study`)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from experiments.study.schema import StudyError, load_study
from experiments.study.stages import STAGES, Context, run


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
    :class:`experiments.study.schema.StudyError` naming the file and the key."""
    from extract.device import default_device, device_problem

    study = load_study(path, root)
    if device is None and study.device is not None and device_problem(study.device):
        raise StudyError(f"{study.path}: device: {device_problem(study.device)} (or give device=...)")
    context = Context(study, device or study.device or default_device(), show_progress=show_progress, reclaim_stale=reclaim_stale)
    return run(context, stages)
