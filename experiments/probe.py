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
import sys
from pathlib import Path

from experiments.cli import (
    CommandParser,
    add_device_argument,
    add_groups_argument,
    add_reclaim_stale_argument,
    input_argument,
    output_argument,
    overwritten_input,
    run_cli,
    two_groups,
)
from experiments.scheduling import SchedulingError, add_executor_arguments, check_executor_arguments, submit_grid
from extract.store import StoreError
from probing.controls import CONTROLS
from probing.data import DEFAULT_SPLIT, SPLITS, TASKS, ProbeError
from probing.grid import GridError, expand_grid, read_grid, run_all
from probing.kinds import KINDS
from probing.results import ResultsError, arrays_folder, merge_task_results, task_results_folder
from probing.run import ProbeConfig

# errors a user can fix, shown as one ``error:`` line with exit status 2
PROBE_ERRORS = (GridError, ResultsError, ProbeError, StoreError, SchedulingError)


def _kinds_help() -> str:
    """``--probe``'s help: each kind of the registry (``probing.kinds``) with its headline score."""
    return "; ".join(f"{kind.name}: {kind.summary} (headline {kind.headline})" for kind in KINDS.values())


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    input_argument(parser, "--grid", help="YAML grid file (then the other options come from it)")
    input_argument(parser, "--store")
    parser.add_argument("--site")
    parser.add_argument("--probe", choices=tuple(KINDS), default="positional", help=_kinds_help())
    parser.add_argument("--mdl", action="store_true", help="also compute the online codelength")
    parser.add_argument("--positions", type=int, default=1000, help="positional probes: the first P positions")
    parser.add_argument("--control", choices=CONTROLS, default="none")
    parser.add_argument("--seed", type=int, default=0)
    add_groups_argument(
        parser,
        "the two groups the probe tells apart: female,male (default) or other,male; the first is the positive class",
        old_spellings={"--task": {task: task.replace("-", ",") for task in TASKS}},
    )
    parser.add_argument("--language", help="only utterances in this language")
    parser.add_argument(
        "--split",
        choices=SPLITS,
        default=DEFAULT_SPLIT,
        help="fixed (default): the manifest's train/dev/test, else speaker-disjoint 70/10/20; loso: leave one speaker out, "
        "one fold per speaker, scores pooled over folds (not with --mdl, --control speaker or --apply-to); stratified: each "
        "speaker's utterances spread 70/10/20 over train/dev/test, speakers shared (Attanasio et al. 2024, B.3)",
    )
    parser.add_argument("--no-standardize", dest="standardize", action="store_false", help="logistic probes: raw features (scikit-learn's default)")
    parser.add_argument("--no-mdl-guard", dest="mdl_guard", action="store_false", help="logistic MDL: every block at the fixed C = 1, no mixture over a C grid")
    parser.add_argument("--max-epochs", type=int, default=200, help="attention probe: epoch limit (early stopping usually ends sooner)")
    parser.add_argument("--lr", type=float, default=1e-4, help="attention probe: Adam learning rate (Fucci et al. 2025: 1e-4)")
    input_argument(
        parser,
        "--apply-to",
        help="attention probe: also predict every utterance of this store (e.g. MuST-SHE), saved in the arrays, "
        "and score those labelled with the task's genders (applied_f1_macro, applied_accuracy, applied_recall)",
    )
    parser.add_argument(
        "--allow-shared-speakers",
        action="store_true",
        help="allow manifest dev/test splits or the --apply-to store to share speakers with the training split (recorded in the row)",
    )
    add_device_argument(parser)
    parser.add_argument(
        "--memory-gb",
        type=float,
        default=4.0,
        help="memory budget of a run (default 4): positional probes read as many positions at a time as fit it; attention "
        "probes hold their sequences only when they fit it, else read them from the store per batch. Not part of the run id",
    )
    parser.add_argument(
        "--loader-workers", type=int, default=0, help="attention probe reading from the store: DataLoader workers (default 0: the main process)"
    )
    output_argument(parser, "--out", help="results JSONL (appended)", sidecars=results_files)
    parser.add_argument("--cells-per-task", type=int, default=1, help="with --executor: grid cells per task (default 1)")
    parser.add_argument("--merge", action="store_true", help="only move the rows of finished grid tasks (OUT.tasks/) into the results file, then exit")
    add_reclaim_stale_argument(parser, "the results file (or a grid task's file)")
    add_executor_arguments(parser, "a group of --cells-per-task grid cells (a single run: one task)")
    return parser


def results_files(out: Path) -> list[Path]:
    """What a results file ``out`` keeps beside it: the arrays and the unmerged task files."""
    return [arrays_folder(out), task_results_folder(out)]


def _run(args, configs: list[ProbeConfig], out: Path) -> int:
    if args.merge:
        print(f"[probe] merged {merge_task_results(out)} rows of finished tasks into {out}")
        return 0
    if not args.executor:
        run_all(configs, out, reclaim_stale=args.reclaim_stale)
        return 0
    check_executor_arguments(args)
    return submit_grid(args, configs, out, args.cells_per_task, args.reclaim_stale)


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
        return run_cli(lambda: _run_grid(args), *PROBE_ERRORS)
    missing = [name for name in ("store", "site", "out") if getattr(args, name) is None]
    if missing:
        parser.error(f"missing --{', --'.join(missing)} (or pass --grid)")
    if args.positions <= 0:
        parser.error(f"--positions must be a positive number of frames, got {args.positions}")
    config = probe_config(parser, args)
    return run_cli(lambda: _run(args, [config], Path(args.out)), *PROBE_ERRORS)


def probe_task(parser: argparse.ArgumentParser, text: str) -> str:
    """The probe task (:data:`probing.data.TASKS`) that ``--groups A,B`` names: ``female,male`` -> ``female-male``."""
    task = "-".join(two_groups(parser, text))
    if task not in TASKS:
        parser.error(f"--groups {text}: a probe tells apart {' or '.join(name.replace('-', ',') for name in sorted(TASKS))}")
    return task


def probe_config(parser: argparse.ArgumentParser, args: argparse.Namespace) -> ProbeConfig:
    """The one run the flags describe; a value :class:`ProbeConfig` refuses is a usage error."""
    try:
        return ProbeConfig(
            store=args.store,
            site=args.site,
            probe=args.probe,
            control=args.control,
            seed=args.seed,
            mdl=args.mdl,
            positions=args.positions,
            task=probe_task(parser, args.groups),
            language=args.language,
            standardize=args.standardize,
            max_epochs=args.max_epochs,
            lr=args.lr,
            apply_to=args.apply_to,
            allow_shared_speakers=args.allow_shared_speakers,
            split=args.split,
            mdl_guard=args.mdl_guard,
            device=args.device,
            memory_gb=args.memory_gb,
            loader_workers=args.loader_workers,
        )
    except ProbeError as error:
        parser.error(str(error))


if __name__ == "__main__":
    sys.exit(main())
