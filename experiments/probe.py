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

Rows are appended as runs finish; a rerun skips run ids already in the output whose stores are
unchanged (the row's ``store_identity``), and recomputes the others: the latest row of a run id is
the one readers use. Per-position arrays and attention weights are saved beside the JSONL, in
``<out>.arrays/<run_id>.npz``. Every key of a grid file is checked; bad input ends with one
``error:`` line and exit status 2.
"""

from __future__ import annotations

import argparse
import difflib
import itertools
import json
import sys
import time
from dataclasses import fields
from pathlib import Path
from typing import NoReturn

import numpy as np

from extract.store import StoreError
from probing.controls import CONTROLS
from probing.data import TASKS, ProbeError
from probing.run import PROBES, ProbeConfig, config_store_identity, run_probe

GRID_KEYS = ("out", "stores", "sites", "probes", "controls", "seeds", "options")
GRID_AXES = ("store", "site", "probe", "control", "seed")  # ProbeConfig fields the grid's lists set
OPTION_KEYS = tuple(f.name for f in fields(ProbeConfig) if f.name not in GRID_AXES)


def fail(message: str) -> NoReturn:
    """One ``error:`` line on stderr, exit status 2."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def finished_rows(out: Path) -> dict[str, dict]:
    """The latest row of every run id in ``out`` (empty if it does not exist yet)."""
    if not out.exists():
        return {}
    rows = {}
    with out.open() as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                try:
                    row = json.loads(line)
                    rows[row["run_id"]] = row
                except (json.JSONDecodeError, KeyError, TypeError) as error:
                    fail(f"{out}:{number}: not a result row ({error!r}); move the file aside or fix that line")
    return rows


def save_result(result, out: Path) -> None:
    folder = arrays_folder(out)
    folder.mkdir(parents=True, exist_ok=True)
    run_id = result.row["run_id"]
    if result.arrays:
        np.savez_compressed(folder / f"{run_id}.npz", **result.arrays)
    if result.attention:
        weights = result.attention["weights"]
        np.savez_compressed(
            folder / f"{run_id}.attention.npz",
            ids=np.array(result.attention["ids"]),
            offsets=np.cumsum([0] + [len(w) for w in weights]),
            weights=np.concatenate(weights) if weights else np.zeros(0),
            probabilities=np.asarray(result.attention["probabilities"]),
        )
    with out.open("a") as handle:
        handle.write(json.dumps(result.row) + "\n")


def arrays_folder(out: Path) -> Path:
    return Path(out).with_name(Path(out).name + ".arrays")


def load_rows(out: Path) -> dict[str, dict]:
    """Result rows of a probes JSONL by run id; a run recomputed after its store changed: its latest row."""
    with Path(out).open() as handle:
        return {row["run_id"]: row for row in map(json.loads, filter(str.strip, handle))}


def load_arrays(out: Path, run_id: str) -> dict[str, np.ndarray]:
    """The per-position (and applied-store) arrays saved for one run."""
    with np.load(arrays_folder(out) / f"{run_id}.npz") as data:
        return dict(data)


def load_attention(out: Path, run_id: str) -> tuple[list[str], list[np.ndarray], np.ndarray]:
    """(test ids, attention weights per test utterance, P(class 1) per test utterance) of an attention run."""
    with np.load(arrays_folder(out) / f"{run_id}.attention.npz") as data:
        offsets, weights = data["offsets"], data["weights"]
        return [str(i) for i in data["ids"]], [weights[a:b] for a, b in zip(offsets[:-1], offsets[1:])], data["probabilities"]


def _check_keys(found, known: tuple[str, ...], where: str, belongs_under_options: tuple[str, ...] = ()) -> None:
    """Every key must be a known one; a typo gets the nearest known name."""
    for key in found:
        if key in known:
            continue
        nearest = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
        if nearest:
            hint = f"did you mean {nearest[0]!r}?"
        elif key in belongs_under_options:
            hint = f"per-run options go under 'options:', e.g. options: {{{key}: ...}}"
        else:
            hint = f"known keys: {', '.join(known)}"
        fail(f"{where}: unknown key {key!r}; {hint}")


def read_grid(path: Path) -> dict:
    """A grid file's mapping, every key checked; YAML errors name the file and line."""
    import yaml

    if not path.is_file():
        fail(f"grid file {path} " + ("is a folder" if path.is_dir() else "does not exist"))
    try:
        grid = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as error:
        fail(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})")
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        fail(f"{where}: malformed YAML: {getattr(error, 'problem', None) or error}; fix the file (see `python -m experiments.probe --help` for an example)")
    if not isinstance(grid, dict):
        fail(f"{path}: a grid is a mapping of keys ({', '.join(GRID_KEYS)}), got {type(grid).__name__}")
    _check_keys(grid, GRID_KEYS, f"{path}: top level", belongs_under_options=OPTION_KEYS)
    missing = [key for key in ("stores", "out") if key not in grid]
    if missing:
        fail(f"{path}: a grid needs {' and '.join(repr(k) for k in missing)}")
    options = grid.get("options") or {}
    if not isinstance(options, dict):
        fail(f"{path}: 'options' is a mapping, e.g. options: {{mdl: true}}; got {options!r}")
    _check_keys(options, OPTION_KEYS, f"{path}: options")
    for key in ("stores", "probes", "controls", "seeds") + (() if grid.get("sites", "all") == "all" else ("sites",)):
        if key in grid and not (isinstance(grid[key], list) and grid[key]):
            fail(f"{path}: '{key}' is a non-empty list, e.g. {key}: [...]; got {grid[key]!r}")
    if not all(isinstance(seed, int) and not isinstance(seed, bool) for seed in grid.get("seeds", [0])):
        fail(f"{path}: 'seeds' are integers; got {grid['seeds']!r}")
    return grid


