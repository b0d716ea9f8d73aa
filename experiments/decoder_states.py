"""``python -m experiments.decoder_states``: the decoder's states at each generated token into a store.

Example (the bundled Whisper base, offline)::

    python -m experiments.decoder_states --family whisper --checkpoint bundled-base --manifest corpus.jsonl \\
        --task asr --sites all --out stores/whisper-base-decoder/corpus

For each batch the model generates as ``transcribe`` does (same language forcing, same decoding
settings, recorded in the store's config), then its decoder runs once more, teacher-forced on each
chosen output, and each decoder site's state at every generated token is stored: row j of an
utterance is the state that generated its token j (the prompt and forced language tokens left out,
the end-of-sequence token kept). Each part stores the token ids and their surface strings beside
the rows (``ShardReader.tokens``). Resumable as ``extract`` is: complete parts are skipped. See
docs/stages/decoder.md.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from experiments.cli import command_main, fail, load_or_exit
from experiments.options import from_args
from experiments.store_stage import build_store_parser, store_model_spec, store_paths_problem
from extract.stage_options import DecoderStatesOptions


def build_parser() -> argparse.ArgumentParser:
    """The model flags, the manifest and the store, then the options of :class:`DecoderStatesOptions`."""
    return build_store_parser(__doc__, "store folder (decoder sites; rows are generated tokens)", DecoderStatesOptions)


def _run(args: argparse.Namespace) -> int:
    from_args(DecoderStatesOptions, args)  # a refused option is one line before anything heavy loads
    problem = store_paths_problem(args)
    if problem:
        return fail(problem)
    manifest, out = Path(args.manifest), Path(args.out)
    from extract.decoder import check_family, resolve_decoder_sites  # after parsing: they load torch, which --help never needs
    from extract.decoder_run import DecoderStatesJob, run_decoder_states
    from extract.manifest import read_manifest
    from extract.runner import audio_notes_summary, print_skipped
    from extract.spec import load_generator

    spec = store_model_spec(args)
    job = from_args(DecoderStatesJob, args, spec=spec, manifest=manifest, out=out)
    check_family(spec.family)
    utterances = read_manifest(manifest)[: job.limit]
    generator = load_or_exit(lambda: load_generator(spec, job.decoding), spec)
    sites = resolve_decoder_sites(generator.extractor, "all" if job.sites == "all" else list(job.sites))
    print(
        f"[decoder_states] {job.label or spec.label()}: {spec.family} {generator.extractor.checkpoint}{' (random init)' if spec.random_init else ''} "
        f"on {spec.device}, {job.task}"
        f"{f' into {job.tgt_lang}' if job.task == 'st' else ''}; {len(sites)} decoder sites; shard {job.shard_index + 1}/{job.num_shards} "
        f"of {len(utterances)} utterances -> {out}"
    )
    started = time.time()
    report = run_decoder_states(job, show_progress=not args.quiet, reclaim_stale=args.reclaim_stale, generator=generator)
    elapsed = time.time() - started
    print(
        f"[decoder_states] wrote {report.written} utterances in {elapsed:.1f} s; {report.resumed} already done; "
        f"{len(report.skipped)} skipped for bad audio; audio notes: {audio_notes_summary(report.audio_notes)}"
    )
    print_skipped(report.skipped)
    print(f"[decoder_states] store: {out} ({len(report.parts)} part files; rows are generated tokens, ShardReader.tokens gives them)")
    return 0


main = command_main(build_parser, _run, module=__name__)
