"""``python -m experiments.mustshe``: term coverage and gender accuracy on MuST-SHE.

    python -m experiments.mustshe --definition MONOLINGUAL.it_v1.2.tsv --hypotheses HYP.txt [--pretokenized] [--tgt-lang it] --out OUT.json

Scores with the official evaluation's semantics (``experiments.scoring.mustshe``; the TSV format
is ``extract.corpora.must_she``). The JSON holds coverage and accuracy per category
(``categories``: 1F, 1M, 2F, 2M), per speaker gender (``genders``), per category number
(``category_numbers``: "1" pools 1F and 1M), for category 1 alone (``category_1``: first-person
references to the speaker, the accuracy Fucci et al. 2025 correlate with probe F1; null when the
definition has no category-1 entry) and ``global``, headed by its ``schema`` version, its
``subject`` (``tgt_lang``; for transcribe's ``.jsonl`` rows their ``model`` label, ``dataset`` and
languages), the ``inputs`` (path and sha256 of the TSV and the hypotheses) and ``provenance``; per-sentence counts go to
``OUT.sentences.jsonl``. Hypothesis ids that the definition lacks are not scored: they are counted
on stderr and listed in ``unmatched_hypotheses``. ``--json`` and ``--lang`` are deprecated
spellings of ``--out`` and ``--tgt-lang``.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from experiments.cli import CommandParser, add_out_argument, add_tgt_lang_argument, command_main, input_argument
from experiments.options import add_options, from_args
from experiments.scoring.mustshe import save_scores, score_hypotheses, sentences_path
from extract.corpora.must_she import read_definition
from extract.options import option


@dataclass(frozen=True)
class MustSheOptions:
    """How the hypotheses are read (the target language: ``--tgt-lang``)."""

    pretokenized: bool = option(False, "the hypotheses are tokenized already: split on whitespace, no Moses tokenizer")


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    input_argument(parser, "--definition", required=True, type=Path, help="MuST-SHE TSV")
    input_argument(
        parser, "--hypotheses", required=True, type=Path, help="one translation per line, aligned with the TSV, or transcribe's .jsonl (matched by ID)"
    )
    add_options(parser, MustSheOptions)
    add_tgt_lang_argument(parser, ("--lang",), "target language for the Moses tokenizer", default="it")
    add_out_argument(parser, "scores JSON (per-sentence counts go to OUT.sentences.jsonl)", sidecars=lambda out: [sentences_path(out)])
    return parser


def _run(args: argparse.Namespace) -> int:
    pretokenized = from_args(MustSheOptions, args).pretokenized
    result, rows = score_hypotheses(read_definition(args.definition), args.hypotheses, args.tgt_lang, pretokenized, args.definition)
    if "unmatched_hypotheses" in result:
        unmatched = result["unmatched_hypotheses"]["ids"]
        print(
            f"warning: {len(unmatched)} hypothesis id(s) in {args.hypotheses} are not in {args.definition} and are not scored, e.g. {unmatched[:3]}",
            file=sys.stderr,
        )
    sentences = save_scores(result, rows, args.out)
    for name, scores in result["categories"].items():
        print(f"[mustshe] {name}: coverage {scores['coverage']:.2f}, accuracy {scores['accuracy']:.2f}")
    first_person = result["category_1"]
    if first_person is None:
        print("[mustshe] category 1 (1F + 1M): no entries in the definition")
    else:
        print(f"[mustshe] category 1 (1F + 1M): coverage {first_person['coverage']:.2f}, accuracy {first_person['accuracy']:.2f}")
    print(f"[mustshe] global: coverage {result['global']['coverage']:.2f}, accuracy {result['global']['accuracy']:.2f}; wrote {args.out} and {sentences.name}")
    return 0


main = command_main(build_parser, _run, module=__name__)
