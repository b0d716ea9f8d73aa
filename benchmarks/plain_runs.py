"""What the benchmarks of a stage built on extraction and generation share: their flags, the loaded
model, and the two plain runs they are measured against (encoder extraction and transcription of
the same synthetic clips, with the same loaded model). Used by ``patching.py`` and ``decoder_states.py``."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path


def add_plain_arguments(parser: argparse.ArgumentParser, utterances: int, sites: str, sites_help: str | None = None) -> None:
    """The flags every such benchmark takes (``sites``: the default encoder sites of the plain extraction)."""
    parser.add_argument("--utterances", type=int, default=utterances)
    parser.add_argument("--checkpoint", default="bundled-base", help="bundled-base or tiny-random")
    parser.add_argument("--sites", default=sites, help=sites_help)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")


def load_whisper(args: argparse.Namespace):
    """The Whisper ``--checkpoint`` on the CPU with ``--threads`` intra-op threads: its spec and generator."""
    import torch

    from extract.families.generation import GenerationOptions
    from extract.spec import ModelSpec, load_generator

    torch.set_num_threads(args.threads)
    spec = ModelSpec("whisper", args.checkpoint, device="cpu")
    return spec, load_generator(spec, GenerationOptions(max_new_tokens=args.max_new_tokens))


def time_plain_runs(generator, utterances: list, sites: list[str], root: Path) -> dict[str, float]:
    """Seconds of ``extract`` (``sites`` into a float16 store under ``root``) and ``transcribe`` (greedy) of ``utterances``."""
    from extract.runner import run_extraction, run_transcription

    timings = {}
    started = time.perf_counter()
    run_extraction(generator.extractor, utterances, sites, root / "store", config={}, show_progress=False)
    timings["extract"] = time.perf_counter() - started
    started = time.perf_counter()
    run_transcription(generator, utterances, root / "hyps.jsonl", "asr", None, "bench", 240.0, 30.0, show_progress=False)
    timings["transcribe"] = time.perf_counter() - started
    return timings


def load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())
