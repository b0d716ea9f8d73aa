"""Grids of probe runs: a grid file checked and expanded into configs, and the loop that runs them.

A grid file (YAML) is the Cartesian product of stores x sites x probes x controls x seeds with
shared options; ``python -m experiments.probe --help`` shows one. :func:`run_all` appends one row
per run to a results file (:mod:`probing.results`) and skips runs whose rows are already there
and were computed on the stores as they are now.
"""

from __future__ import annotations

import difflib
import itertools
import time
from dataclasses import fields
from pathlib import Path

import yaml

from extract.appendlog import note_on_stderr
from extract.claims import Claim
from extract.device import default_device
from extract.errors import UserError
from extract.store import ShardReader, StoreError
from probing import results
from probing.data import ProbeError
from probing.kinds import DEFAULT_KIND, probe_kind
from probing.run import ProbeConfig, run_probe

GRID_KEYS = ("out", "stores", "sites", "probes", "controls", "seeds", "options")
GRID_AXES = ("store", "site", "probe", "control", "seed")  # ProbeConfig fields the grid's lists set
OPTION_KEYS = tuple(f.name for f in fields(ProbeConfig) if f.name not in GRID_AXES)


class GridError(UserError, ValueError):
    """A grid, or a list of runs, that cannot run as given: an unknown key, a malformed value, a missing store."""


def check_keys(found, known: tuple[str, ...], where: str, belongs_under_options: tuple[str, ...] = ()) -> None:
    """Every key must be a known one; a typo gets the nearest known name (grid files here, study
    files in ``experiments.study``)."""
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
        raise GridError(f"{where}: unknown key {key!r}; {hint}")


OPTION_TYPES = {f.name: str(f.type) for f in fields(ProbeConfig) if f.name in OPTION_KEYS}
_ACCEPTED = {  # YAML scalars each annotation accepts: a quoted "false" is a string, never a boolean
    "bool": (bool,),
    "int": (int,),
    "float": (int, float),
    "str": (str,),
    "str | None": (str, type(None)),
}


def check_option_types(options: dict, where: str) -> None:
    """Each probe option's YAML value must be of its :class:`ProbeConfig` field's type."""
    for key, value in options.items():
        accepted = _ACCEPTED[OPTION_TYPES[key]]
        if isinstance(value, bool) and bool not in accepted or not isinstance(value, accepted):
            raise GridError(f"{where}: {key} is {OPTION_TYPES[key]}, got {value!r} ({type(value).__name__}); write it unquoted, e.g. {key}: {_example(key)}")


def _example(key: str):
    default = next(f.default for f in fields(ProbeConfig) if f.name == key)
    return "true" if default is False else "false" if default is True else default


