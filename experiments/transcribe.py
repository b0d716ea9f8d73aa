"""``python -m experiments.transcribe``: transcripts (ASR) or translations (ST) for a manifest.

Examples (GPU)::

    python -m experiments.transcribe --model whisper --checkpoint openai/whisper-large-v3 --task asr \\
        --manifest cv-it-test.jsonl --out hyps/whisper-large-v3.cv-it.jsonl --device cuda --dtype float16
    python -m experiments.transcribe --model seamless --task st --tgt-lang es \\
        --manifest mustshe-en-es.jsonl --out hyps/seamless.mustshe-en-es.jsonl --device cuda

One JSON row per utterance: id, reference (the transcript for ASR, the reference translation for
ST), hypothesis, gender, speaker, language, model, task, tgt_lang, and for ST the source transcript
(COMET needs it), and ``audio_notes`` where loading changed or noticed something (trimmed, shorter
than its header, float samples outside [-1, 1]; see ``extract.audio``), counted in the summary.
Audio is trimmed to 30 s (ASR) or 60 s (ST), as in both studies. Rows are
appended batch by batch; a rerun skips ids already in the output, so a killed run resumes. The
decoding settings, the model and the code version go to ``OUT.settings.json``; a rerun with other
settings is refused.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

from experiments.extract import add_model_arguments, audio_notes_summary, load_extractor, resolve_checkpoint
from experiments.generation import ZEROSWOT_DECODER, GenerationError, load_generator
from extract.audio import AudioError, load_audio
from extract.manifest import ManifestError, Utterance, read_manifest
from extract.provenance import provenance
from extract.runner import batches_by_seconds

MAX_SECONDS = {"asr": 30.0, "st": 60.0}
CHUNK = 256  # utterances whose audio is held in memory at once


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(parser)
    parser.add_argument("--manifest", required=True)
    parser.add_argument("--task", required=True, choices=["asr", "st"])
    parser.add_argument("--tgt-lang", help="target language for --task st (ISO 639-1, or the model's own code)")
    parser.add_argument("--out", required=True, help="hypotheses JSONL (appended to; existing ids are skipped)")
    parser.add_argument("--batch-seconds", type=float, default=240.0, help="total input seconds per batch")
    parser.add_argument("--max-seconds", type=float, help="trim audio to this length (default 30 for asr, 60 for st)")
    parser.add_argument("--num-beams", type=int, help="override the model's generation config")
    parser.add_argument("--max-new-tokens", type=int, help="override the model's generation config")
    parser.add_argument("--decoder", help=f"ZeroSwot: the NLLB decoder checkpoint (default {ZEROSWOT_DECODER})")
    parser.add_argument("--whisper-translate-by-forcing", action="store_true",
                        help="Whisper, ST into a language other than English: transcribe with the target language forced (not a trained direction)")
    parser.add_argument("--name", help="the model label written in each row (default: the checkpoint)")
    parser.add_argument("--limit", type=int, help="only the first N utterances of the manifest")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def finished_ids(path: Path) -> set[str]:
    """Ids already in the output. A last line cut short by a kill is removed (it is redone)."""
    if not path.exists():
        return set()
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        print(f"[transcribe] {path}: removing an incomplete last line left by an interrupted run", file=sys.stderr)
        path.write_bytes(data[:cut])
        data = data[:cut]
    done = set()
    for number, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if line.strip():
            try:
                done.add(json.loads(line)["id"])
            except (json.JSONDecodeError, KeyError, TypeError) as error:
                raise ManifestError(path, number, f"not a hypothesis row ({error}); use a new --out file") from error
    return done


def check_settings(path: Path, settings: dict) -> None:
    """Write the settings file, or refuse to mix outputs of different settings in one file."""
    if path.exists():
        stored = json.loads(path.read_text())
        comparable = {key: value for key, value in settings.items() if key != "provenance"}
        if {key: value for key, value in stored.items() if key != "provenance"} != comparable:
            raise SystemExit(f"error: {path} records other settings than this run; use a new --out file\n  stored:  {stored}\n  current: {settings}")
        return
    path.write_text(json.dumps(settings, indent=2, ensure_ascii=False) + "\n")


def row_for(utterance: Utterance, hypothesis: str, task: str, tgt_lang: str | None, model: str, audio_notes: dict | None = None) -> dict:
    row = {
        "id": utterance.id, "reference": utterance.text if task == "asr" else utterance.translation, "hypothesis": hypothesis,
        "gender": utterance.gender, "speaker": utterance.speaker, "language": utterance.language, "model": model, "task": task,
        "tgt_lang": tgt_lang if task == "st" else utterance.language,
    }
    if task == "st":
        row["source"] = utterance.text
    if audio_notes:
        row["audio_notes"] = audio_notes
    return row


def transcribe(generator, utterances: list[Utterance], out: Path, task: str, tgt_lang: str | None, model: str,
               batch_seconds: float, max_seconds: float, show_progress: bool = True) -> tuple[int, list[dict], dict[str, dict]]:
    """Append rows for ``utterances`` to ``out``; returns (rows written, skipped records, audio notes by id)."""
    from tqdm.auto import tqdm

    written, skipped, notes = 0, [], {}
    extractor = generator.extractor
    with out.open("a", encoding="utf-8") as handle, tqdm(total=len(utterances), desc=f"{task} with {extractor.family}", unit="utt", disable=not show_progress) as bar:
        for start in range(0, len(utterances), CHUNK):
            audio, by_language = {}, defaultdict(list)
            for utterance in utterances[start : start + CHUNK]:
                try:
                    loaded = load_audio(utterance.audio, utterance.offset, utterance.duration, max_seconds=max_seconds)
                    audio[utterance.id] = loaded.samples
                    if loaded.notes:
                        notes[utterance.id] = loaded.notes
                    by_language[utterance.language].append(utterance)
                except AudioError as error:
                    skipped.append({"id": utterance.id, "audio": utterance.audio, "error": type(error).__name__, "message": str(error)})
                    bar.update()
            for language, group in sorted(by_language.items()):
                seconds = [len(audio[u.id]) / 16_000 for u in group]
                for batch in batches_by_seconds([extractor.input_seconds(s) for s in seconds], batch_seconds, sort_by=seconds):
                    chosen = [group[i] for i in batch]
                    hypotheses = generator.generate([audio[u.id] for u in chosen], language, task, tgt_lang)
                    for utterance, hypothesis in zip(chosen, hypotheses):
                        handle.write(json.dumps(row_for(utterance, hypothesis, task, tgt_lang, model, notes.get(utterance.id)), ensure_ascii=False) + "\n")
                    handle.flush()
                    written += len(chosen)
                    bar.update(len(chosen))
    return written, skipped, notes


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.task == "st" and not args.tgt_lang:
        print("error: --task st needs --tgt-lang", file=sys.stderr)
        return 2
    try:
        utterances = read_manifest(args.manifest)[: args.limit]
    except (ManifestError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    max_seconds = args.max_seconds or MAX_SECONDS[args.task]
    checkpoint = resolve_checkpoint(args.model, args.checkpoint)
    model_name = args.name or args.checkpoint or checkpoint
    generator = load_generator(load_extractor(args), args.num_beams, args.max_new_tokens, args.decoder, args.whisper_translate_by_forcing)
    try:
        generator.check(args.task, args.tgt_lang)
    except GenerationError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    settings = {
        "model": model_name, "family": args.model, "checkpoint": checkpoint, "revision": args.revision, "task": args.task,
        "tgt_lang": args.tgt_lang, "dtype": args.dtype, "max_seconds": max_seconds, "decoding": generator.settings(),
        "decoder": args.decoder if args.model == "zeroswot" else None, "manifest": str(args.manifest), "provenance": provenance(),
    }
    check_settings(out.with_name(out.name + ".settings.json"), settings)
    try:
        done = finished_ids(out)
    except ManifestError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    todo = [u for u in utterances if u.id not in done]
    print(f"[transcribe] {args.task} with {args.model} {model_name} on {args.device}: {len(todo)} of {len(utterances)} utterances to do "
          f"({len(utterances) - len(todo)} already in {out}); audio trimmed to {max_seconds:g} s")
    started = time.time()
    try:
        written, skipped, notes = transcribe(generator, todo, out, args.task, args.tgt_lang, model_name, args.batch_seconds, max_seconds, not args.quiet)
    except GenerationError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    elapsed = time.time() - started
    print(f"[transcribe] wrote {written} rows in {elapsed:.1f} s; {len(skipped)} skipped for bad audio (a rerun retries them); "
          f"audio notes: {audio_notes_summary(notes)} (in the rows' audio_notes)")
    for item in skipped:
        print(f"  skipped {item['id']}: {item['message']}", file=sys.stderr)
    print(f"[transcribe] hypotheses: {out}; settings: {out.name}.settings.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
