"""``python -m experiments.st_quality``: BLEU, chrF and COMET of translations, overall and per speaker gender.

    python -m experiments.st_quality --hypotheses HYPS.jsonl --out OUT.json [--comet-model Unbabel/wmt22-comet-da | PATH] [--no-comet]

Rows are those of ``experiments.transcribe --task st`` (``reference``, ``hypothesis``, ``source``,
``gender``, ``tgt_lang``); a bad row is one line naming the file and line, exit 2. The library is
``experiments.scoring.translation_quality``. COMET loads a local checkpoint or a hub name (which
needs the network); no COMET weights can be fetched on the machines this package is tested on.
The JSON is headed by its ``schema`` version, ``subject`` (the rows' model label, dataset, languages
and target languages), ``inputs`` (path and sha256 of ``--hypotheses``) and ``provenance``.
``--json`` is a deprecated spelling of ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from experiments.cli import CommandParser, add_out_argument, input_argument, run_cli
from experiments.scoring.translation_quality import DEFAULT_COMET, comet_scorer, quality_report, read_rows, target_language


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    input_argument(parser, "--hypotheses", required=True, type=Path)
    add_out_argument(parser, "scores JSON")
    input_argument(parser, "--comet-model", default=DEFAULT_COMET, help="hub name or local checkpoint")
    parser.add_argument("--no-comet", action="store_true")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--gpus", type=int, default=0)
    return parser


def _run(args: argparse.Namespace) -> int:
    rows = read_rows(args.hypotheses)
    target_language(rows, args.hypotheses)  # bad rows and several target languages are refused before COMET loads
    scorer = None if args.no_comet else comet_scorer(args.comet_model, args.batch_size, args.gpus)
    result = quality_report(rows, args.hypotheses, scorer, args.comet_model)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    for name, entry in result["groups"].items():
        comet = f", COMET {entry['comet']:.2f}" if "comet" in entry else ""
        print(f"[st_quality] {name} ({entry['segments']}): BLEU {entry['bleu']:.2f}, chrF {entry['chrf']:.2f}{comet}")
    print(f"[st_quality] wrote {args.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # ValueError: references of unequal counts, COMET without sources; RuntimeError: a COMET model that cannot be loaded
    return run_cli(lambda: _run(args), ValueError, RuntimeError)


if __name__ == "__main__":
    sys.exit(main())
