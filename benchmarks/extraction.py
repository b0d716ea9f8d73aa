"""Extraction throughput and peak memory: experiments.extract against the published approach.

Both run the bundled Whisper base on the demo corpus, every site, on the CPU:

- ours: ``extract.runner.run_extraction`` (batches by total input seconds, inference mode, valid
  frames only, float16 shards written as it goes), in float32 and in bfloat16 compute (fast on
  CPUs with AMX or AVX512-BF16, and the usual GPU setting);
- published approach: batch size 1, ``output_hidden_states=True``, no inference mode, every state
  (all 1500 frames of every layer) kept in memory until the end.

Each measurement runs in a fresh subprocess so peak RSS is its own. Usage::

    .venv/bin/python benchmarks/extraction.py --utterances 24 48
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_ours(count: int, batch_seconds: float, dtype: str) -> dict:
    import torch

    from experiments.recipes.democorpus.build import build_demo_corpus
    from extract.families import FAMILIES
    from extract.manifest import read_manifest
    from extract.runner import run_extraction
    from extract.weights import bundled_whisper

    utterances = read_manifest(build_demo_corpus(show_progress=False).manifest)[:count]
    extractor = FAMILIES["whisper"].extractor.load(str(bundled_whisper("base")), dtype=getattr(torch, dtype))
    sites = extractor.resolve_sites("all")
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        run_extraction(extractor, utterances, sites, folder, config={}, batch_seconds=batch_seconds, show_progress=False)
        elapsed = time.perf_counter() - started
        size = sum(p.stat().st_size for p in Path(folder).glob("*.h5"))
    return {"utterances": count, "seconds": elapsed, "utt_per_s": count / elapsed, "peak_rss_mib": _peak_rss_mib(), "store_mib": size / 2**20}


def run_published(count: int) -> dict:
    from transformers import WhisperFeatureExtractor, WhisperForConditionalGeneration

    from experiments.recipes.democorpus.build import build_demo_corpus
    from extract.audio import load_audio
    from extract.manifest import read_manifest
    from extract.weights import bundled_whisper

    utterances = read_manifest(build_demo_corpus(show_progress=False).manifest)[:count]
    folder = bundled_whisper("base")
    model = WhisperForConditionalGeneration.from_pretrained(folder).eval()
    processor = WhisperFeatureExtractor.from_pretrained(folder)
    kept = []
    started = time.perf_counter()
    for utterance in utterances:
        audio = load_audio(utterance.audio, max_seconds=30.0).samples
        features = processor(audio, sampling_rate=16_000, return_tensors="pt").input_features
        output = model.model.encoder(features, output_hidden_states=True)
        kept.append([state.detach().numpy().copy() for state in output.hidden_states])
    elapsed = time.perf_counter() - started
    return {
        "utterances": count,
        "seconds": elapsed,
        "utt_per_s": count / elapsed,
        "peak_rss_mib": _peak_rss_mib(),
        "kept_mib": sum(a.nbytes for item in kept for a in item) / 2**20,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--utterances", type=int, nargs="+", default=[24, 48])
    parser.add_argument("--batch-seconds", type=float, default=120.0)
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"], help="compute dtypes to run ours with")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        if args.worker == "published":
            result = run_published(args.utterances[0])
        else:
            result = run_ours(args.utterances[0], args.batch_seconds, args.worker.removeprefix("ours-"))
        print(json.dumps(result))
        return
    rows = []
    for count in args.utterances:
        for worker in ("published", *(f"ours-{dtype}" for dtype in args.dtypes)):
            command = [sys.executable, __file__, "--worker", worker, "--utterances", str(count), "--batch-seconds", str(args.batch_seconds)]
            output = subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
            rows.append({"approach": worker, **json.loads(output)})
            print(json.dumps(rows[-1]), flush=True)
    print("\n| approach | utterances | utt/s | peak RSS MiB |\n|---|---|---|---|")
    for row in rows:
        print(f"| {row['approach']} | {row['utterances']} | {row['utt_per_s']:.2f} | {row['peak_rss_mib']:.0f} |")
    baseline = {row["utterances"]: row["utt_per_s"] for row in rows if row["approach"] == "published"}
    for row in rows:
        if row["approach"] != "published":
            print(f"{row['approach']} at {row['utterances']} utterances: {row['utt_per_s'] / baseline[row['utterances']]:.2f}x the published approach")


if __name__ == "__main__":
    main()
