"""``python -m experiments.extract``: hidden states of a speech model into HDF5 shards.

Example (GPU)::

    python -m experiments.extract --family whisper --checkpoint openai/whisper-large-v3 \\
        --manifest cv-it-test.jsonl --sites all --out stores/whisper-large-v3/cv-it --device cuda --dtype float16
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from experiments.cli import command_main, fail, load_or_exit
from experiments.options import add_options, from_args
from experiments.scheduling import add_executor_arguments, executor_options, extraction_tasks, run_tasks
from experiments.store_stage import build_store_parser, store_model_spec, store_paths_problem
from extract.manifest import read_manifest
from extract.options import option
from extract.stage_options import ExtractOptions

if TYPE_CHECKING:  # the model modules load torch: imported where a model runs, so that --help stays fast
    from extract.jobs import ExtractionJob


@dataclass(frozen=True)
class StoreReplacement:
    """Whether an existing store is set aside and computed anew (:func:`overwrite`)."""

    overwrite: bool = option(
        False,
        "compute the store anew: an existing --out is first moved to OUT_PARENT/.superseded/STAMP/ (nothing is deleted; one shard per run is refused)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The model flags, the manifest and the store, then the options of :class:`ExtractOptions`."""
    parser = build_store_parser(__doc__, "store folder", ExtractOptions)
    add_options(parser, StoreReplacement)
    add_executor_arguments(parser, "one shard of --num-shards, every shard submitted (--shard-index is not used)")
    return parser


STORE_ENTRIES = (".h5", ".h5.tmp", ".lock")  # what a store folder holds: parts, parts being written, claims


def overwrite(args, inputs: list[str | Path]) -> None:
    """``--overwrite``: an existing, non-empty ``--out`` set aside (:func:`extract.supersede.set_aside`) before
    anything is written, once the run has checked it can run (its manifest read, its model loaded).
    Refused, before anything moves, for one shard of several (the other shards' runs would lose their
    parts), for a folder that is not a store (anything in it but parts and claims), for the folder the
    command runs in (``--out .``) or one holding it, and for a folder holding one of ``inputs`` (the
    manifest, the checkpoint, intervention files the run reads)."""
    from extract.supersede import set_aside

    out = Path(args.out)
    if not (out.is_dir() and any(out.iterdir())):
        return
    store = out.resolve()
    if args.num_shards > 1 and not args.executor:
        raise SystemExit(fail(f"--overwrite with --num-shards {args.num_shards}: set {out} aside once (e.g. move it), then run the shards without --overwrite"))
    here = Path.cwd().resolve()
    if store == here or store in here.parents:
        raise SystemExit(fail(f"--overwrite --out {args.out}: {store} is the folder this command runs in, or holds it; run it from outside that folder"))
    for given in inputs:
        if store in Path(given).resolve().parents:
            raise SystemExit(fail(f"--overwrite would set aside {given}, which this run reads: it lies inside --out {store}; move it out of the store first"))
    foreign = sorted(entry.name for entry in store.iterdir() if not (entry.is_file() and entry.name.endswith(STORE_ENTRIES)))
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise SystemExit(
            fail(f"--overwrite --out {args.out}: {store} is not a store (it holds {shown}); --overwrite sets aside a store's folder only: give that folder")
        )
    aside = set_aside([store], store.parent)
    print(f"[extract] --overwrite: the earlier store set aside -> {aside / store.name}")


def submit_shards(args, job: ExtractionJob, utterances: int) -> int:
    """``--executor``: one submitit task per unfinished shard (a SLURM job array), waited for and reported."""
    rerun_hint = "rerun the same command: complete shards are skipped, unfinished ones resume from their complete parts"
    executor = executor_options(args, args.device)
    tasks, finished = extraction_tasks(job, utterances, args.reclaim_stale)
    return run_tasks(executor, "extract", tasks, finished, rerun_hint)


def _run(args: argparse.Namespace) -> int:
    if problem := store_paths_problem(args):  # the manifest is a file and the store a folder
        raise SystemExit(fail(problem))
    from_args(ExtractOptions, args)  # a refused option is one line before anything heavy loads
    from extract.jobs import ExtractionJob, extract  # after parsing: it loads torch, which --help never needs
    from extract.runner import audio_notes_summary, print_skipped
    from extract.spec import load_extractor

    spec = store_model_spec(args)
    job = from_args(ExtractionJob, args, spec=spec, manifest=args.manifest, out=Path(args.out))
    utterances = read_manifest(job.manifest)[: job.limit]
    intervener = job.intervener()
    replacing = from_args(StoreReplacement, args).overwrite
    inputs = [job.manifest, *job.interventions, *([args.checkpoint] if args.checkpoint and Path(args.checkpoint).exists() else [])]
    if args.executor:
        if replacing:
            overwrite(args, inputs)
        return submit_shards(args, job, len(utterances))
    extractor = load_or_exit(lambda: load_extractor(spec, keep_padding=job.keep_padding), spec)
    sites = extractor.resolve_sites("all" if job.sites == "all" else list(job.sites))
    if replacing:  # the run can run: only now is the earlier store moved
        overwrite(args, inputs)
    print(
        f"[extract] {job.label or spec.label()}: {extractor.family} {extractor.checkpoint}{' (random init)' if spec.random_init else ''} on {spec.device}; "
        f"{len(sites)} sites; shard {job.shard_index + 1}/{job.num_shards} of {len(utterances)} utterances -> {job.out}"
    )
    for record in intervener.records() if intervener else []:
        print(f"[extract] intervention {record['kind']} at {record['site']} from {record['path']} on {record['gender']} utterances")
    started = time.time()
    _, report = extract(job, show_progress=not args.quiet, reclaim_stale=args.reclaim_stale, extractor=extractor)
    elapsed = time.time() - started
    print(
        f"[extract] wrote {report.written} utterances in {elapsed:.1f} s ({report.written / max(elapsed, 1e-9):.2f} utt/s); "
        f"{report.resumed} already done; {len(report.skipped)} skipped for bad audio; "
        f"audio notes: {audio_notes_summary(report.audio_notes)} (per utterance in the store's audio_notes)"
    )
    print_skipped(report.skipped)
    print(f"[extract] store: {job.out} ({len(report.parts)} part files)")
    return 0


main = command_main(build_parser, _run, module=__name__)
