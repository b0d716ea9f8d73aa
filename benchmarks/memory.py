"""Peak memory (RSS) of per-position probes as N grows: the bounded path (positions in chunks that
fit ``--memory-gb``) against the whole-array path (every position in one chunk, read from the store at
once: what :func:`probing.features.in_memory_bytes` counts).

For each N a synthetic store is written (float16, ``--positions`` frames per utterance at D =
``--dim``, 10 utterances per speaker, a gender signal on one dimension), probed by ``run_probe`` in a
fresh process that reports its own peak RSS (``ru_maxrss``), and deleted. The probes run with
``--max-iter`` L-BFGS iterations (default 2): memory does not depend on the number of iterations,
and full fits of 1000 positions at N = 8000 and D = 1280 take far longer than a memory measurement
needs. The bounded path also needs scratch disk under ``$TMPDIR``: N x P x D x 2 bytes, like the store. Usage::

    .venv/bin/python benchmarks/memory.py --utterances 2000 4000 8000 --memory-gb 2 --folder /tmp/membench
    .venv/bin/python benchmarks/memory.py --utterances 100 200 400 --path whole --folder /tmp/membench
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

SITE = "encoder.layer.0"
UTTERANCES_PER_SPEAKER = 10
UTTERANCES_PER_PART = 250
POOL = 16  # distinct noise utterances, reused with a per-utterance label signal: writing, not drawing random numbers, is the cost


def write_store(folder: Path, utterances: int, positions: int, dim: int, seed: int = 0) -> Path:
    from extract.store import PartWriter

    rng = np.random.default_rng(seed)
    pool = rng.standard_normal((POOL, positions, dim), dtype=np.float32).astype(np.float16)
    folder.mkdir(parents=True, exist_ok=True)
    speakers = utterances // UTTERANCES_PER_SPEAKER
    for part_start in range(0, utterances, UTTERANCES_PER_PART):
        attributes = {"model_id": "synthetic", "config": "{}", "skipped": "[]"}
        with PartWriter(folder / f"part-{part_start // UTTERANCES_PER_PART:05d}.h5", {SITE: dim}, "float16", attributes) as writer:
            for index in range(part_start, min(part_start + UTTERANCES_PER_PART, utterances)):
                speaker = index // UTTERANCES_PER_SPEAKER
                gender = "female" if speaker % 2 else "male"
                states = pool[index % POOL].copy()
                states[:, 0] += np.float16(0.5 if gender == "female" else -0.5)
                split = "train" if speaker % 10 < 6 else "dev" if speaker % 10 < 8 else "test"
                writer.add(f"u{index}", {SITE: states}, {"gender": gender, "speaker": f"s{speaker}", "language": "en", "split": split, "dataset": "synthetic"})
    assert speakers >= 10, "need at least 100 utterances for speaker-disjoint splits"
    return folder


def measure(store: str, positions: int, memory_gb: float, max_iter: int) -> dict:
    """Runs the probe in this process; returns its peak RSS and time."""
    from probing.run import ProbeConfig, run_probe

    started = time.perf_counter()
    result = run_probe(ProbeConfig(store=store, site=SITE, probe="positional", positions=positions, memory_gb=memory_gb, max_iter=max_iter))
    return {
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9,
        "seconds": time.perf_counter() - started,
        "train_utterances": result.row["splits"]["train"]["utterances"],
        "test_utterances": result.row["splits"]["test"]["utterances"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--utterances", type=int, nargs="+", default=[2000, 4000, 8000])
    parser.add_argument("--positions", type=int, default=1000)
    parser.add_argument("--dim", type=int, default=1280)
    parser.add_argument("--memory-gb", type=float, default=2.0, help="the bounded path's budget")
    parser.add_argument("--path", choices=["bounded", "whole"], default="bounded", help="whole: every position in one chunk")
    parser.add_argument("--max-iter", type=int, default=2)
    parser.add_argument("--folder", type=Path, default=Path("/tmp/probe-memory-benchmark"))
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # child mode: a store to probe
    args = parser.parse_args()
    budget = args.memory_gb if args.path == "bounded" else 1e6
    if args.measure:
        print(json.dumps(measure(args.measure, args.positions, budget, args.max_iter)))
        return
    from probing.features import in_memory_bytes

    for n in args.utterances:
        store = args.folder / f"n{n}"
        started = time.perf_counter()
        write_store(store, n, args.positions, args.dim)
        written = time.perf_counter() - started
        command = [sys.executable, __file__, "--measure", str(store), "--positions", str(args.positions), "--path", args.path]
        command += ["--memory-gb", str(args.memory_gb), "--max-iter", str(args.max_iter)]
        child = subprocess.run(command, capture_output=True, text=True, check=True)
        row = json.loads(child.stdout.strip().splitlines()[-1])
        store_gb = sum(p.stat().st_size for p in store.glob("*.h5")) / 1e9
        shutil.rmtree(store)
        split_n = row["train_utterances"] + row["test_utterances"]
        row |= {
            "utterances": n,
            "probed_utterances": split_n,
            "positions": args.positions,
            "dim": args.dim,
            "path": args.path,
            "memory_gb": args.memory_gb if args.path == "bounded" else None,
            "store_gb": store_gb,
            "store_write_s": written,
            "whole_array_need_gb": in_memory_bytes(split_n, args.positions, args.dim) / 1e9,
        }
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