class DuplicateKeyError(UserError, ValueError):
    """A mapping that names one key twice (PyYAML would keep the last value without a word)."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.safe_load`` that refuses a key given twice in one mapping, naming both lines."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    first = seen.get(key)
                    seen[key] = line
                except TypeError:  # an unhashable key: PyYAML's own error says so
                    break
                if first is not None:
                    where = f"on line {first} and on line {line}" if first != line else f"on line {line}"
                    raise DuplicateKeyError(f"key {key!r} is given twice, {where}")
        return super().construct_mapping(node, deep)


def load_yaml(path: Path, what: str, example: str) -> object:
    """A YAML file's content; a missing file, bytes that are not UTF-8 and malformed YAML are a
    :class:`GridError` naming the file (and line). ``what`` names the file's kind, ``example`` where
    to find one."""
    if not path.is_file():
        raise GridError(f"{what} {path} " + ("is a folder" if path.is_dir() else "does not exist"))
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)
    except DuplicateKeyError as error:
        raise GridError(f"{path}: {error}; keep one of them") from None
    except UnicodeDecodeError as error:
        raise GridError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from error
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise GridError(f"{where}: malformed YAML: {getattr(error, 'problem', None) or error}; fix the file (see {example} for an example)") from error


def read_grid(path: Path) -> dict:
    """A grid file's mapping, every key checked; YAML errors name the file and line."""
    grid = load_yaml(path, "grid file", "`python -m experiments.probe --help`")
    if not isinstance(grid, dict):
        raise GridError(f"{path}: a grid is a mapping of keys ({', '.join(GRID_KEYS)}), got {type(grid).__name__}")
    check_keys(grid, GRID_KEYS, f"{path}: top level", belongs_under_options=OPTION_KEYS)
    missing = [key for key in ("stores", "out") if key not in grid]
    if missing:
        raise GridError(f"{path}: a grid needs {' and '.join(repr(k) for k in missing)}")
    options = grid.get("options") or {}
    if not isinstance(options, dict):
        raise GridError(f"{path}: 'options' is a mapping, e.g. options: {{mdl: true}}; got {options!r}")
    check_keys(options, OPTION_KEYS, f"{path}: options")
    check_option_types(options, f"{path}: options")
    for key in ("stores", "probes", "controls", "seeds") + (() if grid.get("sites", "all") == "all" else ("sites",)):
        if key in grid and not (isinstance(grid[key], list) and grid[key]):
            raise GridError(f"{path}: '{key}' is a non-empty list, e.g. {key}: [...]; got {grid[key]!r}")
    if not all(isinstance(seed, int) and not isinstance(seed, bool) for seed in grid.get("seeds", [0])):
        raise GridError(f"{path}: 'seeds' are integers; got {grid['seeds']!r}")
    return grid


def expand_grid(grid: dict, where: str = "grid") -> list[ProbeConfig]:
    """The Cartesian product of stores x sites x probes x controls x seeds, with shared options
    (``apply_to`` goes to the runs of kinds that predict another store, :attr:`ProbeKind.applies_to_other_stores`)."""
    options = {"device": default_device(), **(grid.get("options") or {})}
    configs = []
    for store in grid["stores"]:
        check_store(str(store))
        try:
            sites = ShardReader(store, allow_partial=bool(options.get("allow_partial"))).sites if grid.get("sites", "all") == "all" else grid["sites"]
        except StoreError as error:
            raise GridError(f"{where}: {error}") from error
        for site, probe, control, seed in itertools.product(sites, grid.get("probes", [DEFAULT_KIND]), grid.get("controls", ["none"]), grid.get("seeds", [0])):
            try:
                run_options = options if probe_kind(probe).applies_to_other_stores else {k: v for k, v in options.items() if k != "apply_to"}
                configs.append(ProbeConfig(store=str(store), site=site, probe=probe, control=control, seed=int(seed), **run_options))
            except (ProbeError, TypeError) as error:
                raise GridError(f"{where}: {error}") from error
    return configs


def check_store(path: str, what: str = "store") -> None:
    if not Path(path).exists():
        raise GridError(f"{what} {path} does not exist; extract it first (python -m experiments.extract) or fix the path")


def _describe(row: dict) -> str:
    """A run's scores as its progress line prints them, each with its unit (a per-position probe's
    headline F1_S alone: its pooled F1 is beside it in the row)."""
    if "f1_s" in row:
        parts = [f"F1_S {row['f1_s']:.1f} % (macro-F1 averaged over speech positions; 50: chance)"]
    else:
        parts = [f"F1 {row['f1_macro']:.1f} % (macro-F1; 50: chance)"]
    if "selectivity" in row:
        parts.append(f"selectivity {row['selectivity']:+.1f} points (the real labels' F1 minus this control's)")
    if "compression" in row:
        parts.append(f"compression {row['compression']:.2f} (MDL: uniform codelength over online codelength)")
    if "shared_speakers_only" in row:
        parts.append("warning: speakers shared by train and test, the only split that runs here (the row's shared_speakers_only says why)")
    return ", ".join(parts)


def _scope(config: ProbeConfig) -> str:
    """`` language=fr split=loso`` in a run's progress line where they are not the defaults."""
    return (f" language={config.language}" if config.language else "") + ("" if config.split == ProbeConfig.split else f" split={config.split}")


