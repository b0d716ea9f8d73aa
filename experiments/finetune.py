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
from pathlib import Path

from experiments.cli import CommaList, CommandParser, add_device_argument, add_reclaim_stale_argument, fail, input_argument, output_argument, run_cli
from experiments.finetuning.options import LoraOptions
from experiments.finetuning.run import FinetuneConfig, FinetuneError, run_finetuning
from experiments.normalisation.corpus import MODES
from experiments.normalisation.transform import GrafnError

DEFAULTS = FinetuneConfig(manifest="", female_share=0.5, total=1)


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    data = parser.add_argument_group("data")
    input_argument(data, "--manifest", required=True, help="manifest with the training pool (and, without --val-manifest, the validation split)")
    data.add_argument("--female-share", type=float, required=True, help="share of female utterances in the training subset (GRAFN: 0.25, 0.5, 0.75)")
    data.add_argument("--total", type=int, required=True, help="utterances in the training subset; total x share must be a whole number")
    data.add_argument("--train-split", default=DEFAULTS.train_split, help=f"split of the training pool (default {DEFAULTS.train_split})")
    data.add_argument("--val-split", default=DEFAULTS.val_split, help=f"split of --manifest to validate on (default {DEFAULTS.val_split})")
    input_argument(data, "--val-manifest", help="validate on this manifest instead of a split of --manifest")
    data.add_argument("--val-size", type=int, help="validate on a seeded sample of N utterances, half female and half male (default: all)")
    data.add_argument("--language", help="only utterances in this language (e.g. en for an English-only Whisper)")
    data.add_argument("--keep-validation-sentences", action="store_true", help="also train on sentences that occur in the validation set (default: left out)")
    input_argument(data, "--grafn", help="GRAFN filters file (python -m experiments.grafn fit): normalise training and validation audio")
    data.add_argument("--grafn-by", choices=MODES, default=DEFAULTS.grafn_by, help=f"which GRAFN filter each utterance gets (default {DEFAULTS.grafn_by})")
    model = parser.add_argument_group("model and LoRA")
    input_argument(
        model,
        "--checkpoint",
        default=DEFAULTS.checkpoint,
        help=f"Whisper hub id, local folder or bundled-base / bundled-tiny.en (default {DEFAULTS.checkpoint})",
    )
    model.add_argument("--revision", help="hub revision")
    model.add_argument("--lora-rank", type=int, default=DEFAULTS.lora.rank, help=f"LoRA rank r (default {DEFAULTS.lora.rank})")
    model.add_argument("--lora-alpha", type=int, default=DEFAULTS.lora.alpha, help=f"LoRA alpha (default {DEFAULTS.lora.alpha})")
    model.add_argument("--lora-dropout", type=float, default=DEFAULTS.lora.dropout, help=f"LoRA dropout (default {DEFAULTS.lora.dropout})")
    model.add_argument(
        "--lora-targets",
        action=CommaList,
        default=list(DEFAULTS.lora.targets),
        metavar="NAME[,NAME]",
        help=f"module names that get adapters (default {','.join(DEFAULTS.lora.targets)})",
    )
    training = parser.add_argument_group("training")
    training.add_argument("--max-steps", type=int, default=DEFAULTS.max_steps, help=f"optimiser steps (default {DEFAULTS.max_steps})")
    training.add_argument("--batch-size", type=int, default=DEFAULTS.batch_size, help=f"utterances per step (default {DEFAULTS.batch_size})")
    training.add_argument("--lr", type=float, default=DEFAULTS.lr, help=f"peak learning rate of AdamW on the adapters (default {DEFAULTS.lr})")
    training.add_argument(
        "--warmup-steps", type=int, default=DEFAULTS.warmup_steps, help=f"linear warm-up, then linear decay to 0 (default {DEFAULTS.warmup_steps})"
    )
    training.add_argument("--weight-decay", type=float, default=DEFAULTS.weight_decay, help=f"AdamW weight decay (default {DEFAULTS.weight_decay})")
    training.add_argument(
        "--val-every", type=int, default=DEFAULTS.val_every, help=f"validate and checkpoint every N steps, and at the last (default {DEFAULTS.val_every})"
    )
    training.add_argument("--no-validate-before", action="store_true", help="skip the validation of the untrained model at step 0")
    training.add_argument(
        "--seed", type=int, default=DEFAULTS.seed, help=f"seed of the subset draw, the adapters' init and the data order (default {DEFAULTS.seed})"
    )
    training.add_argument("--precision", default=DEFAULTS.precision, help=f"Lightning precision, e.g. bf16-mixed on a GPU (default {DEFAULTS.precision})")
    add_device_argument(training)
    training.add_argument("--num-beams", type=int, default=DEFAULTS.num_beams, help=f"validation decoding beams (default {DEFAULTS.num_beams})")
    training.add_argument("--max-new-tokens", type=int, default=DEFAULTS.max_new_tokens, help=f"validation decoding length (default {DEFAULTS.max_new_tokens})")
    output_argument(parser, "--out", required=True, type=Path, help="run folder (see the layout in experiments/finetuning/run.py)")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_reclaim_stale_argument(parser, "OUT/val_history.jsonl")
    return parser


def config_from_args(args: argparse.Namespace) -> FinetuneConfig:
    try:
        lora = LoraOptions(args.lora_rank, args.lora_alpha, args.lora_dropout, tuple(args.lora_targets))
    except ValueError as error:
        raise FinetuneError(str(error)) from None
    return FinetuneConfig(
        manifest=args.manifest,
        female_share=args.female_share,
        total=args.total,
        checkpoint=args.checkpoint,
        revision=args.revision,
        train_split=args.train_split,
        val_split=args.val_split,
        val_manifest=args.val_manifest,
        val_size=args.val_size,
        language=args.language,
        exclude_validation_texts=not args.keep_validation_sentences,
        lora=lora,
        lr=args.lr,
        warmup_steps=args.warmup_steps,
        weight_decay=args.weight_decay,
        batch_size=args.batch_size,
        max_steps=args.max_steps,
        val_every=args.val_every,
        validate_before=not args.no_validate_before,
        seed=args.seed,
        grafn=args.grafn,
        grafn_by=args.grafn_by,
        precision=args.precision,
        num_beams=args.num_beams,
        max_new_tokens=args.max_new_tokens,
    )


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
    result = run_finetuning(config, args.out, device=device, resume=args.resume, show_progress=not args.quiet, reclaim_stale=args.reclaim_stale)
    if result.already_done:
        print(f"[finetune] {args.out} is finished already; the model is {result.model_dir}")
    for record in result.history:
        print(f"[finetune] {_row(record)}")
    print(
        f"[finetune] done in {time.time() - started:.0f} s; metrics: {args.out / 'val_history.jsonl'} and {args.out / 'logs'}; merged model: {result.model_dir}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from extract.spec import LOAD_ERRORS  # after parsing: it loads torch, which --help never needs

    return run_cli(lambda: run(args), FinetuneError, GrafnError, *LOAD_ERRORS)


if __name__ == "__main__":
    raise SystemExit(main())