def expand_grid(grid: dict, where: str = "grid") -> list[ProbeConfig]:
    """The Cartesian product of stores x sites x probes x controls x seeds, with shared options
    (``apply_to`` goes to the attention runs only: the other probes predict nothing elsewhere)."""
    from extract.store import ShardReader

    options = dict(grid.get("options") or {})
    configs = []
    for store in grid["stores"]:
        check_store(str(store))
        try:
            sites = ShardReader(store).sites if grid.get("sites", "all") == "all" else grid["sites"]
        except StoreError as error:
            fail(f"{where}: {error}")
        for site, probe, control, seed in itertools.product(sites, grid.get("probes", ["positional"]), grid.get("controls", ["none"]), grid.get("seeds", [0])):
            run_options = options if probe == "attention" else {k: v for k, v in options.items() if k != "apply_to"}
            try:
                configs.append(ProbeConfig(store=str(store), site=site, probe=probe, control=control, seed=int(seed), **run_options))
            except (ProbeError, TypeError) as error:
                fail(f"{where}: {error}")
    return configs


def check_store(path: str, what: str = "store") -> None:
    if not Path(path).exists():
        fail(f"{what} {path} does not exist; extract it first (python -m experiments.extract) or fix the path")


def check_out(out: Path) -> None:
    if out.is_dir():
        fail(f"results file {out} is a folder; give a file, e.g. {out / 'probes.jsonl'}")
    for parent in out.parents:
        if parent.exists() and not parent.is_dir():
            fail(f"results file {out}: {parent} is a file, not a folder")


def _describe(row: dict) -> str:
    parts = [f"F1 {row['f1_macro']:.1f}"]
    for key, label in (("f1_s", "F1_S"), ("compression", "compression"), ("selectivity", "selectivity")):
        if key in row:
            parts.append(f"{label} {row[key]:.2f}")
    return ", ".join(parts)


