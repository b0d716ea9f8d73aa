"""The cost of activation patching (``speech-gender patch``) against plain extraction and plain
transcription of the same clips, in one process with one loaded model (load time excluded).

Synthetic voices (``benchmarks/extraction.py``'s: harmonics, F0 by gender, 3-15 s, two clips per
speaker, speakers alternating gender), the bundled Whisper base (or ``--checkpoint tiny-random``):

- ``extract``: ``extract.runner.run_extraction`` of ``--sites`` into a float16 store;
- ``transcribe``: ``extract.runner.run_transcription`` of the clips (greedy, ``--max-new-tokens``);
- ``patch``: ``experiments.patching.run.run_patching`` of every cross and within pair at ``--sites``
  (one plain transcription per target, one source capture per pair, one patched generation per
  pair and site), per row (pair x site) and in all.

Usage::

    PYTHONPATH=$PWD .venv/bin/python benchmarks/patching.py --utterances 8 --threads 2
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from benchmarks.extraction import synthetic_voices
from benchmarks.plain_runs import add_plain_arguments, load_whisper, time_plain_runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_plain_arguments(parser, utterances=8, sites="encoder.layer.0,encoder.layer.3,encoder.final")
    args = parser.parse_args(argv)

    from experiments.patching.run import PatchJob, PatchOptions, run_patching
    from extract.manifest import read_manifest

    spec, generator = load_whisper(args)
    sites = generator.extractor.resolve_sites(args.sites.split(","))  # an unknown site named, with the valid ones
    with tempfile.TemporaryDirectory(prefix="patch-bench-") as folder:
        root = Path(folder)
        manifest = synthetic_voices(root / "voices", args.utterances)
        utterances = read_manifest(manifest)
        timings = time_plain_runs(generator, utterances, sites, root)
        job = PatchJob(spec, manifest, root / "patch" / "rows.jsonl", PatchOptions(sites=args.sites, max_new_tokens=args.max_new_tokens, iterations=200))
        started = time.perf_counter()
        report = run_patching(job, show_progress=False, generator=generator)
        timings["patch"] = time.perf_counter() - started
    clips, rows = len(utterances), report.written
    result = {
        "checkpoint": args.checkpoint,
        "clips": clips,
        "sites": sites,
        "pairs": report.pairs,
        "rows": rows,
        "threads": args.threads,
        "max_new_tokens": args.max_new_tokens,
        "seconds": timings,
        "extract_per_clip": timings["extract"] / clips,
        "transcribe_per_clip": timings["transcribe"] / clips,
        "patch_per_row": timings["patch"] / rows,
    }
    print("| run | seconds | per unit |")
    print("|---|---:|---|")
    print(f"| extract ({clips} clips x {len(sites)} sites) | {timings['extract']:.1f} | {result['extract_per_clip']:.2f} s per clip |")
    print(f"| transcribe ({clips} clips) | {timings['transcribe']:.1f} | {result['transcribe_per_clip']:.2f} s per clip |")
    print(f"| patch ({report.pairs} pairs x {len(sites)} sites = {rows} rows) | {timings['patch']:.1f} | {result['patch_per_row']:.2f} s per pair x site |")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
