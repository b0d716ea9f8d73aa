"""``python -m experiments.study run STUDY.yaml``: a whole study from its file, skipping what is finished.

    python -m experiments.study run experiments/studies/attanasio2024.yaml --root ~/data/attanasio2024 --dry-run
    python -m experiments.study run STUDY.yaml [--stages extract,transcribe] [--device cuda] [--executor slurm --gpus 1 ...]

Prints the plan (per stage: what is finished, what is left), then runs the stages in order through
the library: extract, f0 (the F0 baseline's stores), transcribe, probe, asr_gap, mustshe, st_quality,
acoustic, lexical, feature_gaps (the study file's ``analyses``), collect, correlate, figures, report.
``--dry-run`` stops after the plan: it reads and checks the study file and the manifests, and loads
no model and writes nothing. ``--stages`` runs a subset (in that order). A rerun skips every
finished output (a finished study only checks, in seconds); see ``experiments.study.stages`` for
each stage's rule, and ``experiments.study.schema`` for the study file.

Each unit is finished only when what it reads is up to date too: after a manifest edit, the probes
of the stores built from the old manifest wait for ``extract`` (and ``collect`` for the probes), so
``--stages`` without the stage that must run first is refused, naming it. ``--redo STAGE[,STAGE]``
computes those stages anew: their outputs are first moved to ``OUT/.superseded/STAMP/`` (with their
paths under ``OUT``; nothing is deleted: move a folder back to undo, delete ``.superseded`` to free
the space). Probe rows of earlier runs of the same probes (the grid's options changed, or the study
folder was moved or copied) are set aside the same way once the new rows are there, so ``collect``
reads one row per probe. ``--reclaim-stale`` takes over the claims a killed run left on this host
(the run's process is gone, or its pid now belongs to another process).

``--executor slurm|local`` submits extraction (one task per store shard), transcription (one per
hypotheses file) and the probe grid (``--cells-per-task`` cells per task) as one submitit job array
per stage, waits, and goes on; the scoring, collect and report stages run here. Logs go to
``OUT/logs/submitit/STAGE`` unless ``--log-folder`` is given. With ``--no-wait`` the study stops
after the first stage it submitted: rerun it to go on.

Writes under the study's ``out``: ``stores/``, ``hyps/``, ``behaviour/``, ``probes/``, ``features/``, ``results/``
(``f1_vs_gap.csv``, ``f1_vs_mustshe.csv``, ``long.csv``, ``collect.json``, ``correlations.json``),
``figures/`` and ``RESULTS.md``. A bad study file, manifest or stage input is one ``error:`` line
naming the file and key, exit status 2; a failed submitted task is reported with its log, exit 1.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

from experiments.cli import (
    CommandParser,
    add_device_argument,
    add_quiet_argument,
    add_reclaim_stale_argument,
    command_main,
    fail,
    input_argument,
    output_argument,
    program_name,
)
from experiments.options import add_options, from_args
from experiments.scheduling import GridTasks, add_executor_arguments, executor_options
from experiments.study.context import Context
from experiments.study.joins import join_warnings
from experiments.study.runner import STAGES, check_subset, describe, plan, print_lines, redo, run
from experiments.study.schema import StudyError, load_study
from extract.options import OptionError, option


@dataclass(frozen=True)
class StudyRunOptions(GridTasks):
    """Which stages run, which are computed anew, and whether anything runs at all."""

    dry_run: bool = option(False, "print the plan and stop: no model is loaded, nothing is written")
    stages: tuple[str, ...] = option(STAGES, f"comma-separated subset of {','.join(STAGES)} (default: all, in that order)", choices=STAGES, one_value=True)
    redo: tuple[str, ...] = option(
        (),
        "compute these stages' outputs anew: the existing ones are moved to OUT/.superseded/STAMP/ first (nothing is deleted)",
        choices=STAGES,
        metavar="STAGE[,STAGE]",
        one_value=True,
    )

    def __post_init__(self):
        super().__post_init__()
        if not self.stages:
            raise OptionError(f"{{stages}}: give stages separated by commas, from {', '.join(STAGES)}", "stages")
        for name in ("stages", "redo"):  # in the order they run, whatever the order given
            object.__setattr__(self, name, tuple(stage for stage in STAGES if stage in getattr(self, name)))


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog=program_name("experiments.study"), description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    formatter = argparse.RawDescriptionHelpFormatter
    runner = commands.add_parser("run", help="plan a study file and run what is not finished", description=__doc__, formatter_class=formatter)
    input_argument(runner, "study", type=Path, help="the study file (YAML; see experiments/studies/README.md)")
    add_options(runner, StudyRunOptions)
    runner.add_argument(
        "--root",
        nargs="?",
        const="",
        help="resolve the study's relative paths against this folder (default: the study file's folder)",
    )
    output_argument(
        runner,
        "--placeholders",
        metavar="DIR",
        help="only write a placeholder (18 rows) for every manifest the study names under DIR (never over a file), "
        "so that --root DIR --dry-run shows the plan before the corpora are downloaded; then stop",
    )
    add_device_argument(
        runner,
        default=None,  # whether this machine has it is checked after parsing, unless --executor slurm sends the work elsewhere
        help="where models and probes run: cpu, cuda, cuda:N, mps (default: the study's device, else cuda if a GPU is visible, else cpu)",
    )
    add_reclaim_stale_argument(runner, "an output of the study")
    add_quiet_argument(runner, "no progress bars")
    add_executor_arguments(runner, "a store shard (extract), a hypotheses file (transcribe), --cells-per-task grid cells (probe)", pick_tasks=False)
    return parser


def _write_placeholders(args: argparse.Namespace) -> int:
    from experiments.study.placeholders import write_placeholders

    root = Path(args.placeholders)
    written = write_placeholders(args.study, root)
    print(f"[study] wrote {len(written)} placeholder files under {root}")
    print(f"[study] now: speech-gender study run {args.study} --root {root} --dry-run")
    return 0


def _run(args: argparse.Namespace) -> int:
    from extract.device import default_device, device_problem

    options = from_args(StudyRunOptions, args)
    if args.root is not None and not args.root.strip():
        return fail("--root needs a folder, and got none: is the shell variable it names unset or empty (e.g. export DATA=~/data first)?")
    if args.placeholders:
        return _write_placeholders(args)
    started = time.time()
    study = load_study(args.study, args.root)
    if args.device is None and study.device is not None and args.executor != "slurm" and device_problem(study.device):
        raise StudyError(f"{study.path}: device: {device_problem(study.device)} (or give --device)")
    device = args.device or study.device or default_device()
    settings = {"reclaim_stale": args.reclaim_stale, "cells_per_task": options.cells_per_task, "redo": options.redo}
    context = Context(study, device, show_progress=not args.quiet, write=not options.dry_run, **settings)
    print(f"[study] {study.name}: {args.study} -> {study.out} (device {context.device})")
    try:
        check_subset(plan(context, options.stages), options.stages, study.path)  # before --redo moves anything: its outputs are planned as to do
    except StudyError as error:
        if not options.redo:
            raise
        raise StudyError(f"{error}; --redo {','.join(options.redo)} would set outputs aside that these stages wait for: nothing was moved") from None
    if options.redo:
        if options.dry_run:
            aside = study.out / ".superseded"
            print(f"[study] --redo {','.join(options.redo)}: a run would set their outputs aside under {aside}/ (the plan below shows them to do)")
        else:
            aside = redo(context, options.redo)
            context.redo = ()  # set aside: the plan now finds them missing, as after any deletion
            print(f"[study] --redo {','.join(options.redo)}: " + (f"earlier outputs set aside -> {aside}" if aside else "no earlier output to set aside"))
    print_lines(["[study] plan:", *describe(plan(context, options.stages))])
    print_lines([f"[study] warning: {line}" for line in join_warnings(context)])
    if options.dry_run:
        print("[study] dry run: nothing loaded, nothing written")
        return 0
    status = run(context, options.stages, executor_options(args, context.device) if args.executor else None)
    if status == 0 and context.layout.results_md.exists():
        print(f"[study] results: {context.layout.results_md}")
    print(f"[study] done in {time.time() - started:.1f} s")
    return status


main = command_main(build_parser, _run, module=__name__)
