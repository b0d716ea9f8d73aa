"""What verifying a part's data on read costs a probe: ``extract.store.ShardReader`` compares a site's
xxh3_128 digest the first time a process reads that site of a part (issue 42), against the probe's
own time on the same part.

One run writes one part of about 1.6 GiB (one site, Whisper large-v3's width, float16, clips of
about 26 s), then times, in alternating repeats: the verification alone (``site_damage`` on the open
part: the site's bytes read with ``pread`` and hashed), a mean probe (``probing.run.run_probe``:
the speech-frame means read from the store, then the logistic probe) with verification as it is
and with it switched off (the digest check replaced by a no-op), and xxh3_128 over as many bytes
already in memory (the hash's own speed). The part stays in the page cache between repeats (it fits
in memory), so the times are of reading from memory, not from a disk; the table gives medians of
wall time and of the process's CPU seconds, and the load average before and after (a shared machine
gives the process a varying share of its cores). Usage::

    .venv/bin/python benchmarks/verify_on_read.py                     # 1.6 GiB part, 3 repeats
    .venv/bin/python benchmarks/verify_on_read.py --utterances 64     # a smaller part (a quick look)
    .venv/bin/python benchmarks/verify_on_read.py --folder /scratch/x --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

SITE = "encoder.final"


def write_part(folder: Path, utterances: int, width: int, frames: tuple[int, int], seed: int = 0) -> Path:
    """One part of random finite float16 states, 16 speakers (8 per gender) split 10/3/3 into train/dev/test."""
    from extract.store import PartWriter, StoreAttributes

    rng = np.random.default_rng(seed)
    path = folder / "part-00000.h5"
    with PartWriter(path, {SITE: width}, "float16", StoreAttributes(config={})) as writer:
        for index in range(utterances):
            speaker = index % 16
            gender = "female" if speaker % 2 else "male"
            bits = rng.integers(0, 1 << 16, size=(int(rng.integers(*frames)), width), dtype=np.uint16) & 0xBFFF  # an exponent bit clear: finite
            states = bits.view(np.float16)
            states[:, 0] = 1.0 if gender == "female" else -1.0  # something for the probe to find
            split = "train" if speaker < 10 else "dev" if speaker < 13 else "test"
            writer.add(f"u{index}", {SITE: states}, {"gender": gender, "speaker": f"s{speaker}", "language": "en", "split": split, "dataset": "bench"})
    return path


@contextmanager
def unverified():
    """The digest comparison on read switched off (what reading cost before issue 42)."""
    from extract.store import reader as store

    original = store.site_damage
    store.site_damage = lambda handle, site=None: None
    try:
        yield
    finally:
        store.site_damage = original


def timed(work) -> tuple[float, float]:
    """Wall seconds and process CPU seconds of ``work()``."""
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    return time.perf_counter() - wall, time.process_time() - cpu


def verify(path: Path) -> None:
    """What a reader's first read of the site checks (the part holds this one site, and its index is read too)."""
    from extract.store import part_content_damage

    problem = part_content_damage(path)
    if problem is not None:
        raise SystemExit(f"{path}: {problem}")


def probe(folder: Path) -> None:
    from probing.run import ProbeConfig, run_probe

    run_probe(ProbeConfig(store=str(folder), site=SITE, probe="mean", device="cpu"))


def hash_in_memory(nbytes: int) -> float:
    """Seconds xxh3_128 takes over ``nbytes`` already in memory (the hash's own speed)."""
    import xxhash

    data = np.random.default_rng(0).integers(0, 1 << 16, size=nbytes // 2, dtype=np.uint16)
    started = time.perf_counter()
    xxhash.xxh3_128(memoryview(data).cast("B")).hexdigest()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--utterances", type=int, default=512)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--frames", type=int, nargs=2, default=(1200, 1400), metavar=("LEAST", "MOST"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--folder", type=Path, default=None, help="where the part is written (default: a temporary folder, deleted after)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(dir=args.folder))
    try:
        load_before = os.getloadavg()
        written, _ = timed(lambda: write_part(root, args.utterances, args.width, tuple(args.frames)))
        path = root / "part-00000.h5"
        size = path.stat().st_size
        times: dict[str, list[tuple[float, float]]] = {"verify": [], "probe (verified)": [], "probe (unverified)": []}
        verify(path)  # the page cache warmed once, for every condition alike
        with unverified():
            probe(root)  # the imports (torch, the solver) paid once, outside the timings
        for _ in range(args.repeats):
            times["verify"].append(timed(lambda: verify(path)))
            times["probe (verified)"].append(timed(lambda: probe(root)))
            with unverified():
                times["probe (unverified)"].append(timed(lambda: probe(root)))
        in_memory = statistics.median(hash_in_memory(size) for _ in range(args.repeats))
        load_after = os.getloadavg()
    finally:
        shutil.rmtree(root)
    gib = size / 2**30
    figures = {
        "part_gib": round(gib, 3),
        "write_s": round(written, 1),
        "load_average_before_after": [round(load_before[0], 2), round(load_after[0], 2)],
        "xxh3_in_memory_gib_s": round(gib / in_memory, 1),
    }
    print(f"part: {gib:.2f} GiB ({args.utterances} utterances, one site of {args.width}, float16), written in {written:.1f} s")
    print(f"load average (1 min) before {load_before[0]:.2f}, after {load_after[0]:.2f}; {args.repeats} repeats, medians")
    print(f"{'':<22}{'wall s':>8}{'CPU s':>8}{'GiB/s':>8}")
    for name, runs in times.items():
        wall, cpu = statistics.median(run[0] for run in runs), statistics.median(run[1] for run in runs)
        figures[name] = {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3)}
        print(f"{name:<22}{wall:>8.2f}{cpu:>8.2f}{gib / wall:>8.1f}")
    overhead = figures["probe (verified)"]["wall_s"] - figures["probe (unverified)"]["wall_s"]
    figures["verify_share_of_probe"] = round(figures["verify"]["wall_s"] / figures["probe (unverified)"]["wall_s"], 4)
    print(f"xxh3_128 over the bytes in memory: {gib / in_memory:.1f} GiB/s")
    print(
        f"verification: {figures['verify']['wall_s']:.2f} s, {100 * figures['verify_share_of_probe']:.1f} % of the unverified probe's "
        f"{figures['probe (unverified)']['wall_s']:.2f} s (verified minus unverified probe: {overhead:+.2f} s)"
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
