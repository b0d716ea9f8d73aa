"""``python -m experiments.vad_filter``: drop records with (almost) no speech, by silero-vad.

    python -m experiments.vad_filter --manifest cv-it.jsonl --out cv-it.speech.jsonl [--min-speech-seconds 0.3]

Keeps records with at least ``--min-speech-seconds`` of detected speech
(``experiments.scoring.vad``), writes the kept manifest and lists every dropped record (and every
unreadable one) with its reason in ``OUT.dropped.jsonl``; it prints the counts per language and
gender.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from experiments.cli import CommandParser, add_device_argument, add_out_argument, add_quiet_argument, command_main, fail, input_argument
from experiments.options import add_options, from_args
from experiments.scoring.vad import VadSettings, filter_speech, silero_detector
from extract.manifest import read_manifest, write_manifest


def dropped_path(out: Path) -> Path:
    """``OUT.dropped.jsonl``: the dropped and unreadable records with their reasons."""
    return out.with_name(out.name + ".dropped.jsonl")


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    input_argument(parser, "--manifest", required=True)
    add_out_argument(parser, "kept records (manifest JSONL); dropped ones go to OUT.dropped.jsonl", sidecars=lambda out: [dropped_path(out)])
    add_options(parser, VadSettings)
    add_device_argument(parser, default="cpu", help="where silero-vad runs: cpu (default; the model is made for it), cuda, cuda:N, mps or auto")
    add_quiet_argument(parser)
    return parser


def _run(args: argparse.Namespace) -> int:
    settings = from_args(VadSettings, args)
    utterances = read_manifest(args.manifest)
    print(
        f"[vad_filter] {len(utterances)} records; keeping those with >= {settings.min_speech_seconds:g} s of speech "
        f"(silero-vad, threshold {settings.threshold:g})"
    )
    kept, dropped = filter_speech(
        utterances, silero_detector(settings.threshold, args.device), settings.min_speech_seconds, settings.max_seconds, not args.quiet
    )
    reasons = dropped_path(args.out)
    reasons.write_text("".join(json.dumps(item, ensure_ascii=False) + "\n" for item in dropped))
    if not kept:  # an empty manifest would only fail later, in whichever stage reads it
        return fail(f"no record of {args.manifest} has {settings.min_speech_seconds:g} s of speech; no manifest written; reasons in {reasons}")
    out = write_manifest(args.out, kept)
    by_group = Counter((item["language"], item["gender"], item["reason"]) for item in dropped)
    print(f"[vad_filter] kept {len(kept)}, dropped {len(dropped)}")
    for (language, gender, reason), count in sorted(by_group.items()):
        print(f"  dropped {count} ({language}, {gender}): {reason}")
    print(f"[vad_filter] kept: {out}; dropped: {reasons}")
    return 0


main = command_main(build_parser, _run, module=__name__)
