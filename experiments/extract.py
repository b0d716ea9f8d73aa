"""``python -m experiments.extract``: hidden states of a speech model into HDF5 shards.

Example (GPU)::

    python -m experiments.extract --model whisper --checkpoint openai/whisper-large-v3 \\
        --manifest cv-it-test.jsonl --sites all --out stores/whisper-large-v3/cv-it --device cuda --dtype float16
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from extract.families import FAMILIES, UnknownSiteError
from extract.manifest import ManifestError, read_manifest
from extract.runner import run_extraction

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(parser)
    parser.add_argument("--manifest", required=True)
    parser.add_argument("--sites", default="all", help="comma-separated site names, or 'all'")
    parser.add_argument("--out", required=True, help="store folder")
    parser.add_argument("--storage-dtype", default="float16", choices=["float16", "float32"])
    parser.add_argument("--batch-seconds", type=float, default=120.0, help="total audio seconds per batch")
    parser.add_argument("--max-seconds", type=float, default=30.0, help="trim audio to this length (30 for ASR, 60 for ST)")
    parser.add_argument("--limit", type=int, help="only the first N utterances of the manifest")
    parser.add_argument("--num-shards", type=int, default=1)
    parser.add_argument("--shard-index", type=int, default=0)
    parser.add_argument("--utterances-per-part", type=int, default=256, help="utterances per part file (the unit of resume)")
    parser.add_argument("--keep-padding", action="store_true", help="Whisper: store all 1500 frames of the padded 30 s input")
    parser.add_argument("--random-init", action="store_true", help="same architecture, random weights (the random-model baseline)")
    parser.add_argument("--seed", type=int, default=0, help="seed for --random-init")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """Which model to load and where to run it (shared by extraction and transcription)."""
    parser.add_argument("--model", required=True, choices=sorted(FAMILIES))
    parser.add_argument("--checkpoint", help="hub id or local folder (default: the family's reference checkpoint); 'bundled-base' or 'bundled-tiny.en' for the offline Whisper")
    parser.add_argument("--revision", help="hub revision (a 40-hex commit is required for remote code)")
    parser.add_argument("--trust-remote-code", action="store_true", help="allow hub code (ZeroSwot), at a pinned --revision")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="float32", choices=sorted(DTYPES), help="model compute dtype")


def resolve_checkpoint(family: str, checkpoint: str | None) -> str:
    if checkpoint and checkpoint.startswith("bundled-"):
        if family != "whisper":
            raise SystemExit("error: bundled weights exist only for Whisper")
        from extract.weights import bundled_whisper

        return str(bundled_whisper(checkpoint.removeprefix("bundled-")))
    return checkpoint or FAMILIES[family].default_checkpoint


def load_extractor(args):
    random_init = getattr(args, "random_init", False)
    options = {"revision": args.revision, "random_init": random_init, "device": args.device, "dtype": DTYPES[args.dtype]}
    if args.model == "whisper":
        options["keep_padding"] = getattr(args, "keep_padding", False)
    if args.model == "zeroswot":
        options["trust_remote_code"] = args.trust_remote_code
    elif args.trust_remote_code:
        print("note: --trust-remote-code has no effect for this family", file=sys.stderr)
    torch.manual_seed(getattr(args, "seed", 0))
    return FAMILIES[args.model].load(resolve_checkpoint(args.model, args.checkpoint), **options)


def store_config(args, sites: list[str], checkpoint: str) -> dict:
    """What determines the stored values; a resumed run must match it exactly."""
    return {
        "model": args.model, "checkpoint": checkpoint, "revision": args.revision, "sites": sites, "dtype": args.dtype,
        "storage_dtype": args.storage_dtype, "max_seconds": args.max_seconds, "keep_padding": args.keep_padding,
        "random_init": args.random_init, "seed": args.seed if args.random_init else None, "limit": args.limit,
        "num_shards": args.num_shards, "utterances_per_part": args.utterances_per_part, "manifest": str(args.manifest),
    }


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        utterances = read_manifest(args.manifest)
    except (ManifestError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.limit is not None:
        utterances = utterances[: args.limit]
    extractor = load_extractor(args)
    try:
        sites = extractor.resolve_sites(args.sites.split(",") if args.sites != "all" else "all")
    except UnknownSiteError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"[extract] {extractor.family} {extractor.checkpoint}{' (random init)' if args.random_init else ''} on {args.device}; "
          f"{len(sites)} sites; shard {args.shard_index + 1}/{args.num_shards} of {len(utterances)} utterances -> {args.out}")
    started = time.time()
    report = run_extraction(
        extractor, utterances, sites, args.out, config=store_config(args, sites, extractor.checkpoint),
        storage_dtype=args.storage_dtype, batch_seconds=args.batch_seconds, max_seconds=args.max_seconds,
        num_shards=args.num_shards, shard_index=args.shard_index, utterances_per_part=args.utterances_per_part,
        show_progress=not args.quiet,
    )
    elapsed = time.time() - started
    print(f"[extract] wrote {report.written} utterances in {elapsed:.1f} s ({report.written / max(elapsed, 1e-9):.2f} utt/s); "
          f"{report.resumed} already done; {len(report.skipped)} skipped for bad audio")
    for item in report.skipped:
        print(f"  skipped {item['id']}: {item['message']}", file=sys.stderr)
    print(f"[extract] store: {args.out} ({len(report.parts)} part files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
