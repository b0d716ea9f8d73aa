"""``python -m experiments.finetune``: LoRA fine-tuning of Whisper on a gender-balanced (or not) subset,
tracking WER per gender, E, Δrel and the absolute gap at every validation (GRAFN §V, Table I;
Boito et al. 2022).

Example (GRAFN's middle configuration, 1000 female and 1000 male sentences, with its front end)::

    python -m experiments.finetune --manifest cv-en.jsonl --checkpoint openai/whisper-tiny \\
        --female-share 0.5 --total 2000 --grafn grafn-filters.json --max-steps 2000 \\
        --out runs/tiny-f50-grafn --device cuda

The training subset is drawn from the ``--train-split`` rows, exactly ``total x female_share``
female utterances and the rest male, seeded, speaker-disjoint from the validation set (the
``--val-split`` rows or ``--val-manifest``); by default utterances whose sentence occurs in the
validation set are left out. Only the adapters train. Metrics go to Lightning's CSV logger
(``OUT/logs``) and ``OUT/val_history.jsonl``; ``OUT/checkpoints/last.ckpt`` lets ``--resume``
continue a killed run to the same merged model as an uninterrupted run (a run stopped before its
first checkpoint simply starts over); the merged model is written to ``OUT/model``, a transformers folder that
``--checkpoint`` accepts everywhere (with ``--grafn``, normalise its input the same way:
``python -m experiments.grafn apply --filters OUT/model/grafn-filters.json ...``).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

from experiments.cli import CommandParser, add_device_argument, add_quiet_argument, add_reclaim_stale_argument, command_main, fail, output_argument
from experiments.finetuning.options import LoraOptions
from experiments.finetuning.run import TRAINING, FinetuneConfig, FinetuneError, run_finetuning
from experiments.options import add_options, from_args, group_of
from extract.options import option


@dataclass(frozen=True)
class FinetuneRunOptions:
    """Whether the run starts or continues (what it trains: :class:`FinetuneConfig`)."""

    resume: bool = option(False, "continue the run in --out from its last checkpoint")


def build_parser() -> argparse.ArgumentParser:
    """The options of :class:`FinetuneConfig` and its :class:`LoraOptions`, the device, the run folder."""
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_options(parser, FinetuneConfig)
    add_options(parser, LoraOptions)
    add_device_argument(group_of(parser, TRAINING))
    output_argument(parser, "--out", required=True, type=Path, help="run folder (see the layout in experiments/finetuning/run.py)")
    add_options(parser, FinetuneRunOptions)
    add_quiet_argument(parser)
    add_reclaim_stale_argument(parser, "OUT/val_history.jsonl")
    return parser


def config_from_args(args: argparse.Namespace) -> FinetuneConfig:
    try:
        lora = from_args(LoraOptions, args)
    except ValueError as error:
        raise FinetuneError(str(error)) from None
    return from_args(FinetuneConfig, args, lora=lora)


def _row(record: dict) -> str:
    def number(key):
        return "n/a" if record.get(key) is None else f"{record[key]:.2f}"

    return (
        f"step {record['step']}: WER {number('wer')} (F {number('wer_female')}, M {number('wer_male')}); "
        f"E {number('E')}, Δrel {number('delta_rel')}, gap {number('gap_abs')}"
    )


def run(args: argparse.Namespace) -> int:
    from extract.spec import ModelSpec, ModelSpecError

    config = config_from_args(args)
    try:
        ModelSpec("whisper", config.checkpoint, config.revision).check_checkpoint()
    except ModelSpecError as error:
        return fail(f"--checkpoint {error}")
    device = args.device  # auto resolved while parsing
    print(
        f"[finetune] {config.checkpoint} on {device}: {config.total} utterances at female share {config.female_share}, "
        f"LoRA r={config.lora.rank} on {', '.join(config.lora.targets)}, {config.max_steps} steps"
        + (f", GRAFN front end {config.grafn} by {config.grafn_by}" if config.grafn else "")
    )
    started = time.time()
    result = run_finetuning(
        config, args.out, device=device, resume=from_args(FinetuneRunOptions, args).resume, show_progress=not args.quiet, reclaim_stale=args.reclaim_stale
    )
    if result.already_done:
        print(f"[finetune] {args.out} is finished already; the model is {result.model_dir}")
    for record in result.history:
        print(f"[finetune] {_row(record)}")
    print(
        f"[finetune] done in {time.time() - started:.0f} s; metrics: {args.out / 'val_history.jsonl'} and {args.out / 'logs'}; merged model: {result.model_dir}"
    )
    return 0


main = command_main(build_parser, run, module=__name__)
