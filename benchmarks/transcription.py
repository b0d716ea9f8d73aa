"""Transcription throughput by engine and batch size on a CPU: utterances per second, CPU seconds and WER.

A bundled Whisper transcribes the same utterances of a manifest (by default the demo corpus's,
``python -m experiments.demo`` builds it) with batches of 1, 2, 4, ... utterances, through the
study's own loop (``extract.runner.transcription_batches``: batches per language, sorted by
length; Whisper pads every clip to 30 s, so a batch of N utterances is ``batch_seconds = 30 N``),
on each engine of ``--engines`` (``transformers``, ``ctranslate2``: ``transcribe --engine``), loaded
side by side in this one process. The engines and batch sizes are measured interleaved, round after
round, so that a machine whose load drifts moves every row alike; each row reports the median and the
best round. Each row also gives the corpus WER (English WER, Spanish WER, whatever the manifest holds;
``experiments.scoring.asr_metrics``, the study's scoring), how many hypotheses differ from those of
the first batch size of its engine (padding changes a batch's numbers, and in bfloat16 that can
change a hypothesis) and, for the engines after the first, from the first engine's at the same batch
size, with the WER of one engine's hypotheses against the other's.

The models load once and transcribe one utterance each before the rounds (excluded from the times). Usage::

    PYTHONPATH=$PWD .venv/bin/python benchmarks/transcription.py                          # demo corpus, 1 2 4 8 16
    PYTHONPATH=$PWD .venv/bin/python benchmarks/transcription.py --limit 32 --rounds 2    # a subset
    PYTHONPATH=$PWD .venv/bin/python benchmarks/transcription.py --max-new-tokens 64 --json out.json
    PYTHONPATH=$PWD .venv/bin/python benchmarks/transcription.py --engines transformers ctranslate2 --batch-sizes 8 --rounds 3
    # an AVX2-only CPU, emulated on a newer one (say so wherever its numbers appear):
    CT2_FORCE_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 \
        PYTHONPATH=$PWD .venv/bin/python benchmarks/transcription.py --engines transformers ctranslate2 --dtype float32

The demo corpus is synthetic (Kokoro-82M and espeak-ng voices): its WER says the batch sizes and
engines agree, nothing about people; the real-voice corpus (``python -m experiments.recipes.realvoices``)
is the other manifest to give.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
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
    """Corpus error rate per language, in percent (the study's normalizer and metric); a reference
    that normalizes to nothing (a clip of digits or punctuation) is left out, as the scorers leave it."""
    return _rates(utterances, {u.id: u.text for u in utterances}, hypotheses)


def engine_agreement(utterances: list, first: dict[str, str], other: dict[str, str]) -> dict[str, float]:
    """Per language, the error rate in percent of ``other``'s hypotheses against ``first``'s (how far two engines are apart)."""
    return _rates(utterances, first, other)


def _rates(utterances: list, references: dict[str, str], hypotheses: dict[str, str]) -> dict[str, float]:
    from experiments.scoring.asr_metrics import Scoring, corpus_error_rate, error_counts, normalize

    counts = defaultdict(list)
    for utterance in utterances:
        reference = references[utterance.id]
        if normalize(reference, utterance.language, Scoring().normalizer):
            counts[utterance.language].append(error_counts(reference, hypotheses[utterance.id], utterance.language))
    return {language: round(corpus_error_rate(rows), 2) for language, rows in sorted(counts.items())}


def load_generators(engines: list[str], checkpoint: str, dtype: str, max_new_tokens: int, compute_type: str | None) -> dict:
    """One generator per engine, greedy, with the same bound on new tokens."""
    from extract.families.generation import GenerationOptions
    from extract.spec import ModelSpec, load_generator

    generators = {}
    for engine in engines:
        options = GenerationOptions(num_beams=1, max_new_tokens=max_new_tokens, engine=engine, compute_type=compute_type if engine == "ctranslate2" else None)
        generators[engine] = load_generator(ModelSpec("whisper", checkpoint, dtype=dtype, device="cpu"), options)
    return generators


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
    parser.add_argument(
        "--engines", nargs="+", default=["transformers"], choices=("transformers", "ctranslate2"), help="engines measured side by side (default transformers)"
    )
    parser.add_argument("--compute-type", help="the ctranslate2 engine's quantisation (default: int8 on a CPU)")
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

    torch.set_num_threads(args.threads)
    dtype = args.dtype or compute_dtype()
    utterances = chosen_utterances(args.manifest, args.limit)
    engines = list(dict.fromkeys(args.engines))
    generators = load_generators(engines, args.checkpoint, dtype, args.max_new_tokens, args.compute_type)
    compute = {engine: getattr(generator, "compute_type", dtype) for engine, generator in generators.items()}
    print(
        f"{len(utterances)} utterances of {args.manifest}; whisper {args.checkpoint} on {args.threads} threads, "
        + ", ".join(f"{engine} in {compute[engine]}" for engine in engines)
        + f"; load average {os.getloadavg()}"
    )
    for generator in generators.values():  # start-up excluded: each engine's first call (kernel choice, allocations) is not timed
        transcribe_once(generator, utterances[:1], 1)
    sizes = list(dict.fromkeys(args.batch_sizes))
    runs = [(engine, size) for size in sizes for engine in engines]
    seconds, cpu_seconds, hypotheses = defaultdict(list), defaultdict(list), {}
    for round_index in range(args.rounds):
        for engine, size in runs:
            wall, cpu, found = transcribe_once(generators[engine], utterances, size)
            name = f"{engine} batch {size}" if len(engines) > 1 else f"batch {size}"
            print(f"round {round_index + 1} {name}: {wall:.1f} s wall, {cpu:.1f} s CPU, load average {os.getloadavg()[0]:.1f}", flush=True)
            seconds[engine, size].append(wall)
            cpu_seconds[engine, size].append(cpu)
            if hypotheses.setdefault((engine, size), found) != found:
                print(f"  note: {name} gave other hypotheses in round {round_index + 1} than in round 1")
    first, first_engine = sizes[0], engines[0]
    rows = []
    for engine, size in runs:
        found = hypotheses[engine, size]
        median = statistics.median(seconds[engine, size])
        row = {
            "engine": engine,
            "compute_type": compute[engine],
            "batch_size": size,
            "utterances": len(utterances),
            "seconds": round(min(seconds[engine, size]), 3),
            "seconds_median": round(median, 3),
            "cpu_seconds": round(min(cpu_seconds[engine, size]), 3),
            "cpu_seconds_median": round(statistics.median(cpu_seconds[engine, size]), 3),
            "utterances_per_second": round(len(utterances) / min(seconds[engine, size]), 3),
            "utterances_per_second_median": round(len(utterances) / median, 3),
            "error_rate": error_rates(utterances, found),
            f"hypotheses_differing_from_batch_{first}": sorted(key for key in found if found[key] != hypotheses[engine, first][key]),
        }
        if engine != first_engine:
            theirs = hypotheses[first_engine, size]
            row[f"hypotheses_differing_from_{first_engine}"] = sorted(key for key in found if found[key] != theirs[key])
            row["differing_hypotheses"] = {key: [theirs[key], found[key]] for key in row[f"hypotheses_differing_from_{first_engine}"]}
            row[f"wer_against_{first_engine}"] = engine_agreement(utterances, theirs, found)
            row[f"speedup_over_{first_engine}"] = round(statistics.median(seconds[first_engine, size]) / median, 3)
        rows.append(row)
    print_table(rows, engines, first)
    print(f"load average after: {os.getloadavg()}")
    if args.json:
        settings = {"manifest": str(args.manifest), "checkpoint": args.checkpoint, "dtype": dtype, "threads": args.threads, "engines": engines}
        settings |= {"compute_types": compute, "max_new_tokens": args.max_new_tokens, "rounds": args.rounds, "load_average": os.getloadavg()}
        settings |= {"cpu_isa": {name: os.environ.get(name) for name in ISA_VARIABLES if os.environ.get(name)}}
        args.json.write_text(json.dumps({"settings": settings, "rows": rows}, indent=2) + "\n")
    return 0


ISA_VARIABLES = ("CT2_FORCE_CPU_ISA", "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")  # an emulated older CPU


def print_table(rows: list[dict], engines: list[str], first: int) -> None:
    """The rows as a Markdown table (one engine: the table this script printed before engines existed)."""
    if len(engines) == 1:
        print(f"| batch | utt/s | seconds | CPU seconds | error rate % by language | hypotheses differing from batch {first} |")
        print("|---:|---:|---:|---:|---|---|")
    else:
        columns = "engine | batch | utt/s (median) | seconds (median) | CPU seconds (median) | error rate % by language"
        print(f"| {columns} | differing from {engines[0]} | WER against {engines[0]} % |")
        print("|---|---:|---:|---:|---:|---|---|---|")
    for row in rows:
        rates = ", ".join(f"{language} {rate}" for language, rate in row["error_rate"].items())
        if len(engines) == 1:
            differing = row[f"hypotheses_differing_from_batch_{first}"]
            shown = f"{len(differing)} {' '.join(differing[:4])}".strip()
            print(f"| {row['batch_size']} | {row['utterances_per_second']} | {row['seconds']} | {row['cpu_seconds']} | {rates} | {shown} |")
            continue
        differing = row.get(f"hypotheses_differing_from_{engines[0]}")
        shown = "" if differing is None else f"{len(differing)} {' '.join(differing[:3])}".strip()
        agreement = ", ".join(f"{language} {rate}" for language, rate in row.get(f"wer_against_{engines[0]}", {}).items())
        print(
            f"| {row['engine']} {row['compute_type']} | {row['batch_size']} | {row['utterances_per_second_median']} | {row['seconds_median']} | "
            f"{row['cpu_seconds_median']} | {rates} | {shown} | {agreement} |"
        )


if __name__ == "__main__":
    sys.exit(main())
