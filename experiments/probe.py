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

Rows are appended as runs finish; a rerun skips run ids already in the output. Per-position arrays
and attention weights are saved beside the JSONL, in ``<out>.arrays/<run_id>.npz``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from dataclasses import fields
from pathlib import Path

import numpy as np

from probing.controls import CONTROLS
from probing.run import PROBES, ProbeConfig, run_probe


def finished_ids(out: Path) -> set[str]:
    if not out.exists():
        return set()
    done = set()
    with out.open() as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                try:
                    done.add(json.loads(line)["run_id"])
                except (json.JSONDecodeError, KeyError) as error:
                    raise SystemExit(f"error: {out}:{number}: not a result row ({error})")
    return done


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
    """Result rows of a probes JSONL by run id."""
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


def expand_grid(grid: dict) -> list[ProbeConfig]:
    """The Cartesian product of stores x sites x probes x controls x seeds, with shared options."""
    from extract.store import ShardReader

    known = {f.name for f in fields(ProbeConfig)}
    options = dict(grid.get("options") or {})
    unknown = set(options) - known
    if unknown:
        raise SystemExit(f"error: unknown grid option(s) {sorted(unknown)}; known: {sorted(known - {'store', 'site', 'probe', 'control', 'seed'})}")
    configs = []
    for store in grid["stores"]:
        sites = ShardReader(store).sites if grid.get("sites", "all") == "all" else grid["sites"]
        for site, probe, control, seed in itertools.product(sites, grid.get("probes", ["positional"]), grid.get("controls", ["none"]), grid.get("seeds", [0])):
            configs.append(ProbeConfig(store=str(store), site=site, probe=probe, control=control, seed=int(seed), **options))
    return configs


def _describe(row: dict) -> str:
    parts = [f"F1 {row['f1_macro']:.1f}"]
    for key, label in (("f1_s", "F1_S"), ("compression", "compression"), ("selectivity", "selectivity")):
        if key in row:
            parts.append(f"{label} {row[key]:.2f}")
    return ", ".join(parts)


def run_all(configs: list[ProbeConfig], out: Path) -> int:
    out.parent.mkdir(parents=True, exist_ok=True)
    done = finished_ids(out)
    todo = [c for c in configs if c.run_id() not in done]
    print(f"[probe] {len(configs)} runs, {len(configs) - len(todo)} already in {out}, {len(todo)} to do")
    for number, config in enumerate(todo, start=1):
        started = time.time()
        result = run_probe(config)
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
    parser.add_argument("--task", choices=["female-male", "other-male"], default="female-male")
    parser.add_argument("--language", help="only utterances in this language")
    parser.add_argument("--no-standardize", dest="standardize", action="store_false")
    parser.add_argument("--max-epochs", type=int, default=200, help="attention probe: epoch limit (early stopping usually ends sooner)")
    parser.add_argument("--lr", type=float, default=1e-4, help="attention probe: Adam learning rate (Fucci et al. 2025: 1e-4)")
    parser.add_argument("--apply-to", help="attention probe: also predict every utterance of this store (e.g. MuST-SHE), saved in the arrays")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", help="results JSONL (appended)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.grid:
        import yaml

        grid = yaml.safe_load(Path(args.grid).read_text())
        if not isinstance(grid, dict) or "stores" not in grid or "out" not in grid:
            raise SystemExit(f"error: {args.grid}: a grid needs at least 'stores' and 'out'")
        return run_all(expand_grid(grid), Path(grid["out"]))
    missing = [name for name in ("store", "site", "out") if getattr(args, name) is None]
    if missing:
        raise SystemExit(f"error: missing --{', --'.join(missing)} (or pass --grid)")
    config = ProbeConfig(
        store=args.store, site=args.site, probe=args.probe, control=args.control, seed=args.seed, mdl=args.mdl,
        positions=args.positions, task=args.task, language=args.language, standardize=args.standardize,
        max_epochs=args.max_epochs, lr=args.lr, apply_to=args.apply_to, device=args.device,
    )
    return run_all([config], Path(args.out))


if __name__ == "__main__":
    sys.exit(main())
