"""Transcription throughput by batch size on a CPU: utterances per second and the WER of each batch size.

A bundled Whisper transcribes the same utterances of a manifest (by default the demo corpus's,
``python -m experiments.demo`` builds it) with batches of 1, 2, 4, ... utterances, through the
study's own loop (``extract.runner.transcription_batches``: batches per language, sorted by
length; Whisper pads every clip to 30 s, so a batch of N utterances is ``batch_seconds = 30 N``).
The batch sizes are measured interleaved, round after round, so that a machine whose load drifts
moves every size alike; each row reports the best round. Each row also gives the corpus WER
(English WER, Spanish WER, whatever the manifest holds; ``experiments.scoring.asr_metrics``, the
study's scoring) and how many hypotheses differ from those of the first batch size: padding changes
a batch's numbers, and in bfloat16 that can change a hypothesis.

The model loads once (excluded from the times). Usage::

    PYTHONPATH=$PWD .venv/bin/python benchmarks/transcription.py                          # demo corpus, 1 2 4 8 16
    PYTHONPATH=$PWD .venv/bin/python benchmarks/transcription.py --limit 32 --rounds 2    # a subset
    PYTHONPATH=$PWD .venv/bin/python benchmarks/transcription.py --max-new-tokens 64 --json out.json

The demo corpus is synthetic (Kokoro-82M and espeak-ng voices): its WER says the batch sizes agree,
nothing about people.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

WHISPER_WINDOW = 30.0  # seconds every Whisper clip is padded to


def default_manifest() -> Path:
    from experiments.recipes.democorpus.build import default_root

    return default_root(0) / "manifest.jsonl"


def chosen_utterances(manifest: Path, limit: int | None) -> list:
    """The first ``limit`` utterances of each language (all with None), in manifest order."""
    from extract.manifest import read_manifest

    kept, per_language = [], defaultdict(int)
    for utterance in read_manifest(manifest):
        if limit is None or per_language[utterance.language] < limit:
            kept.append(utterance)
            per_language[utterance.language] += 1
    return kept


def transcribe_once(generator, utterances: list, batch_size: int) -> tuple[float, float, dict[str, str]]:
    """Wall and CPU seconds (this process) to transcribe ``utterances`` in batches of ``batch_size``,
    and the hypotheses by id. On a shared machine the CPU time moves less than the wall time."""
    from extract.runner import AudioLog, transcription_batches

    log = AudioLog()
    started, cpu = time.perf_counter(), time.process_time()
    batches = transcription_batches(generator, utterances, "asr", None, batch_seconds=WHISPER_WINDOW * batch_size, max_seconds=WHISPER_WINDOW, log=log)
    hypotheses = {utterance.id: hypothesis for pairs in batches for utterance, hypothesis in pairs}
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    if log.skipped:
        raise SystemExit(f"error: {len(log.skipped)} utterances have unreadable audio, e.g. {log.skipped[0]['audio']}: fix the manifest")
    return seconds, cpu, hypotheses


def error_rates(utterances: list, hypotheses: dict[str, str]) -> dict[str, float]:
    """Corpus error rate per language, in percent (the study's normalizer and metric)."""
    from experiments.scoring.asr_metrics import corpus_error_rate, error_counts

    counts = defaultdict(list)
    for utterance in utterances:
        counts[utterance.language].append(error_counts(utterance.text, hypotheses[utterance.id], utterance.language))
    return {language: round(corpus_error_rate(rows), 2) for language, rows in sorted(counts.items())}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--manifest", type=Path, help="utterances to transcribe (default: the demo corpus, seed 0, in the cache)")
    parser.add_argument("--limit", type=int, help="the first N utterances of each language (default: all)")
    parser.add_argument("--checkpoint", default="bundled-base", help="a bundled Whisper (default bundled-base)")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 2, 4, 8, 16], help="utterances per batch (default 1 2 4 8 16)")
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds; each row reports its fastest (default 1)")
    parser.add_argument("--max-new-tokens", type=int, default=128, help="decoding bound (default 128, the demo's before it was derived)")
    parser.add_argument("--dtype", help="compute dtype (default: the demo's, bfloat16 on a CPU with AVX512-BF16, else float32)")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2, the demo's)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    for name in ("limit", "rounds", "max_new_tokens", "threads"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    if min(args.batch_sizes) < 1:
        parser.error(f"--batch-sizes must be at least 1, got {min(args.batch_sizes)}")
    args.manifest = args.manifest or default_manifest()
    if not args.manifest.is_file():
        parser.error(f"no manifest at {args.manifest}: build the demo corpus first (python -m experiments.demo) or give --manifest")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    from experiments.demo import compute_dtype
    from extract.families.generation import GenerationOptions
    from extract.spec import ModelSpec, load_generator

    torch.set_num_threads(args.threads)
    dtype = args.dtype or compute_dtype()
    utterances = chosen_utterances(args.manifest, args.limit)
    generator = load_generator(ModelSpec("whisper", args.checkpoint, dtype=dtype), GenerationOptions(num_beams=1, max_new_tokens=args.max_new_tokens))
    print(f"{len(utterances)} utterances of {args.manifest}; whisper {args.checkpoint} in {dtype} on {args.threads} threads; load average {os.getloadavg()}")
    sizes = list(dict.fromkeys(args.batch_sizes))
    best, best_cpu, hypotheses = {}, {}, {}
    for round_index in range(args.rounds):
        for size in sizes:
            seconds, cpu, found = transcribe_once(generator, utterances, size)
            print(f"round {round_index + 1} batch {size}: {seconds:.1f} s wall, {cpu:.1f} s CPU, load average {os.getloadavg()[0]:.1f}", flush=True)
            best[size] = min(seconds, best.get(size, float("inf")))
            best_cpu[size] = min(cpu, best_cpu.get(size, float("inf")))
            if hypotheses.setdefault(size, found) != found:
                print(f"  note: batch {size} gave other hypotheses in round {round_index + 1} than in round 1")
    first = sizes[0]
    rows = []
    for size in sizes:
        differing = sorted(key for key in hypotheses[first] if hypotheses[size][key] != hypotheses[first][key])
        rows.append(
            {
                "batch_size": size,
                "utterances": len(utterances),
                "seconds": round(best[size], 3),
                "cpu_seconds": round(best_cpu[size], 3),
                "utterances_per_second": round(len(utterances) / best[size], 3),
                "error_rate": error_rates(utterances, hypotheses[size]),
                f"hypotheses_differing_from_batch_{first}": differing,
            }
        )
    print(f"| batch | utt/s | seconds | CPU seconds | error rate % by language | hypotheses differing from batch {first} |")
    print("|---:|---:|---:|---:|---|---|")
    for row in rows:
        rates = ", ".join(f"{language} {rate}" for language, rate in row["error_rate"].items())
        differing = row[f"hypotheses_differing_from_batch_{first}"]
        shown = f"{len(differing)} {' '.join(differing[:4])}".strip()
        print(f"| {row['batch_size']} | {row['utterances_per_second']} | {row['seconds']} | {row['cpu_seconds']} | {rates} | {shown} |")
    print(f"load average after: {os.getloadavg()}")
    if args.json:
        settings = {"manifest": str(args.manifest), "checkpoint": args.checkpoint, "dtype": dtype, "threads": args.threads}
        settings |= {"max_new_tokens": args.max_new_tokens, "load_average": os.getloadavg()}
        args.json.write_text(json.dumps({"settings": settings, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
