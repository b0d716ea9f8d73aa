"""The store's writer against the disk: ``extract.store.PartWriter`` vs a raw write + fsync of the same bytes.

One run writes the same states twice into the same folder: through ``PartWriter`` (buffered
whole-chunk writes, checksums, the finite check, read-back verification, fsync, rename) and as
raw bytes with ``write`` + ``fsync`` (the physical bound: what the disk takes). The states arrive
already in the storage dtype, as the extraction loop hands them over (it casts on the model's
device). Repeats alternate the two, and the table gives each one's median wall time, the median
CPU seconds of the process while it wrote (all its threads: on a machine shared with other work
the wall-time ratio follows the share of the cores each side gets, the CPU seconds do not) and
the load average before and after. Usage::

    .venv/bin/python benchmarks/store_writer.py                       # Whisper base: 8 sites x 512, demo-length clips
    .venv/bin/python benchmarks/store_writer.py --dims large-v3       # 34 sites x 1280, clips of 3-15 s
    .venv/bin/python benchmarks/store_writer.py --folder /scratch/x   # another disk
    .venv/bin/python benchmarks/store_writer.py --baseline /tmp/old   # also an older checkout's writer, interleaved
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

DIMS = {"base": (8, 512, 800, (25, 150)), "large-v3": (34, 1280, 48, (150, 750))}  # sites, width, utterances, frames per utterance


def make_states(sites: int, width: int, utterances: int, frames: tuple[int, int], seed: int = 0) -> list[dict[str, np.ndarray]]:
    """Distinct random float16 states per utterance and site (finite: one exponent bit always clear),
    so that neither writer reads its source from the CPU's cache."""
    rng = np.random.default_rng(seed)
    names = [f"encoder.layer.{index}" for index in range(sites)]
    states = []
    for _ in range(utterances):
        length = int(rng.integers(*frames))
        bits = rng.integers(0, 1 << 16, size=(sites, length, width), dtype=np.uint16) & 0xBFFF
        states.append({name: bits[index].view(np.float16) for index, name in enumerate(names)})
    return states


def write_with_part_writer(folder: Path, states: list[dict[str, np.ndarray]], store=None) -> float:
    """``store``: the module whose ``PartWriter`` writes (default: this checkout's ``extract.store``)."""
    if store is None:
        from extract import store
    dims = {site: array.shape[1] for site, array in states[0].items()}
    started = time.perf_counter()
    with store.PartWriter(folder / "part-00000.h5", dims, "float16", store.StoreAttributes()) as writer:
        for index, state in enumerate(states):
            writer.add(f"u{index}", state, {})
    return time.perf_counter() - started


def baseline_store(checkout: Path):
    """The part writer's module of another checkout (``extract/store/writer.py``; ``extract/store.py`` before the store
    was a package), loaded beside this one's (its imports resolve to this checkout's package)."""
    single = checkout / "extract" / "store.py"
    spec = importlib.util.spec_from_file_location("baseline_store", single if single.exists() else checkout / "extract" / "store" / "writer.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def write_raw(folder: Path, states: list[dict[str, np.ndarray]]) -> float:
    started = time.perf_counter()
    with open(folder / "raw.bin", "wb") as handle:
        for state in states:
            for array in state.values():
                handle.write(memoryview(array).cast("B"))
        handle.flush()
        os.fsync(handle.fileno())
    return time.perf_counter() - started


def measure(dims: str, folder: Path, repeats: int, baseline=None) -> dict:
    sites, width, utterances, frames = DIMS[dims]
    states = make_states(sites, width, utterances, frames)
    mib = sum(array.nbytes for state in states for array in state.values()) / 2**20
    writers = {"writer": write_with_part_writer, "raw": write_raw}
    if baseline is not None:
        writers["baseline"] = lambda run, states: write_with_part_writer(run, states, baseline)
    times: dict[str, list[float]] = {name: [] for name in writers}
    cpu: dict[str, list[float]] = {name: [] for name in writers}
    load_before = os.getloadavg()[0]
    for _ in range(repeats):
        for name, write in writers.items():
            run = Path(tempfile.mkdtemp(dir=folder))
            try:
                started = time.process_time()
                times[name].append(write(run, states))
                cpu[name].append(time.process_time() - started)
            finally:
                shutil.rmtree(run)
    writer, raw = statistics.median(times["writer"]), statistics.median(times["raw"])
    compared = {}
    if baseline is not None:
        older = statistics.median(times["baseline"])
        compared = {
            "baseline_mib_s": round(mib / older, 1),
            "baseline_ratio": round(raw / older, 3),
            "baseline_cpu_s": round(statistics.median(cpu["baseline"]), 2),
        }
    return compared | {
        "dims": dims,
        "sites": sites,
        "width": width,
        "utterances": utterances,
        "mib": round(mib, 1),
        "writer_mib_s": round(mib / writer, 1),
        "raw_mib_s": round(mib / raw, 1),
        "ratio": round(raw / writer, 3),
        "ratios": [round(r / w, 3) for w, r in zip(times["writer"], times["raw"])],
        "writer_cpu_s": round(statistics.median(cpu["writer"]), 2),
        "raw_cpu_s": round(statistics.median(cpu["raw"]), 2),
        "load": [round(load_before, 1), round(os.getloadavg()[0], 1)],
        "repeats": repeats,
        "folder": str(folder),
        "cores": len(os.sched_getaffinity(0)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dims", nargs="+", choices=sorted(DIMS), default=["base", "large-v3"])
    parser.add_argument("--folder", type=Path, default=Path(".cache") / "bench-writer", help="where both write (the same disk)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--baseline", type=Path, help="another checkout whose part writer (extract/store/writer.py) is measured too, in the same repeats")
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    baseline = baseline_store(args.baseline) if args.baseline else None
    rows = [measure(dims, args.folder, args.repeats, baseline) for dims in args.dims]
    print("| states | MiB | PartWriter MiB/s | raw write + fsync MiB/s | ratio (each repeat) | CPU s: PartWriter / raw | load before, after |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        shape = f"{row['dims']}: {row['utterances']} utt x {row['sites']} sites x {row['width']}"
        each = ", ".join(f"{ratio:.2f}" for ratio in row["ratios"])
        print(
            f"| {shape} | {row['mib']:.0f} | {row['writer_mib_s']:.0f} | {row['raw_mib_s']:.0f} | {row['ratio']:.2f} ({each}) "
            f"| {row['writer_cpu_s']:.2f} / {row['raw_cpu_s']:.2f} | {row['load'][0]:.1f}, {row['load'][1]:.1f} |"
        )
        if "baseline_ratio" in row:
            print(f"|   {args.baseline}'s writer | | {row['baseline_mib_s']:.0f} | | {row['baseline_ratio']:.2f} | {row['baseline_cpu_s']:.2f} | |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