def _unfinished(configs: list[ProbeConfig], rows: dict[str, dict]) -> tuple[list[ProbeConfig], int]:
    """Configs without a row, or whose row read stores that have changed since (returned with their count)."""
    identities: dict[tuple, str] = {}
    todo, stale = [], 0
    for config in configs:
        row = rows.get(config.run_id())
        if row is not None:
            key = (config.store, config.apply_to)
            if key not in identities:
                identities[key] = config_store_identity(config)
            if row.get("store_identity") == identities[key]:
                continue
            stale += 1
        todo.append(config)
    return todo, stale


def run_all(configs: list[ProbeConfig], out: Path) -> int:
    check_out(out)
    for store in sorted({c.store for c in configs}):
        check_store(store)
    for store in sorted({c.apply_to for c in configs if c.apply_to}):
        check_store(store, "--apply-to store")
    out.parent.mkdir(parents=True, exist_ok=True)
    todo, stale = _unfinished(configs, finished_rows(out))
    print(f"[probe] {len(configs)} runs, {len(configs) - len(todo)} already in {out}, {len(todo)} to do"
          + (f" ({stale} of them finished on a store that has changed since: recomputed)" if stale else ""))
    for number, config in enumerate(todo, start=1):
        started = time.time()
        try:
            result = run_probe(config)
        except (ProbeError, StoreError) as error:
            fail(f"{config.probe} probe on {config.store}, site {config.site}: {error}")
        save_result(result, out)
        print(f"[probe] {number}/{len(todo)} {config.probe} {config.site} control={config.control} seed={config.seed}: "
              f"{_describe(result.row)} ({time.time() - started:.1f} s)", flush=True)
    print(f"[probe] results: {out}; arrays: {out.with_name(out.name + '.arrays')}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--grid", help="YAML grid file (then the other options come from it)")
    parser.add_argument("--store")
    parser.add_argument("--site")
    parser.add_argument("--probe", choices=PROBES, default="positional")
    parser.add_argument("--mdl", action="store_true", help="also compute the online codelength")
    parser.add_argument("--positions", type=int, default=1000, help="positional probes: the first P positions")
    parser.add_argument("--control", choices=CONTROLS, default="none")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--task", choices=sorted(TASKS), default="female-male")
    parser.add_argument("--language", help="only utterances in this language")
    parser.add_argument("--no-standardize", dest="standardize", action="store_false")
    parser.add_argument("--max-epochs", type=int, default=200, help="attention probe: epoch limit (early stopping usually ends sooner)")
    parser.add_argument("--lr", type=float, default=1e-4, help="attention probe: Adam learning rate (Fucci et al. 2025: 1e-4)")
    parser.add_argument("--apply-to", help="attention probe: also predict every utterance of this store (e.g. MuST-SHE), saved in the arrays, "
                        "and score those labelled with the task's genders (applied_f1_macro, applied_accuracy, applied_recall)")
    parser.add_argument("--allow-shared-speakers", action="store_true",
                        help="allow manifest dev/test splits or the --apply-to store to share speakers with the training split (recorded in the row)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", help="results JSONL (appended)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.grid:
        grid = read_grid(Path(args.grid))
        return run_all(expand_grid(grid, args.grid), Path(str(grid["out"])))
    missing = [name for name in ("store", "site", "out") if getattr(args, name) is None]
    if missing:
        parser.error(f"missing --{', --'.join(missing)} (or pass --grid)")
    if args.positions <= 0:
        parser.error(f"--positions must be a positive number of frames, got {args.positions}")
    try:
        config = ProbeConfig(
            store=args.store, site=args.site, probe=args.probe, control=args.control, seed=args.seed, mdl=args.mdl,
            positions=args.positions, task=args.task, language=args.language, standardize=args.standardize,
            max_epochs=args.max_epochs, lr=args.lr, apply_to=args.apply_to, allow_shared_speakers=args.allow_shared_speakers,
            device=args.device,
        )
    except ProbeError as error:
        parser.error(str(error))
    return run_all([config], Path(args.out))


if __name__ == "__main__":
    sys.exit(main())
