"""The cost of decoder-state extraction (``speech-gender decoder_states``) against plain encoder
extraction and plain transcription of the same clips, in one process with one loaded model (load
time excluded), the load average printed before and after.

Synthetic voices (``benchmarks/extraction.py``'s: harmonics, F0 by gender, 3-15 s), the bundled
Whisper base (or ``--checkpoint tiny-random``), greedy decoding of at most ``--max-new-tokens``:

- ``extract``: ``extract.runner.run_extraction`` of ``--sites`` (encoder) into a float16 store;
- ``transcribe``: ``extract.runner.run_transcription`` of the clips;
- ``decoder_states``: ``extract.decoder_run.run_decoder_states`` of every decoder site into a
  float16 store (a generation as ``transcribe``'s, then one teacher-forced pass), per clip and per
  stored token.

Usage::

    PYTHONPATH=$PWD .venv/bin/python benchmarks/decoder_states.py --utterances 6 --threads 2
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from benchmarks.extraction import synthetic_voices


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--utterances", type=int, default=6)
    parser.add_argument("--checkpoint", default="bundled-base", help="bundled-base or tiny-random")
    parser.add_argument("--sites", default="all", help="encoder sites of the plain extraction")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args(argv)

    import torch

    from extract.decoder_run import DecoderStatesJob, run_decoder_states
    from extract.families.generation import GenerationOptions
    from extract.manifest import read_manifest
    from extract.runner import run_extraction, run_transcription
    from extract.spec import ModelSpec, load_generator
    from extract.store import ShardReader

    torch.set_num_threads(args.threads)
    print(f"load average before: {' '.join(f'{value:.2f}' for value in os.getloadavg())}")
    spec = ModelSpec("whisper", args.checkpoint, device="cpu")
    generator = load_generator(spec, GenerationOptions(max_new_tokens=args.max_new_tokens))
    sites = generator.extractor.resolve_sites(args.sites if args.sites == "all" else args.sites.split(","))
    with tempfile.TemporaryDirectory(prefix="decoder-bench-") as folder:
        root = Path(folder)
        manifest = synthetic_voices(root / "voices", args.utterances)
        utterances = read_manifest(manifest)
        timings = {}
        started = time.perf_counter()
        run_extraction(generator.extractor, utterances, sites, root / "store", config={}, show_progress=False)
        timings["extract"] = time.perf_counter() - started
        started = time.perf_counter()
        run_transcription(generator, utterances, root / "hyps.jsonl", "asr", None, "bench", 240.0, 30.0, show_progress=False)
        timings["transcribe"] = time.perf_counter() - started
        job = DecoderStatesJob(spec=spec, manifest=manifest, out=root / "decoder", task="asr", max_new_tokens=args.max_new_tokens)
        started = time.perf_counter()
        run_decoder_states(job, show_progress=False, generator=generator)
        timings["decoder_states"] = time.perf_counter() - started
        reader = ShardReader(root / "decoder")
        tokens = sum(len(reader.tokens(utterance)) for utterance in reader.ids)
        decoder_sites = len(reader.sites)
    clips = len(utterances)
    result = {
        "checkpoint": args.checkpoint,
        "clips": clips,
        "encoder_sites": len(sites),
        "decoder_sites": decoder_sites,
        "tokens": tokens,
        "threads": args.threads,
        "max_new_tokens": args.max_new_tokens,
        "seconds": timings,
        "per_clip": {name: seconds / clips for name, seconds in timings.items()},
        "load_average_after": os.getloadavg(),
    }
    per = result["per_clip"]
    print("| run | seconds | per clip |")
    print("|---|---:|---:|")
    print(f"| extract ({clips} clips x {len(sites)} encoder sites) | {timings['extract']:.1f} | {per['extract']:.2f} s |")
    print(f"| transcribe ({clips} clips, greedy, at most {args.max_new_tokens} tokens) | {timings['transcribe']:.1f} | {per['transcribe']:.2f} s |")
    print(
        f"| decoder_states ({clips} clips x {decoder_sites} decoder sites, {tokens} tokens) | {timings['decoder_states']:.1f} | {per['decoder_states']:.2f} s |"
    )
    print(f"load average after: {' '.join(f'{value:.2f}' for value in result['load_average_after'])}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
