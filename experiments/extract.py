"""``python -m experiments.extract``: hidden states of a speech model into HDF5 shards.

Example (GPU)::

    python -m experiments.extract --family whisper --checkpoint openai/whisper-large-v3 \\
        --manifest cv-it-test.jsonl --sites all --out stores/whisper-large-v3/cv-it --device cuda --dtype float16
"""

from __future__ import annotations

import argparse
import dataclasses
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from experiments.cli import CommandParser, add_model_arguments, fail, input_argument, load_or_exit, model_spec, output_argument, run_cli
from experiments.scheduling import SchedulingError, add_executor_arguments, check_executor_arguments, extraction_tasks, run_tasks
from extract.manifest import ManifestError, read_manifest
from extract.provenance import label_argument
from extract.store import StoreError

if TYPE_CHECKING:  # the model modules load torch: imported where a model runs, so that --help stays fast
    from extract.jobs import ExtractionJob
    from extract.spec import ModelSpec


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(parser)
    input_argument(parser, "--manifest", required=True)
    parser.add_argument(
        "--sites", default="all", help="comma-separated site names, 'all', or every:K (every K-th site and the last; see docs/scale.md) (default: all)"
    )
    output_argument(parser, "--out", required=True, help="store folder")
    parser.add_argument(
        "--label",
        type=label_argument,
        help="the model's name in every output built from this store (probe rows, collected tables); "
        "default: from the family and checkpoint, e.g. whisper-base, whisper-base-random with --random-init",
    )
    parser.add_argument("--storage-dtype", default="float16", choices=["float16", "float32"])
    parser.add_argument("--batch-seconds", type=float, default=120.0, help="total seconds of model input per batch on a CPU (default: 120)")
    parser.add_argument(
        "--batch-size",
        type=int,
        help="utterances per batch, instead of --batch-seconds (default on a GPU: as many as half its free memory holds, at most 16; "
        "Whisper pads every clip to 30 s, so there a batch costs its count)",
    )
    parser.add_argument("--max-seconds", type=float, default=30.0, help="trim audio to this length (30 for ASR, 60 for ST)")
    parser.add_argument("--limit", type=int, help="only the first N utterances of the manifest")
    parser.add_argument("--num-shards", type=int, default=1)
    parser.add_argument("--shard-index", type=int, default=0)
    parser.add_argument("--utterances-per-part", type=int, default=256, help="utterances per part file (the unit of resume)")
    parser.add_argument("--keep-padding", action="store_true", help="Whisper: store all 1500 frames of the padded 30 s input")
    parser.add_argument("--positions", type=int, help="store only the first N frames of each utterance (enough for per-position probes up to --positions N)")
    parser.add_argument(
        "--pool", choices=["mean"], help="store one vector per utterance and site, the mean over its speech frames (enough for --probe mean, LOSO included)"
    )
    parser.add_argument("--random-init", action="store_true", help="same architecture, random weights (the random-model baseline)")
    parser.add_argument("--seed", type=int, default=0, help="seed for --random-init")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    input_argument(
        parser,
        "--intervene",
        action="extend",
        nargs="+",
        default=[],
        metavar="FILE",
        help="an eraser or steering vector (python -m experiments.erase fit) edited into the model at its site while it runs; "
        "repeatable, applied in the order given; recorded in the store's config (default: none)",
    )
    parser.add_argument(
        "--intervene-gender", choices=["female", "male"], help="apply the --intervene files only to utterances of this gender (default: every utterance)"
    )
    parser.add_argument(
        "--reclaim-stale",
        action="store_true",
        help="take over part claims left on this host by a process that is gone (a job killed with SIGKILL), with a note",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="compute the store anew: an existing --out is first moved to OUT_PARENT/.superseded/STAMP/ (nothing is deleted; one shard per run is refused)",
    )
    add_executor_arguments(parser, "one shard of --num-shards, every shard submitted (--shard-index is not used)")
    return parser


def overwrite(args) -> None:
    """``--overwrite``: an existing, non-empty ``--out`` set aside (:func:`extract.supersede.set_aside`) before
    anything is written. Refused for one shard of several (the other shards' runs would lose their parts)."""
    from extract.supersede import SupersedeError, set_aside

    out = Path(args.out)
    if not (out.is_dir() and any(out.iterdir())):
        return
    if args.num_shards > 1 and not args.executor:
        raise SystemExit(fail(f"--overwrite with --num-shards {args.num_shards}: set {out} aside once (e.g. move it), then run the shards without --overwrite"))
    try:
        aside = set_aside([out], out.absolute().parent)
    except SupersedeError as error:
        raise SystemExit(fail(str(error))) from None
    print(f"[extract] --overwrite: the earlier store set aside -> {aside / out.name}")


def submit_shards(args, job: ExtractionJob, utterances: int) -> int:
    """``--executor``: one submitit task per unfinished shard (a SLURM job array), waited for and reported."""
    sites = "all" if args.sites == "all" else tuple(args.sites.split(","))
    rerun_hint = "rerun the same command: complete shards are skipped, unfinished ones resume from their complete parts"
    try:
        check_executor_arguments(args)
        tasks, finished = extraction_tasks(dataclasses.replace(job, sites=sites), utterances, args.reclaim_stale)
        return run_tasks(args, "extract", tasks, finished, rerun_hint)
    except SchedulingError as error:
        return fail(str(error))


