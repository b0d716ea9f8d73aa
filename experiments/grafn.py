"""``python -m experiments.grafn``: GRAFN waveform normalisation (Alm, Szachara and Murphy, §IV.D, §V).

Two steps::

    python -m experiments.grafn fit --manifest train.jsonl --out grafn-filters.json [--split train]
    python -m experiments.grafn apply --filters grafn-filters.json --manifest test.jsonl \\
        --audio-dir grafn-audio/ --out test.grafn.jsonl [--by gender|predicted|utterance]

``fit`` calibrates per-gender gains toward a neutral target on the labelled utterances of a
manifest and writes them, with every parameter, as JSON. ``apply`` writes normalised audio and a
manifest with the same ids and metadata (each row's ``extra.grafn`` says which filter it got), so
``experiments.extract``, ``transcribe``, ``asr_gap`` and ``probe`` run on it unchanged. ``--by
gender`` uses the labels (the paper's setting; utterances without a binary label are passed through
unchanged and counted); ``predicted`` picks the filter by a pitch rule calibrated by ``fit``, and
``utterance`` maps each utterance's own spectrum onto the target: neither reads a label. A killed
``apply`` resumes where it stopped.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

from experiments.cli import CommandParser, add_out_argument, add_quiet_argument, add_reclaim_stale_argument, command_main, input_argument, output_argument
from experiments.normalisation.corpus import DONE_FILE, MODES, apply_to_manifest, fit_from_manifest, run_files
from experiments.normalisation.transform import GrafnParameters
from experiments.options import add_options, from_args
from extract.options import option


@dataclass(frozen=True)
class GrafnFitOptions:
    """Which rows of the manifest calibrate the filters (their parameters: :class:`GrafnParameters`)."""

    split: str | None = option(None, "calibrate on this split of the manifest only (e.g. train); default: every row")
    per_gender: int | None = option(None, "calibrate on at most N female and N male utterances (a seeded sample); default: all")


@dataclass(frozen=True)
class GrafnApplyOptions:
    """Whose filter normalises each utterance."""

    by: str = option(
        "gender",
        "gender (default): the label's filter, non-binary labels passed through; predicted: the pitch rule's; utterance: its own, toward the target",
        choices=MODES,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    fit = commands.add_parser("fit", help="calibrate the per-gender filters on a labelled manifest")
    input_argument(fit, "--manifest", required=True, type=Path, help="calibration manifest (female and male rows are used, others counted)")
    add_options(fit, GrafnFitOptions)
    add_out_argument(fit, "filters file to write (JSON)")
    add_options(fit, GrafnParameters)
    add_quiet_argument(fit)
    apply = commands.add_parser("apply", help="normalise a manifest's audio with fitted filters")
    input_argument(apply, "--filters", required=True, type=Path, help="filters file written by `fit`")
    input_argument(apply, "--manifest", required=True, type=Path, help="manifest to normalise")
    output_argument(
        apply, "--audio-dir", required=True, type=Path, help="folder for the normalised audio (float WAV) and the resume records", sidecars=run_files
    )
    add_out_argument(apply, "normalised manifest to write (same ids and metadata)")
    add_options(apply, GrafnApplyOptions)
    add_quiet_argument(apply)
    add_reclaim_stale_argument(apply, f"--audio-dir's {DONE_FILE}")
    return parser


def _parameters(args: argparse.Namespace) -> GrafnParameters:
    """The parameters the flags give; ``--active-db 0`` keeps every frame (``active_db`` None)."""
    return from_args(GrafnParameters, argparse.Namespace(**{**vars(args), "active_db": args.active_db or None}))


def run_fit(args: argparse.Namespace) -> int:
    params, rows = _parameters(args), from_args(GrafnFitOptions, args)
    print(f"[grafn] calibrating on {args.manifest}" + (f" (split {rows.split})" if rows.split else ""))
    filters, skipped = fit_from_manifest(args.manifest, params, rows.split, rows.per_gender, show_progress=not args.quiet)
    filters.save(args.out)
    for group, entry in filters.groups.items():
        f0 = entry["median_f0_hz"]
        print(f"[grafn] {group}: {entry['utterances']} utterances, {entry['speakers']} speakers, median F0 {'n/a' if f0 is None else f'{f0:.0f} Hz'}")
    passed = filters.calibration["passed_over"]
    print(f"[grafn] passed over (no binary label): {sum(passed.values())}" + (f" ({', '.join(f'{k} {v}' for k, v in passed.items())})" if passed else ""))
    print(f"[grafn] skipped for bad audio: {len(skipped)}" + (f" (e.g. {skipped[0]['id']}: {skipped[0]['problem']})" if skipped else ""))
    threshold = filters.pitch_threshold_hz
    print(f"[grafn] pitch rule threshold: {'none' if threshold is None else f'{threshold:.0f} Hz'}; filters: {args.out}")
    return 0


def run_apply(args: argparse.Namespace) -> int:
    by = from_args(GrafnApplyOptions, args).by
    print(f"[grafn] normalising {args.manifest} by {by} with {args.filters} into {args.audio_dir}")
    started = time.time()
    report = apply_to_manifest(args.filters, args.manifest, args.audio_dir, args.out, by, show_progress=not args.quiet, reclaim_stale=args.reclaim_stale)
    print(
        f"[grafn] {report.normalised} of {report.total} utterances normalised ({', '.join(f'{k} {v}' for k, v in sorted(report.by_filter.items())) or 'none'}; "
        f"{report.resumed} done by an earlier run) in {time.time() - started:.1f} s"
    )
    for reason, ids in report.passed_through.items():
        print(f"[grafn] passed through unchanged, {reason}: {len(ids)} (e.g. {', '.join(ids[:3])})")
    if report.bad_audio:
        print(
            f"[grafn] bad audio, left unchanged (a rerun retries): {len(report.bad_audio)} (e.g. {report.bad_audio[0]['id']}: {report.bad_audio[0]['problem']})"
        )
    print(f"[grafn] manifest: {report.out}")
    return 0


def _run(args: argparse.Namespace) -> int:
    return run_fit(args) if args.command == "fit" else run_apply(args)


main = command_main(build_parser, _run, module=__name__)
