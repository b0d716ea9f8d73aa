"""``python -m experiments.erase``: fit a gender eraser or steering vector on a store, to edit a model with.

Subcommands::

    python -m experiments.erase fit --store stores/whisper-large-v3/cv-en --site encoder.layer.16 --out erase-l16.safetensors
    python -m experiments.erase fit --store ... --site encoder.layer.16 --method random --out random-l16.safetensors
    python -m experiments.erase fit --store ... --site encoder.layer.16 --method mean-diff --target female --alpha 1 --out steer-f-l16.safetensors
    python -m experiments.erase show erase-l16.safetensors

``fit`` reads the speech frames of the site for the training split of the probes' split (seed
``--seed``; the manifest's train split when it has one), gender as the concept, and saves:

- ``--method leace`` (default): the LEACE eraser (kind ``erase``); prints the fraction of the frames'
  variance it removes and its rank;
- ``--method random``: the control, LEACE on a random speaker partition balanced within each gender
  (kind ``random-erase``), an edit of the same rank that carries no gender;
- ``--method mean-diff``: a steering vector (kind ``steer``), the mean of the ``--target`` gender's
  frames minus the other's, applied as h + alpha * d (alpha 1 moves the other gender's mean onto the target's).

The file (safetensors with a JSON record; no pickle) names the site, the model (a local checkpoint
by the fingerprint of its files) and the store it was fitted on, with a digest binding the record to
the tensors; ``python -m experiments.extract`` and ``experiments.transcribe`` apply it with
``--intervene FILE`` (``--intervene-gender`` to edit only one gender's utterances) and refuse it on
another model, or when the record or the tensors were edited. ``show`` prints a file's record.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from experiments.cli import CommandParser, command_main, fail, input_argument, output_argument
from experiments.options import add_options, from_args
from extract.options import option, seed_option


@dataclass(frozen=True, kw_only=True)
class ErasureFitOptions:
    """What ``erase fit`` fits, where, and with which seed (``probing.erasure.fit``'s arguments)."""

    site: str = option(help="the site to fit at (one of the store's sites)")
    method: str = option("leace", "default leace (see above)", choices=("leace", "random", "mean-diff"))
    target: str | None = option(None, "mean-diff: the gender the states are moved toward (required)", choices=("female", "male"))
    alpha: float = option(1.0, "mean-diff: the step h + alpha * d (default 1: the other mean onto the target's)")
    seed: int = seed_option("seed of the speaker-disjoint split (as the probes') and of the random concept (default 0)")
    allow_partial: bool = option(
        False, "fit on a store that lacks parts (or sits beside a writer's claims) on purpose; the file's fit record says partial: {used, expected}"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    fit = commands.add_parser("fit", help="fit an eraser, its random-concept control or a steering vector on a store")
    input_argument(fit, "--store", required=True, help="store folder (python -m experiments.extract) with gender and speaker metadata")
    output_argument(fit, "--out", required=True, help="the intervention file to write (.safetensors)")
    add_options(fit, ErasureFitOptions)
    show = commands.add_parser("show", help="print an intervention file's record")
    input_argument(show, "file")
    return parser


def fit_command(args) -> int:
    from probing.erasure import fit

    options = from_args(ErasureFitOptions, args)
    if options.method == "mean-diff" and options.target is None:
        return fail("--method mean-diff needs --target female|male")
    if options.method != "mean-diff" and (options.target is not None or options.alpha != 1.0):
        return fail(f"--target and --alpha are for --method mean-diff, not {options.method}")
    if Path(args.out).is_dir():
        return fail(f"--out {args.out} is a folder; give the path of the intervention file to write (.safetensors)")
    print(f"[erase] fitting {options.method} at {options.site} on the training split of {args.store} (seed {options.seed})")
    intervention = fit(args.store, options.site, options.method, options.seed, options.alpha, options.target, allow_partial=options.allow_partial)
    path = intervention.save(args.out)
    record = intervention.fit
    where = f"{record['utterances']} utterances, {record['speakers']} speakers, {sum(record['frames'].values())} speech frames"
    if intervention.kind == "steer":
        print(
            f"[erase] steering toward {intervention.target}, alpha {intervention.alpha:g}: |d| = {record['direction_norm']:.4g} "
            f"({record['direction_norm_over_spread']:.3f} x the frames' RMS spread) from {where}"
        )
    else:
        print(
            f"[erase] {intervention.kind}: rank {record['rank']}, removes {100 * record['variance_removed']:.2f} % of the frames' variance; "
            f"gender mean gap kept {100 * record['gender_mean_gap_kept']:.2f} % (from {where})"
        )
    print(f"[erase] wrote {path}")
    return 0


def show_command(args) -> int:
    from extract.interventions import load_intervention

    intervention = load_intervention(args.file)
    print(json.dumps(intervention.header(), indent=2))
    return 0


def _run(args: argparse.Namespace) -> int:
    return fit_command(args) if args.command == "fit" else show_command(args)


main = command_main(build_parser, _run, module=__name__)