def pending(configs: list[ProbeConfig], out: Path) -> tuple[list[ProbeConfig], int]:
    """The configs without a current row in ``out`` or in its unmerged task files, and how many of
    them have a row computed on a store that has changed since."""
    rows = (results.load_rows(out) if out.exists() else {}) | results.task_rows(out)
    finished = results.finished_ids(configs, rows)
    todo = [config for config in configs if config.run_id() not in finished]
    return todo, sum(config.run_id() in rows for config in todo)


def grid_tasks(configs: list[ProbeConfig], cells_per_task: int = 1) -> list[list[ProbeConfig]]:
    """The grid's cells in groups of ``cells_per_task``, in grid order: task ``i`` always holds the same cells."""
    if cells_per_task < 1:
        raise GridError(f"cells per task must be at least 1, got {cells_per_task}")
    return [configs[start : start + cells_per_task] for start in range(0, len(configs), cells_per_task)]


def _task_shown(config: ProbeConfig) -> str:
    """`` task=...`` in a run's progress line where the task is not the default (an attribute's pairs differ only there)."""
    return "" if config.task == ProbeConfig.task else f" task={config.task}"


def run_all(configs: list[ProbeConfig], out: Path, task: int | None = None, reclaim_stale: bool = False, keep_going: bool = False) -> None:
    """Runs the configs without a current row in results file ``out``, appending a row as each
    finishes and printing progress. A run that fails raises :class:`~probing.data.ProbeError`
    naming its probe, store and site (the rows of the runs before it are kept). With ``task``
    (a grid task running beside others), rows go to that task's own file (:func:`probing.results.task_results_file`)
    and arrays to ``out``'s arrays folder; :func:`probing.results.merge_task_results` moves the rows into ``out``.
    The file rows go to is claimed for the whole call (:class:`extract.claims.Claim`: a second process
    computing the same runs into it is refused; ``reclaim_stale`` takes over the claim of a killed one).
    With ``keep_going`` (runs that do not depend on each other, e.g. an attribute's pairs), a run that
    fails is reported and the others still run; the error at the end counts and names the failures."""
    results.check_results_path(out)
    for store in sorted({c.store for c in configs}):
        check_store(store)
    for store in sorted({c.apply_to for c in configs if c.apply_to}):
        check_store(store, "--apply-to store")
    target = out if task is None else results.task_results_file(out, task)
    target.parent.mkdir(parents=True, exist_ok=True)
    with Claim(target, reclaim_stale, note_on_stderr):
        for path in dict.fromkeys((out, target)):
            results.drop_cut_result_line(path)
        todo, stale = pending(configs, out)
        print(
            f"[probe] {len(configs)} runs, {len(configs) - len(todo)} already in {out}, {len(todo)} to do"
            + (f" ({stale} of them finished on a store that has changed since: recomputed)" if stale else "")
        )
        failed = []
        for number, config in enumerate(todo, start=1):
            started = time.time()
            try:
                result = run_probe(config)
            except (ProbeError, StoreError) as error:
                message = f"{config.probe} probe on {config.store}, site {config.site}{_task_shown(config) if keep_going else ''}: {error}"
                if not keep_going:
                    raise ProbeError(message) from error
                failed.append(message)
                print(f"[probe] {number}/{len(todo)} not probed: {message}", flush=True)
                continue
            results.save_result(result, target, arrays_to=out)
            print(
                f"[probe] {number}/{len(todo)} {config.probe} {config.site}{_scope(config)}{_task_shown(config)} control={config.control} seed={config.seed}: "
                f"{_describe(result.row)} ({time.time() - started:.1f} s)",
                flush=True,
            )
    print(f"[probe] results: {out}; arrays: {results.arrays_folder(out)}")
    if failed:
        raise ProbeError(f"{len(failed)} of {len(todo)} runs could not be probed (the others' rows are written; listed above): {failed[0]}")
