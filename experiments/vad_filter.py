"""``python -m experiments.vad_filter``: drop records with (almost) no speech, by silero-vad.

    python -m experiments.vad_filter --manifest cv-it.jsonl --out cv-it.speech.jsonl [--min-speech-seconds 0.3]

Silent or near-silent clips produce hallucinated transcripts whose error rates are not about the
speaker. The filter keeps records with at least ``--min-speech-seconds`` of detected speech, writes
the kept manifest and lists every dropped record (and every unreadable one) with its reason in
``OUT.dropped.jsonl``; it prints the counts per language and gender. The silero-vad model ships
inside its PyPI package, so this runs offline.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Callable

import numpy as np

from extract.audio import AudioError, load_audio
from extract.manifest import ManifestError, Utterance, read_manifest, write_manifest

SpeechDetector = Callable[[np.ndarray], float]  # 16 kHz waveform -> seconds of speech


def silero_detector(threshold: float = 0.5) -> SpeechDetector:
    import torch
    from silero_vad import get_speech_timestamps, load_silero_vad

    model = load_silero_vad()

    def speech_seconds(samples: np.ndarray) -> float:
        spans = get_speech_timestamps(torch.from_numpy(samples), model, sampling_rate=16_000, threshold=threshold)
        return sum(span["end"] - span["start"] for span in spans) / 16_000

    return speech_seconds


def filter_speech(utterances: list[Utterance], detector: SpeechDetector, min_speech_seconds: float,
                  max_seconds: float | None = 30.0, show_progress: bool = True) -> tuple[list[Utterance], list[dict]]:
    """(kept records, dropped records with the reason and the speech found)."""
    from tqdm.auto import tqdm

    kept, dropped = [], []
    for utterance in tqdm(utterances, desc="voice activity", unit="utt", disable=not show_progress):
        record = {"id": utterance.id, "audio": utterance.audio, "language": utterance.language, "gender": utterance.gender}
        try:
            samples = load_audio(utterance.audio, utterance.offset, utterance.duration, max_seconds=max_seconds).samples
        except AudioError as error:
            dropped.append(record | {"reason": type(error).__name__, "message": str(error)})
            continue
        speech = detector(samples)
        if speech < min_speech_seconds:
            dropped.append(record | {"reason": "too little speech", "speech_seconds": round(speech, 3)})
        else:
            kept.append(utterance)
    return kept, dropped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--manifest", required=True)
    parser.add_argument("--out", required=True, help="kept records (manifest JSONL); dropped ones go to OUT.dropped.jsonl")
    parser.add_argument("--min-speech-seconds", type=float, default=0.3)
    parser.add_argument("--threshold", type=float, default=0.5, help="silero-vad speech probability threshold")
    parser.add_argument("--max-seconds", type=float, default=30.0, help="only look at the first seconds a model would see")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    try:
        utterances = read_manifest(args.manifest)
    except (ManifestError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"[vad_filter] {len(utterances)} records; keeping those with >= {args.min_speech_seconds:g} s of speech (silero-vad, threshold {args.threshold:g})")
    kept, dropped = filter_speech(utterances, silero_detector(args.threshold), args.min_speech_seconds, args.max_seconds, not args.quiet)
    out = write_manifest(args.out, kept)
    dropped_path = Path(args.out).with_name(Path(args.out).name + ".dropped.jsonl")
    dropped_path.write_text("".join(json.dumps(item, ensure_ascii=False) + "\n" for item in dropped))
    by_group = Counter((item["language"], item["gender"], item["reason"]) for item in dropped)
    print(f"[vad_filter] kept {len(kept)}, dropped {len(dropped)}")
    for (language, gender, reason), count in sorted(by_group.items()):
        print(f"  dropped {count} ({language}, {gender}): {reason}")
    print(f"[vad_filter] kept: {out}; dropped: {dropped_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
