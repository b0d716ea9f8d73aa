"""``python -m experiments.st_quality``: BLEU, chrF and COMET of translations, overall and per speaker gender.

    python -m experiments.st_quality --hypotheses HYPS.jsonl --out OUT.json [--comet-model Unbabel/wmt22-comet-da | PATH]
        [--comet | --no-comet] [--comet-python PATH]

Rows are those of ``experiments.transcribe --task st`` (``reference``, ``hypothesis``, ``source``,
``gender``, ``tgt_lang``); a bad row is one line naming the file and line, exit 2. The library is
``experiments.scoring.translation_quality``. COMET loads a local checkpoint or a hub name (which
needs the network); no COMET weights can be fetched on the machines this package is tested on.

COMET is the optional ``[comet]`` extra: unbabel-comet pins numpy<2 and transformers<5, so it
cannot share a current environment. Without it here, the scores are BLEU and chrF (the run says
so), ``--comet`` is refused in one line, and ``--comet-python PATH`` runs COMET in the interpreter
PATH of another environment that holds it (``make install-legacy``), passing segments and scores as
files: the same scores as in process.
The JSON is headed by its ``schema`` version, ``subject`` (the rows' model label, dataset, languages
and target languages), ``inputs`` (path and sha256 of ``--hypotheses``) and ``provenance``.
``--json`` is a deprecated spelling of ``--out``.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from experiments.cli import CommandParser, add_device_argument, add_out_argument, command_main, fail, input_argument
from experiments.options import add_options, from_args
from experiments.scoring.translation_quality import (
    COMET_ELSEWHERE,
    COMET_PINS,
    DEFAULT_COMET,
    comet_installed,
    comet_scorer,
    quality_report,
    read_rows,
    save_quality_report,
    target_language,
)
from extract.options import option


@dataclass(frozen=True)
class StQualityOptions:
    """Which COMET model scores the translations, and where it runs (BLEU and chrF take no options)."""

    comet_model: str = option(DEFAULT_COMET, "hub name or local checkpoint", role="input", study=True)
    no_comet: bool = option(False, "BLEU and chrF only: no COMET model is loaded")
    comet: bool = option(False, "score COMET or fail (default: COMET when unbabel-comet is installed here or --comet-python is given)")
    comet_python: str | None = option(None, "the python of another environment that holds unbabel-comet (the [comet] extra): COMET runs there", study=True)
    batch_size: int = option(16, "segments per COMET batch", study=True)
    gpus: int | None = option(None, "GPUs COMET runs on (default: 1 with --device cuda, else 0)", study=True)


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    input_argument(parser, "--hypotheses", required=True, type=Path)
    add_out_argument(parser, "scores JSON")
    add_options(parser, StQualityOptions)
    add_device_argument(parser, default=None, help="where COMET runs: cpu, cuda or cuda:N (default: cpu, or cuda with --gpus N)")
    return parser


def comet_devices(device: str | None, gpus: int | None) -> tuple[int, list[int] | None]:
    """COMET's ``gpus`` and ``devices`` for ``--device`` and ``--gpus``; a contradiction is a ValueError."""
    if gpus is not None and gpus < 0:
        raise ValueError(f"--gpus {gpus}: must be at least 0")
    device = device or ("cuda" if gpus else "cpu")
    if not device.startswith("cuda"):
        if gpus:
            raise ValueError(f"--gpus {gpus} with --device {device}: COMET would not use them; pass --device cuda")
        if device != "cpu":
            raise ValueError(f"--device {device}: COMET runs on cpu or cuda")
        return 0, None
    index = device.partition(":")[2]
    if index and gpus not in (None, 1):
        raise ValueError(f"--device {device} names one GPU; --gpus {gpus} asks for {gpus}")
    return (gpus if gpus is not None else 1), ([int(index)] if index else None)


def _run(args: argparse.Namespace) -> int:
    options = from_args(StQualityOptions, args)
    rows = read_rows(args.hypotheses)
    target_language(rows, args.hypotheses)  # bad rows and several target languages are refused before COMET loads
    gpus, devices = comet_devices(args.device, options.gpus)
    if options.no_comet and (options.comet or options.comet_python):
        return fail(f"--no-comet with {'--comet' if options.comet else '--comet-python'}: choose one")
    scorer = None
    if not options.no_comet and (options.comet or options.comet_python or comet_installed()):
        scorer = comet_scorer(options.comet_model, options.batch_size, gpus, devices, python=options.comet_python)
    elif not options.no_comet:
        print(f"[st_quality] COMET not scored: unbabel-comet is not installed here ({COMET_PINS}); {COMET_ELSEWHERE}")
    result = quality_report(rows, args.hypotheses, scorer, options.comet_model)
    save_quality_report(result, args.out)
    for name, entry in result["groups"].items():
        comet = f", COMET {entry['comet']:.2f}" if "comet" in entry else ""
        print(f"[st_quality] {name} ({entry['segments']}): BLEU {entry['bleu']:.2f}, chrF {entry['chrf']:.2f}{comet}")
    print(f"[st_quality] wrote {args.out}")
    return 0


# ValueError: references of unequal counts, COMET without sources; RuntimeError: a COMET model that cannot be loaded,
# COMET not installed (CometUnavailableError), or COMET failing in the other interpreter
main = command_main(build_parser, _run, ValueError, RuntimeError, module=__name__)
