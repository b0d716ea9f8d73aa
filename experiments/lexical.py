"""``python -m experiments.lexical``: POS counts, named entities and lexical density of each record's
reference text (Attanasio et al. 2024, §5.2), with any spaCy pipeline.

    python -m experiments.lexical --manifest M.jsonl --spacy-model fr_core_news_md --language fr --out lexical-fr.jsonl

One JSONL row per record of ``--language`` (every record when the manifest holds one language):
``features`` with ``pos_<TAG>`` for the 17 universal POS tags, ``entities`` and ``ent_<LABEL>``,
``words``, ``lexical_density`` (content words NOUN PROPN VERB ADJ ADV over words) and
``lexical_complexity`` (content over PRON AUX CCONJ DET PART, the paper's appendix ratio); nulls have
their reason under ``null_reasons``. Definitions: ``experiments.analysis.lexical``.
"""

from __future__ import annotations

import argparse
from collections import Counter

from experiments.analysis.lexical import entity_labels, load_pipeline, write_lexical_rows
from experiments.analysis_options import LexicalOptions
from experiments.cli import CommandParser, add_out_argument, add_quiet_argument, add_reclaim_stale_argument, command_main, fail, input_argument
from experiments.options import add_options, from_args
from extract.appendlog import AppendLog, RowKind
from extract.manifest import read_manifest

LEXICAL_ROWS = RowKind("lexical feature row", ("id", "features"), unique="id")


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    input_argument(parser, "--manifest", required=True, help="utterance manifest (JSONL); the text analysed is each record's reference `text`")
    add_out_argument(parser, "feature rows (JSONL)")
    add_options(parser, LexicalOptions)
    add_quiet_argument(parser)
    add_reclaim_stale_argument(parser)
    return parser


def _run(args: argparse.Namespace) -> int:
    options = from_args(LexicalOptions, args)
    utterances = read_manifest(args.manifest)
    languages = Counter(u.language for u in utterances)
    if options.language is None and len(languages) > 1:
        return fail(f"{args.manifest} holds {len(languages)} languages ({', '.join(sorted(languages))}); name one with --language and its pipeline")
    if options.language is not None:
        if options.language not in languages:
            return fail(f"{args.manifest} has no record in language {options.language!r}; it has {', '.join(sorted(languages))}")
        utterances = [u for u in utterances if u.language == options.language]
    with AppendLog(args.out, LEXICAL_ROWS, args.reclaim_stale):  # one writer; a file of another kind at --out is refused, never replaced
        nulls = _write_rows(args, options, utterances)
    for reason, count in sorted(nulls.items()):
        print(f"  null for {count} record(s): {reason}")
    print(f"[lexical] wrote {args.out}")
    return 0


def _write_rows(args: argparse.Namespace, options: LexicalOptions, utterances: list) -> Counter:
    """Writes every record's row to ``args.out``; returns the nulls by feature and reason."""
    nlp = load_pipeline(options.spacy_model, utterances[0].language)  # one language: --language or the manifest's only one
    labels = entity_labels(nlp)
    print(
        f"[lexical] {len(utterances)} records ({', '.join(sorted({u.language for u in utterances}))}) with {options.spacy_model} "
        f"{nlp.meta.get('version', '')}; entities: {', '.join(labels) if labels is not None else 'none (the pipeline has no ner)'}"
    )
    return write_lexical_rows(utterances, nlp, options.spacy_model, args.out, options.batch_size, not args.quiet)


main = command_main(build_parser, _run, module=__name__)