def check_arguments(args) -> None:
    """Everything that can be checked before the model loads."""
    manifest, out = Path(args.manifest), Path(args.out)
    if manifest.is_dir():
        raise SystemExit(fail(f"--manifest {manifest} is a folder; give the manifest file (JSONL)"))
    if out.exists() and not out.is_dir():
        raise SystemExit(fail(f"--out {out} is a file; give a folder for the store (it is created if missing)"))
    if args.num_shards < 1:
        raise SystemExit(fail(f"--num-shards {args.num_shards}: must be at least 1"))
    if not 0 <= args.shard_index < args.num_shards:
        raise SystemExit(fail(f"--shard-index {args.shard_index} is outside 0..{args.num_shards - 1} for --num-shards {args.num_shards}"))
    if args.utterances_per_part < 1:
        raise SystemExit(fail(f"--utterances-per-part {args.utterances_per_part}: must be at least 1"))
    if args.batch_seconds <= 0 or args.max_seconds <= 0:
        raise SystemExit(fail("--batch-seconds and --max-seconds must be positive"))
    if args.batch_size is not None and args.batch_size < 1:
        raise SystemExit(fail(f"--batch-size {args.batch_size}: must be at least 1"))
    if args.positions is not None and args.positions < 1:
        raise SystemExit(fail(f"--positions {args.positions}: must be at least 1 frame"))
    if args.positions is not None and args.pool:
        raise SystemExit(fail("--positions and --pool: give one (a pooled store keeps one vector per utterance, not positions)"))
    if args.intervene_gender and not args.intervene:
        raise SystemExit(fail("--intervene-gender needs at least one --intervene FILE"))


def extraction_job(args, spec: ModelSpec) -> ExtractionJob:
    """The run the flags describe (its ``store_config`` is what a resumed run must match)."""
    from extract.jobs import ExtractionJob

    return ExtractionJob(
        spec,
        args.manifest,
        Path(args.out),
        storage_dtype=args.storage_dtype,
        batch_seconds=args.batch_seconds,
        batch_size=args.batch_size,
        max_seconds=args.max_seconds,
        keep_padding=args.keep_padding,
        positions=args.positions,
        pool=args.pool,
        limit=args.limit,
        num_shards=args.num_shards,
        shard_index=args.shard_index,
        utterances_per_part=args.utterances_per_part,
        interventions=tuple(Path(path) for path in args.intervene),
        intervene_gender=args.intervene_gender,
        label=args.label,
    )


def _stop_on_sigterm(signum, frame) -> NoReturn:
    raise SystemExit(128 + signum)  # unwinds like Ctrl-C: the part being written is discarded and its claim released


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    from extract.families import NonFiniteError, UnknownSiteError  # after parsing: they load torch, which --help never needs
    from extract.interventions import InterventionError
    from extract.runner import audio_notes_summary, run_extraction
    from extract.spec import load_extractor

    check_arguments(args)
    spec = model_spec(args, random_init=args.random_init, seed=args.seed)
    try:
        utterances = read_manifest(args.manifest)
    except (ManifestError, OSError) as error:
        return fail(str(error))
    if args.overwrite:
        overwrite(args)
    if args.limit is not None:
        utterances = utterances[: args.limit]
    job = extraction_job(args, spec)
    try:
        intervener = job.intervener()
    except InterventionError as error:
        return fail(str(error))
    if args.executor:
        return submit_shards(args, job, len(utterances))
    extractor = load_or_exit(lambda: load_extractor(spec, keep_padding=args.keep_padding), spec)
    try:
        sites = extractor.resolve_sites(args.sites.split(",") if args.sites != "all" else "all")
    except UnknownSiteError as error:
        return fail(str(error))
    print(
        f"[extract] {job.label or spec.label()}: {extractor.family} {extractor.checkpoint}{' (random init)' if spec.random_init else ''} on {spec.device}; "
        f"{len(sites)} sites; shard {args.shard_index + 1}/{args.num_shards} of {len(utterances)} utterances -> {args.out}"
    )
    for record in intervener.records() if intervener else []:
        print(f"[extract] intervention {record['kind']} at {record['site']} from {record['path']} on {record['gender']} utterances")
    started = time.time()
    previous_handler = signal.signal(signal.SIGTERM, _stop_on_sigterm) if threading.current_thread() is threading.main_thread() else None
    try:
        report = run_extraction(
            extractor,
            utterances,
            sites,
            args.out,
            config=job.store_config(sites, extractor.checkpoint, extractor.fingerprint),
            storage_dtype=args.storage_dtype,
            batch_seconds=args.batch_seconds,
            batch_size=args.batch_size,
            positions=args.positions,
            pool=args.pool,
            max_seconds=args.max_seconds,
            num_shards=args.num_shards,
            shard_index=args.shard_index,
            utterances_per_part=args.utterances_per_part,
            show_progress=not args.quiet,
            reclaim_stale=args.reclaim_stale,
            intervener=intervener,
        )
    except (StoreError, NonFiniteError, InterventionError) as error:
        return fail(str(error))
    finally:
        if previous_handler is not None:
            signal.signal(signal.SIGTERM, previous_handler)
    elapsed = time.time() - started
    print(
        f"[extract] wrote {report.written} utterances in {elapsed:.1f} s ({report.written / max(elapsed, 1e-9):.2f} utt/s); "
        f"{report.resumed} already done; {len(report.skipped)} skipped for bad audio; "
        f"audio notes: {audio_notes_summary(report.audio_notes)} (per utterance in the store's audio_notes)"
    )
    for item in report.skipped:
        print(f"  skipped {item['id']}: {item['message']}", file=sys.stderr)
    print(f"[extract] store: {args.out} ({len(report.parts)} part files)")
    return 0


def main(argv: list[str] | None = None) -> int:
    """The command; an error of the file system (a full disk while writing, a missing or unreadable
    file) ends with one line and exit status 2 (:func:`experiments.cli.run_cli`)."""
    return run_cli(lambda: _main(argv))


if __name__ == "__main__":
    sys.exit(main())
