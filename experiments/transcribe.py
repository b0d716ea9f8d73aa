"""``python -m experiments.transcribe``: transcripts (ASR) or translations (ST) for a manifest.

Examples (GPU)::

    python -m experiments.transcribe --family whisper --checkpoint openai/whisper-large-v3 --task asr \\
        --manifest cv-it-test.jsonl --out hyps/whisper-large-v3.cv-it.jsonl --device cuda --dtype float16
    python -m experiments.transcribe --family seamless --task st --tgt-lang es \\
        --manifest mustshe-en-es.jsonl --out hyps/seamless.mustshe-en-es.jsonl --device cuda

One JSON row per utterance: id, reference (the transcript for ASR, the reference translation for
ST), hypothesis, gender, speaker, language, model, task, tgt_lang, and for ST the source transcript
(COMET needs it), and ``audio_notes`` where loading changed or noticed something (trimmed, shorter
than its header, float samples outside [-1, 1]; see ``extract.audio``), counted in the summary.
Audio is trimmed to 30 s (ASR) or 60 s (ST), as in both studies. Rows are
appended batch by batch; a rerun skips ids already in the output, so a killed run resumes. The
decoding settings, the model (a local checkpoint by the fingerprint of its files, whatever the path's
spelling) and the code version go to ``OUT.settings.json``; a rerun with other settings is refused
once ``OUT`` holds a row (a run refused before its first batch blocks nothing). ``--intervene FILE`` edits the encoder with a fitted eraser or steering vector
(``python -m experiments.erase``) while it runs; the files are recorded in the settings too.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from experiments.cli import CommandParser, add_model_arguments, add_reclaim_stale_argument, input_argument, load_or_exit, model_spec, output_argument, run_cli
from experiments.scheduling import SchedulingError, add_executor_arguments, check_executor_arguments, run_tasks, transcription_tasks
from extract.claims import ClaimError
from extract.manifest import ManifestError, read_manifest
from extract.provenance import label_argument, settings_path

if TYPE_CHECKING:  # the model modules load torch: imported where a model runs, so that --help stays fast
    from extract.families.generation import GenerationOptions
    from extract.jobs import TranscriptionJob


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(parser)
    input_argument(parser, "--manifest", required=True)
    parser.add_argument("--task", required=True, choices=["asr", "st"])
    parser.add_argument("--tgt-lang", help="target language for --task st (ISO 639-1, or the model's own code)")
    output_argument(parser, "--out", required=True, help="hypotheses JSONL (appended to; existing ids are skipped)", sidecars=lambda out: [settings_path(out)])
    parser.add_argument("--batch-seconds", type=float, default=240.0, help="total input seconds per batch")
    parser.add_argument("--max-seconds", type=float, help="trim audio to this length (default 30 for asr, 60 for st)")
    parser.add_argument("--num-beams", type=int, help="override the model's generation config")
    parser.add_argument("--max-new-tokens", type=int, help="override the model's generation config")
    input_argument(
        parser, "--decoder", help="ZeroSwot: the NLLB decoder checkpoint (default: the NLLB model named by the checkpoint's config, nllb_model_name_or_path)"
    )
    parser.add_argument(
        "--whisper-translate-by-forcing",
        action="store_true",
        help="Whisper, ST into a language other than English: transcribe with the target language forced (not a trained direction)",
    )
    parser.add_argument(
        "--label",
        "--name",
        dest="label",
        type=label_argument,
        help="the model label written in each row as model (default: from the family and checkpoint, e.g. whisper-base); --name is its older spelling",
    )
    parser.add_argument("--limit", type=int, help="only the first N utterances of the manifest")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    input_argument(
        parser,
        "--intervene",
        action="extend",
        nargs="+",
        default=[],
        metavar="FILE",
        help="an eraser or steering vector (python -m experiments.erase fit) edited into the encoder at its site while it runs; "
        "repeatable, applied in the order given; recorded in OUT.settings.json (default: none)",
    )
    parser.add_argument(
        "--intervene-gender", choices=["female", "male"], help="apply the --intervene files only to utterances of this gender (default: every utterance)"
    )
    add_reclaim_stale_argument(parser)
    add_executor_arguments(parser, "this whole hypotheses file")
    return parser


def transcription_job(args, spec, options: GenerationOptions) -> TranscriptionJob:
    """The run the flags describe (its ``settings`` are what a resumed run must match)."""
    from extract.jobs import TranscriptionJob

    return TranscriptionJob(
        spec=spec,
        manifest=Path(args.manifest),
        out=Path(args.out),
        task=args.task,
        tgt_lang=args.tgt_lang,
        name=args.label,
        options=options,
        batch_seconds=args.batch_seconds,
        max_seconds=args.max_seconds,
        limit=args.limit,
        interventions=tuple(Path(path) for path in args.intervene),
        intervene_gender=args.intervene_gender,
    )


def submit_transcription(args, job: TranscriptionJob, ids: list[str]) -> int:
    """``--executor``: the transcription as one submitit task, unless ``--out`` already holds every id."""
    try:
        check_executor_arguments(args)
        tasks, finished = transcription_tasks(job, ids, args.reclaim_stale)
        return run_tasks(args, "transcribe", tasks, finished, "rerun the same command: ids already in --out are skipped")
    except (SchedulingError, ManifestError, ClaimError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    from extract.families.generation import GenerationError, GenerationOptions  # after parsing: it loads torch, which --help never needs
    from extract.interventions import Intervener, InterventionError
    from extract.runner import SettingsMismatchError, hypotheses_log

    if args.task == "st" and not args.tgt_lang:
        print("error: --task st needs --tgt-lang", file=sys.stderr)
        return 2
    if args.intervene_gender and not args.intervene:
        print("error: --intervene-gender needs at least one --intervene FILE", file=sys.stderr)
        return 2
    try:
        intervener = Intervener(args.intervene, args.intervene_gender) if args.intervene else None
    except InterventionError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    spec = model_spec(args)
    try:
        utterances = read_manifest(args.manifest)[: args.limit]
    except (ManifestError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    out = Path(args.out)
    if out.is_dir():
        print(f"error: --out {out} is a folder; give the path of the hypotheses JSONL file", file=sys.stderr)
        return 2
    out.parent.mkdir(parents=True, exist_ok=True)
    checkpoint = load_or_exit(spec.resolved_checkpoint, spec)
    options = GenerationOptions(args.num_beams, args.max_new_tokens, args.decoder, args.whisper_translate_by_forcing)
    job = transcription_job(args, spec, options)
    if args.executor:
        return submit_transcription(args, job, [u.id for u in utterances])
    try:
        with hypotheses_log(out, args.reclaim_stale) as hypotheses:  # claimed before the model loads; a cut last line is redone, another kind of file refused
            return _transcribe(args, job, intervener, utterances, hypotheses, checkpoint)
    except (ManifestError, SettingsMismatchError, ClaimError, GenerationError, InterventionError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def _transcribe(args, job: TranscriptionJob, intervener, utterances, hypotheses, checkpoint: str) -> int:
    """Loads the model, checks (or writes) the settings and appends the rows ``hypotheses`` (claimed by the caller) lacks."""
    from extract.runner import audio_notes_summary, check_settings, run_transcription
    from extract.spec import load_generator

    spec, out, max_seconds, model_name = job.spec, hypotheses.path, job.trim_seconds, job.model_name()
    generator = load_or_exit(lambda: load_generator(spec, job.options), spec)
    generator.check(args.task, args.tgt_lang)
    if intervener is not None:
        intervener.check(generator.extractor)
    records = intervener.records() if intervener else None
    check_settings(job.settings_path, job.settings(checkpoint, generator.settings(), records, fingerprint=generator.extractor.fingerprint), out)
    todo = [u for u in utterances if u.id not in hypotheses.ids]
    print(
        f"[transcribe] {args.task} with {args.family} {model_name} on {spec.device}: {len(todo)} of {len(utterances)} utterances to do "
        f"({len(utterances) - len(todo)} already in {out}); audio trimmed to {max_seconds:g} s"
    )
    started = time.time()
    written, skipped, notes = run_transcription(
        generator, todo, hypotheses, args.task, args.tgt_lang, model_name, args.batch_seconds, max_seconds, not args.quiet, intervener
    )
    elapsed = time.time() - started
    print(
        f"[transcribe] wrote {written} rows in {elapsed:.1f} s; {len(skipped)} skipped for bad audio (a rerun retries them); "
        f"audio notes: {audio_notes_summary(notes)} (in the rows' audio_notes)"
    )
    for item in skipped:
        print(f"  skipped {item['id']}: {item['message']}", file=sys.stderr)
    print(f"[transcribe] hypotheses: {out}; settings: {settings_path(out).name}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """The command; an error of the file system (a full disk while writing, a missing or unreadable
    file) ends with one line and exit status 2 (:func:`experiments.cli.run_cli`)."""
    return run_cli(lambda: _main(argv))


if __name__ == "__main__":
    sys.exit(main())
