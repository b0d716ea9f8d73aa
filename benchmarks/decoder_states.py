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
import tempfile
import time
from pathlib import Path

from benchmarks.extraction import synthetic_voices
from benchmarks.plain_runs import add_plain_arguments, load_average, load_whisper, time_plain_runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_plain_arguments(parser, utterances=6, sites="all", sites_help="encoder sites of the plain extraction")
    args = parser.parse_args(argv)

    from extract.decoder_run import DecoderStatesJob, run_decoder_states
    from extract.manifest import read_manifest
    from extract.store import ShardReader

    print(f"load average before: {load_average()}")
    spec, generator = load_whisper(args)
    sites = generator.extractor.resolve_sites(args.sites if args.sites == "all" else args.sites.split(","))
    with tempfile.TemporaryDirectory(prefix="decoder-bench-") as folder:
        root = Path(folder)
        manifest = synthetic_voices(root / "voices", args.utterances)
        utterances = read_manifest(manifest)
        timings = time_plain_runs(generator, utterances, sites, root)
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
        "load_average_after": load_average(),
    }
    per = result["per_clip"]
    print("| run | seconds | per clip |")
    print("|---|---:|---:|")
    print(f"| extract ({clips} clips x {len(sites)} encoder sites) | {timings['extract']:.1f} | {per['extract']:.2f} s |")
    print(f"| transcribe ({clips} clips, greedy, at most {args.max_new_tokens} tokens) | {timings['transcribe']:.1f} | {per['transcribe']:.2f} s |")
    print(
        f"| decoder_states ({clips} clips x {decoder_sites} decoder sites, {tokens} tokens) | {timings['decoder_states']:.1f} | {per['decoder_states']:.2f} s |"
    )
    print(f"load average after: {result['load_average_after']}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
