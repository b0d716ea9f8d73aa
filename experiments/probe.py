"""``python -m experiments.probe``: train probes on stored hidden states; one JSONL row per run.

One run::

    python -m experiments.probe --store stores/whisper-base/demo --site encoder.layer.5 --probe positional \\
        --mdl --control shuffled --seed 0 --out results/probes.jsonl

A grid (the Cartesian product of stores x sites x probes x controls x seeds)::

    python -m experiments.probe --grid grid.yaml

    # grid.yaml
    out: results/probes.jsonl
    stores: [stores/whisper-base/demo]
    sites: all                # or a list
    probes: [positional, attention]
    controls: [none, shuffled, speaker]
    seeds: [0, 1, 2]
    options: {mdl: true, positions: 1000, task: female-male}

Leave one speaker out (``--split loso``, grid option ``split: loso``), for corpora with too few
voices for a fixed speaker-disjoint split holding both genders (the real voices)::

    python -m experiments.probe --store stores/whisper-base/realvoices --site encoder.final --probe mean --split loso --out results/probes.jsonl

trains one probe per held-out speaker and scores it on that speaker's utterances; the row's
``f1_macro`` (the headline) pools the predictions of every fold, ``folds`` gives each speaker's
accuracy and ``fold_accuracy_mean`` their mean. The attention and sampled probes hold out one more
training speaker per gender as their dev split. MDL, the speaker control and ``--apply-to`` are
refused with it (``probing.run._loso_run`` says why).

A speaker attribute of the manifest's ``extra`` instead of gender (``docs/attributes.md``)::

    python -m experiments.probe --store stores/wb/demo --site encoder.final --probe mean --attribute accent --out results/probes.jsonl
    python -m experiments.probe --store stores/wb/demo --site encoder.layer.3 --attribute accent --pairs --out results/probes.jsonl

reads the attribute from the manifest the store was extracted from (refused if it changed since;
``--labels MANIFEST`` names it where the store's recorded path does not lead to it). Without
``--groups`` every class is probed at once (three classes or more: ``--probe mean`` or ``max``, a
multinomial logistic regression, or ``attention``, a K-class softmax head; macro F1 over the
classes); ``--groups A,B`` probes two of them, ``--pairs`` each pair in its own row (task
``attribute:NAME:A,B``).

Rows are appended as runs finish; a rerun skips run ids already in the output whose stores are
unchanged (the row's ``store_identity``), and recomputes the others: the latest row of a run id is
the one readers use. Per-position arrays and attention weights are saved beside the JSONL, in
``<out>.arrays/<run_id>.npz``. Every key of a grid file is checked; bad input ends with one
``error:`` line and exit status 2. The library: ``probing.grid`` (grid files, the run loop) and
``probing.results`` (the results format: ``load_rows``, ``load_arrays``, ``load_attention``).

Memory: positional probes read ``--memory-gb`` worth of positions at a time (grid option
``memory_gb``), attention probes read their sequences from the store batch by batch once they
exceed it. On a cluster (``experiments.scheduling``)::

    python -m experiments.probe --grid grid.yaml --executor slurm --partition cpu --cpus 8 --task-memory-gb 32 --cells-per-task 4
    python -m experiments.probe --grid grid.yaml --merge     # after --no-wait: move the task files' rows into out
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path

from experiments.cli import (
    CommandParser,
    add_device_argument,
    add_groups_argument,
    add_reclaim_stale_argument,
    flag_given,
    input_argument,
    output_argument,
    overwritten_input,
    run_cli,
    two_groups,
)
from experiments.options import add_options, from_args
from experiments.scheduling import GridTasks, add_executor_arguments, executor_options, submit_grid
from extract.attributes import LabelError, attribute_task, parse_attribute_task
from extract.options import option
from probing.data import TASKS, ProbeError, pair_tasks
from probing.grid import GridError, expand_grid, read_grid, run_all
from probing.results import arrays_folder, merge_task_results, task_results_folder
from probing.run import ProbeConfig

PROBE_FLAGS_BY_HAND = ("task", "device")  # task: --groups or --attribute; --device: auto by default
GIVEN_BY_A_GRID = ("store", "site")  # required of a single run (main), not with --grid


@dataclass(frozen=True)
class ProbeCommandOptions(GridTasks):
    """What the command does with the grid or run besides training: its executor tasks, or only merging their rows."""

    merge: bool = option(False, "only move the rows of finished grid tasks (OUT.tasks/) into the results file, then exit")


@dataclass(frozen=True)
class AttributeTask:
    """A speaker attribute as the probe task (one run's flags; a grid gives ``task: attribute:NAME`` in its options)."""

    attribute: str | None = option(
        None,
        "probe this attribute of the manifest's extra (e.g. age, accent) instead of gender: every class at once, "
        "the two of --groups A,B, or each pair with --pairs",
        metavar="NAME",
    )
    pairs: bool = option(False, "with --attribute: one two-class probe, one row, per pair of the attribute's classes")


def build_parser() -> argparse.ArgumentParser:
    """A grid file, or one run: the store and site, the two groups, the device, then the options of :class:`ProbeConfig`."""
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    input_argument(parser, "--grid", help="YAML grid file (then the other options come from it)")
    add_options(parser, ProbeConfig, skip=PROBE_FLAGS_BY_HAND, optional=GIVEN_BY_A_GRID)
    add_options(parser, AttributeTask)
    add_groups_argument(
        parser,
        "the two groups the probe tells apart: female,male (default) or other,male; with --attribute, two of its classes; the first is the positive class",
        old_spellings={"--task": {task: task.replace("-", ",") for task in TASKS}},
        attribute_tasks=True,
    )
    add_device_argument(parser)
    output_argument(parser, "--out", help="results JSONL (appended)", sidecars=results_files)
    add_options(parser, ProbeCommandOptions)
    add_reclaim_stale_argument(parser, "the results file (or a grid task's file)")
    add_executor_arguments(parser, "a group of --cells-per-task grid cells (a single run: one task)")
    return parser


def results_files(out: Path) -> list[Path]:
    """What a results file ``out`` keeps beside it: the arrays and the unmerged task files."""
    return [arrays_folder(out), task_results_folder(out)]


def _run(args, configs: list[ProbeConfig], out: Path, keep_going: bool = False) -> int:
    command = from_args(ProbeCommandOptions, args)
    if command.merge:
        print(f"[probe] merged {merge_task_results(out)} rows of finished tasks into {out}")
        return 0
    if not args.executor:
        run_all(configs, out, reclaim_stale=args.reclaim_stale, keep_going=keep_going)
        return 0
    return submit_grid(executor_options(args, args.device), configs, out, command.cells_per_task, args.reclaim_stale)


def _run_grid(args) -> int:
    path = Path(args.grid)
    grid = read_grid(path)
    configs, out = expand_grid(grid, str(path)), Path(str(grid["out"]))
    stores = sorted({c.store for c in configs} | {c.apply_to for c in configs if c.apply_to})
    inputs = [("--grid", path), *(("a store of --grid", Path(store)) for store in stores)]
    problem = overwritten_input(inputs, [("out of --grid", out, [out, *results_files(out)])])
    if problem is not None:
        raise GridError(problem)
    return _run(args, configs, out)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.grid:
        if args.attribute or args.pairs:
            parser.error("--attribute and --pairs describe one run; a grid names its task in options: task: attribute:NAME, or attribute:NAME:A,B for a pair")
        return run_cli(lambda: _run_grid(args))
    missing = [name for name in (*GIVEN_BY_A_GRID, "out") if getattr(args, name) is None]
    if missing:
        parser.error(f"missing --{', --'.join(missing)} (or pass --grid)")
    if args.positions <= 0:
        parser.error(f"--positions must be a positive number of frames, got {args.positions}")
    config = probe_config(parser, args, flag_given(argv, "--groups"))
    if args.pairs:  # the pairs are read from the store inside run_cli: its refusals are one line, as the runs' are
        return run_cli(lambda: _run(args, _pair_configs(config), Path(args.out), keep_going=True))
    return run_cli(lambda: _run(args, [config], Path(args.out)))


def _pair_configs(config: ProbeConfig) -> list[ProbeConfig]:
    """One run per pair of the attribute's classes in the store (:func:`probing.data.pair_tasks`)."""
    return [dataclasses.replace(config, task=task) for task in pair_tasks(config)]


def probe_task(parser: argparse.ArgumentParser, text: str) -> str:
    """The probe task (:data:`probing.data.TASKS`) that ``--groups A,B`` names: ``female,male`` -> ``female-male``."""
    task = "-".join(two_groups(parser, text))
    if task not in TASKS:
        parser.error(f"--groups {text}: a probe tells apart {' or '.join(name.replace('-', ',') for name in sorted(TASKS))}")
    return task


def attribute_probe_task(parser: argparse.ArgumentParser, args: argparse.Namespace, given_groups: bool) -> str:
    """The task of ``--attribute NAME``: every class (``attribute:NAME``, also with ``--pairs``, which
    runs each pair), or the two of ``--groups A,B`` (``attribute:NAME:A,B``, taken as spelled)."""
    if args.pairs and given_groups:
        parser.error("--pairs probes every pair of the attribute's classes: leave --groups out, or drop --pairs to probe the two of --groups")
    try:
        return attribute_task(args.attribute, tuple(group.strip() for group in args.groups.split(",")) if given_groups else ())
    except LabelError as error:
        parser.error(f"--attribute {args.attribute}: {error}")


def _task_spelled_attribute(parser: argparse.ArgumentParser, args: argparse.Namespace, given_groups: bool) -> bool:
    """Reads ``--task attribute:NAME[:A,B]`` (issue 32's spelling) into ``args.attribute`` and
    ``args.groups``; returns whether it named groups. Refused beside ``--attribute``, ``--groups`` or a
    gender ``--task``, in one line (the last of two would otherwise win silently)."""
    spelled = args.attribute_task
    if args.groups_task is not None and (spelled is not None or args.attribute is not None):
        parser.error(f"--task {args.groups_task} is a gender probe: leave it out to probe an attribute (--attribute NAME, or --task attribute:NAME)")
    if spelled is None:
        return False
    if args.attribute is not None or given_groups:
        parser.error(f"--task {spelled} names the attribute (and its groups): leave out --attribute and --groups, or spell it --attribute NAME --groups A,B")
    try:
        args.attribute, classes = parse_attribute_task(spelled)
    except LabelError as error:
        parser.error(f"--task {spelled}: {error}")
    if classes:
        args.groups = ",".join(classes)
    return bool(classes)


def probe_config(parser: argparse.ArgumentParser, args: argparse.Namespace, given_groups: bool = False) -> ProbeConfig:
    """The one run the flags describe; a value :class:`ProbeConfig` refuses is a usage error."""
    given_groups = _task_spelled_attribute(parser, args, given_groups) or given_groups
    if args.pairs and args.attribute is None:
        parser.error("--pairs pairs the classes of an attribute: give --attribute NAME")
    task = probe_task(parser, args.groups) if args.attribute is None else attribute_probe_task(parser, args, given_groups)
    try:
        return from_args(ProbeConfig, args, skip=PROBE_FLAGS_BY_HAND, task=task, device=args.device)
    except ProbeError as error:
        parser.error(str(error))


if __name__ == "__main__":
    sys.exit(main())
