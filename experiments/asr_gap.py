"""``python -m experiments.asr_gap``: error rates per gender group and their gaps, per language.

    python -m experiments.asr_gap --hypotheses HYPS.jsonl --out OUT.json [--groups female,male] [--iterations 1000] [--seed 0]
        [--gap-estimate resampled|full] [--normalizer whisper|basic|none] [--cer-spaces drop|keep]

Reads the rows written by ``experiments.transcribe`` (id, reference, hypothesis, gender, speaker,
language, ...), scores every utterance once with one normalizer for every model (records whose
reference is empty after normalization are dropped and counted; ``scoring`` records per language
what was used), and writes rates and gaps in percent with the first group as A.

``gap_relative`` is the estimate ``--gap-estimate`` chose, named in ``gap_estimate``: ``resampled``
(default, the paper's: E on the mean rates of the resampled subsets) or ``full`` (E on all
records); both are written as ``gap_relative_resampled`` and ``gap_relative_full``.
``gap_absolute`` and ``delta_rel`` are on all records. ``bootstrap`` holds the published resampling
(mean rate per group, two-sided t-test ``p_value`` with ``p_value_note``: pseudo-replicated) and
``ci95``, the 95 % interval of E from a speaker-cluster bootstrap, the number to read first.
Per-utterance counts go beside the JSON (``OUT.counts.jsonl``). The JSON starts with its
``schema`` version, its ``subject`` (the rows' ``model`` label, ``dataset`` and ``languages``; the
family, checkpoint and manifest sha256 of ``HYPS.jsonl.settings.json`` where it exists), the
``inputs`` (path and sha256 of ``--hypotheses``) and the code's ``provenance``: what
``experiments.collect`` joins probe rows with. The library is
``experiments.scoring.gaps``; ``--json`` is a deprecated spelling of ``--out``.

Groups of another speaker attribute of the manifest's ``extra`` (``docs/attributes.md``)::

    python -m experiments.asr_gap --hypotheses HYPS.jsonl --out OUT.json --attribute age --groups young,old
    python -m experiments.asr_gap --hypotheses HYPS.jsonl --out OUT.json --attribute accent --groups north,west,south

read the attribute from the manifest transcribed (the one ``HYPS.jsonl.settings.json`` records, or
``--labels MANIFEST``), refused unless its sha256 is the one recorded. Two groups give the gender
report's shape; with more, each group is compared with the last (``reference``, ``comparisons``).
Utterances without the attribute are left out and counted (``unlabelled``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from experiments.cli import CommandParser, add_out_argument, flag_given, input_argument, run_cli, two_groups
from experiments.options import add_options
from experiments.scoring.asr_metrics import Scoring
from experiments.scoring.gaps import (
    GapOptions,
    counts_path,
    delta_rel_text,
    gap_report,
    gap_summary,
    hypotheses_attribute,
    iterations_problem,
    read_hypotheses,
    save_gap_report,
)
from extract.attributes import LabelError, check_attribute_name
from extract.options import field_problem


def build_parser() -> argparse.ArgumentParser:
    """The hypotheses and the report, then the options of :class:`GapOptions`."""
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    input_argument(parser, "--hypotheses", required=True, type=Path)
    add_out_argument(parser, "report JSON (per-utterance counts go to OUT.counts.jsonl)", sidecars=lambda out: [counts_path(out)])
    add_options(parser, GapOptions)
    return parser


def _run(args: argparse.Namespace, groups: tuple[str, ...]) -> int:
    rows = read_hypotheses(args.hypotheses)
    scoring = Scoring(args.normalizer, args.cer_spaces)
    attribute = hypotheses_attribute(args.hypotheses, args.attribute, args.labels) if args.attribute else None
    report, counts = gap_report(
        rows, groups, args.iterations, args.seed, scoring, args.gap_estimate, args.hypotheses, compare=args.interval_of, attribute=attribute
    )
    for language, entry in report["languages"].items():
        summary = ", ".join(f"{g} {v['error_rate']:.2f} %" for g, v in entry["groups"].items())
        pairs = [(groups, entry)] if "comparisons" not in entry else [((a, entry["reference"]), gaps) for a, gaps in entry["comparisons"].items()]
        unlabelled = f"; left out {entry['unlabelled']} without {args.attribute}" if "unlabelled" in entry else ""
        print(
            f"[asr_gap] {language} {entry['metric'].upper()}: {summary}; {'; '.join(gap_summary(gaps, pair) + delta_rel_text(gaps) for pair, gaps in pairs)}; "
            f"dropped {entry['dropped_empty_reference']} empty references{unlabelled}"
        )
    counts_path = save_gap_report(report, counts, args.out)
    print(f"[asr_gap] wrote {args.out} and {counts_path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    groups = two_groups(parser, ",".join(args.groups)) if args.attribute is None else attribute_groups(parser, args, argv)
    if args.labels and args.attribute is None:
        parser.error("--labels gives the manifest of an --attribute; gender is in the hypotheses themselves")
    if iterations_problem(args.iterations):
        parser.error(f"--{iterations_problem(args.iterations)}")
    if (problem := field_problem(GapOptions, "seed", args.seed)) is not None:
        parser.error(f"--seed {args.seed}: {problem}")
    return run_cli(lambda: _run(args, groups))


def attribute_groups(parser: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str] | None) -> tuple[str, ...]:
    """``--groups`` as two or more different values of ``--attribute`` (taken as the manifest spells them), given explicitly."""
    try:
        check_attribute_name(args.attribute)
    except LabelError as error:
        parser.error(f"--attribute: {error}")
    if not flag_given(argv, "--groups"):
        parser.error(f"--attribute {args.attribute} needs --groups: two or more of its values, e.g. --groups A,B (E(A, B)) or A,B,C (A and B each against C)")
    groups = tuple(group.strip() for group in args.groups)
    if len(groups) < 2 or len(set(groups)) < len(groups) or "" in groups:
        parser.error(f"--groups takes two or more different values of {args.attribute}, got {','.join(groups)}")
    return groups


if __name__ == "__main__":
    sys.exit(main())
