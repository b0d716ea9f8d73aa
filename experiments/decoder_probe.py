"""``python -m experiments.decoder_probe``: speaker gender from the decoder's states at MuST-SHE's gendered words.

Example::

    python -m experiments.decoder_probe --store stores/seamless-decoder/mustshe-en-es --out results/decoder-probes.jsonl

Reads a store written by ``python -m experiments.decoder_states`` (rows are generated tokens) and
the manifest it was extracted from, with its MuST-SHE annotations. Per decoder site, a
speaker-disjoint logistic probe of the speaker's gender on the states at the gendered words of each
translation (the mean over a word's tokens, then over the sentence's words), and the same probe on
the mean over all its tokens; one probe row each, appended to ``--out`` (a rerun skips the rows
there). Utterances without a gendered word in their hypothesis are counted in each row (``words``).
See docs/stages/decoder.md.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from experiments.cli import CommandParser, add_out_argument, command_main, input_argument
from experiments.decoder.probe import DecoderProbeOptions
from experiments.options import add_options, from_args


def build_parser() -> argparse.ArgumentParser:
    """The store, the results file, then the options of :class:`DecoderProbeOptions`."""
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    input_argument(parser, "--store", required=True, type=Path, help="a decoder-state store (python -m experiments.decoder_states)")
    add_out_argument(parser, "probe rows JSONL (appended to; rows already there are skipped)")
    add_options(parser, DecoderProbeOptions)
    return parser


def _run(args: argparse.Namespace) -> int:
    options = from_args(DecoderProbeOptions, args)
    from experiments.decoder.probe import decoder_probe_rows
    from probing.results import append_lines, check_results_path, load_rows

    out = Path(args.out)
    written = 0
    check_results_path(out)
    done = set(load_rows(out)) if out.exists() else set()
    for row in decoder_probe_rows(args.store, options, done):
        append_lines(out, [json.dumps(row)])
        written += 1
        words = row["words"]
        print(
            f"  {row['config']['site']} {row['config']['probe']}: F1 {row['f1_macro']:.1f} "
            f"({row['splits']['test']['utterances']} test utterances; {words['with_word_located']} of {words['annotated']} annotated have a gendered word)"
        )
    print(f"[decoder_probe] wrote {written} rows to {out} ({len(done)} already there)")
    return 0


main = command_main(build_parser, _run, module=__name__)
