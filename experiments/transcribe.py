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
import time
from pathlib import Path
from typing import TYPE_CHECKING

from experiments.cli import (
    CommandParser,
    add_model_stage_arguments,
    add_quiet_argument,
    add_reclaim_stale_argument,
    command_main,
    fail,
    load_or_exit,
    model_spec,
)
from experiments.options import add_options, from_args
from experiments.scheduling import add_executor_arguments, executor_options, run_tasks, transcription_tasks
from extract.manifest import read_manifest
from extract.provenance import settings_path
from extract.stage_options import TranscribeOptions

if TYPE_CHECKING:  # the model modules load torch: imported where a model runs, so that --help stays fast
    from extract.jobs import TranscriptionJob


def build_parser() -> argparse.ArgumentParser:
    """The model flags, the manifest and the hypotheses file, then the options of :class:`TranscribeOptions`."""
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_stage_arguments(parser, "hypotheses JSONL (appended to; existing ids are skipped)", sidecars=lambda out: [settings_path(out)])
    add_options(parser, TranscribeOptions)
    add_quiet_argument(parser)
    add_reclaim_stale_argument(parser)
    add_executor_arguments(parser, "this whole hypotheses file")
    return parser


def submit_transcription(args, job: TranscriptionJob, ids: list[str]) -> int:
    """``--executor``: the transcription as one submitit task, unless ``--out`` already holds every id."""
    executor = executor_options(args, args.device)
    tasks, finished = transcription_tasks(job, ids, args.reclaim_stale)
    return run_tasks(executor, "transcribe", tasks, finished, "rerun the same command: ids already in --out are skipped")


def _run(args: argparse.Namespace) -> int:
    options = from_args(TranscribeOptions, args)  # a refused option is one line before anything heavy loads
    out = Path(args.out)
    if out.is_dir():
        return fail(f"--out {out} is a folder; give the path of the hypotheses JSONL file")
    from extract.jobs import TranscriptionJob, transcribe  # after parsing: it loads torch, which --help never needs
    from extract.runner import audio_notes_summary, print_skipped
    from extract.spec import load_generator

    spec = model_spec(args)
    job = TranscriptionJob.of(options, spec, Path(args.manifest), out)
    job.intervener()  # the files are checked before anything is claimed
    utterances = read_manifest(job.manifest)[: job.limit]
    load_or_exit(spec.resolved_checkpoint, spec)
    if args.executor:
        return submit_transcription(args, job, [u.id for u in utterances])

    def announce(todo: int, total: int) -> None:
        print(
            f"[transcribe] {job.task} with {spec.family} {job.model_name()} on {spec.device}: {todo} of {total} utterances to do "
            f"({total - todo} already in {out}); audio trimmed to {job.trim_seconds:g} s"
        )

    started = time.time()
    report = transcribe(
        job,
        show_progress=not args.quiet,
        reclaim_stale=args.reclaim_stale,
        load=lambda spec, decoding: load_or_exit(lambda: load_generator(spec, decoding), spec),
        announce=announce,
    )
    elapsed = time.time() - started
    print(
        f"[transcribe] wrote {report.written} rows in {elapsed:.1f} s; {len(report.skipped)} skipped for bad audio (a rerun retries them); "
        f"audio notes: {audio_notes_summary(report.audio_notes)} (in the rows' audio_notes)"
    )
    print_skipped(report.skipped)
    print(f"[transcribe] hypotheses: {out}; settings: {settings_path(out).name}")
    return 0


main = command_main(build_parser, _run, module=__name__)
