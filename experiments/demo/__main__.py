"""``python -m experiments.demo`` (what ``make demo`` runs): the demo corpus, then the demo as a study.

1. the synthetic demo corpus (Kokoro and espeak-ng voices, English and Spanish, MuST-SHE en-es),
   the controlled design; and the real voices (``experiments.recipes.realvoices``: 19 credited
   voices, 18 speakers, from Debian packages, 10 clips each, 3 with ``--trim``), the second corpus. Without
   ``apt-get`` access to Debian's archive the real voices are skipped, said in one line and in the
   report;
2. the demo's study file, ``WORK/demo.yaml`` (written by ``experiments.demo.work``, with
   absolute paths to the corpus), run in this process through ``experiments.study``: hidden states
   of every encoder layer of the bundled Whisper base and of its random-init twin on the pooled
   English and Spanish manifest, of the bundled Whisper tiny.en on its English utterances, of
   Whisper base on the MuST-SHE audio, and of the tiny random SeamlessM4T v2, S2T and ZeroSwot
   stand-in before/after the adapters (random weights, labelled so); transcripts (Whisper base,
   tiny.en) and Spanish output for MuST-SHE (the target language forced: Whisper has no trained
   en->es direction); ASR gaps per language with the published resampling and speaker bootstrap;
   MuST-SHE accuracy; per-position probes on every site (pretrained, random init, shuffled control),
   MDL on the last layer, per-language probes, an attention probe applied to MuST-SHE, attention
   probes on the tiny random models; on the real voices, Whisper base's transcripts and gaps per
   language and leave-one-speaker-out mean-pooled probes at every site beside the F0 baseline;
   ``collect``, correlations, the study's figures and ``RESULTS.md``;
3. the demo's richer ``report.md`` and figures, read from the study's collected results
   (``WORK/results/``) and the probe rows' arrays;
4. opt-in stages (``--extra NAME``, repeatable, or ``--extra all``; see ``experiments.demo.extras``),
   each appending its section to the report.

The synthetic voices' numbers show that the pipeline runs, not a finding about people; 19 real
voices, whose speaker, source, language and channel move together, cannot support one either.
``--trim`` runs everything on a few sentences and voices (what CI runs).

Everything is written under the cache (``$SPEECH_GENDER_CACHE``, default ``.cache/``), the report
and figures to ``WORK/report``; ``--out figures/demo`` (``make demo-figures``) refreshes the
committed README figures on purpose.

A rerun from an empty cache on the same machine gives the same numbers: every random draw is
seeded, espeak-ng speaks each utterance in a fresh process with a fixed noise seed (see
``recipes.democorpus.espeak``), and torch runs on a fixed number of CPU threads (``--threads``).
"""

from __future__ import annotations

import argparse

from experiments.cli import CommandParser, program_name, run_cli
from experiments.demo.pipeline import DemoOptions, run_demo
from experiments.options import add_options, from_args


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog=program_name("experiments.demo"), description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_options(parser, DemoOptions)
    return parser


def main(argv: list[str] | None = None) -> int:
    options = from_args(DemoOptions, build_parser().parse_args(argv))
    return run_cli(lambda: run_demo(options))


if __name__ == "__main__":
    raise SystemExit(main())
