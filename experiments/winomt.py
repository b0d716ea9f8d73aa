"""``python -m experiments.winomt``: WinoMT / WinoST gender accuracy, ΔG and ΔS (speech translation), or WinoST's ASR side.

    python -m experiments.winomt --source en.txt --pro en_pro.txt --anti en_anti.txt --translations T --tgt-lang fr \\
        [--alignments A] [--spacy-model M] --out RESULT.json
    python -m experiments.winomt --task asr --source en.txt --pro en_pro.txt --anti en_anti.txt --translations TRANSCRIPTS --out RESULT.json

Inputs as WinoMT ships them (gabrielStanovsky/mt_gender, data/aggregates): ``en.txt`` with
tab-separated gender, entity index, sentence and profession per line, and the pro- and
anti-stereotypical sets ``en_pro.txt`` / ``en_anti.txt`` in the same format. ``--translations`` is
``experiments.transcribe``'s JSONL (rows matched by id: ``winost-0001`` for line 1, as the
``winost`` manifest names them) or a plain file with one output per line of ``--source``.

Translation (``--task st``, the default): the entity and its article are aligned to the translation
with eflomal over the sentence pairs themselves (``--symmetrisation``; ``--extra-parallel`` adds
parallel text; ``--alignments`` uses precomputed Pharaoh links instead), the aligned words' gender is
read with spaCy (``--spacy-model``; default by ``--tgt-lang``), and the result holds ``accuracy``,
``f1_male``, ``f1_female``, ``delta_g``, ``accuracy_pro``, ``accuracy_anti``, ``delta_s``, ``n`` and
``unknown`` per gold gender (all scores in percent), per-group values and 95 % sentence-bootstrap
intervals. ``OUT.sentences.jsonl`` holds each sentence's entity, aligned words, read gender and
whether it is correct; ``OUT.alignments.txt`` the links used.

ASR (``--task asr``): whether each transcript's gendered pronouns are the source's and whether the
profession was recognised, as accuracies overall, per gold gender and per stereotype set.

A translation count that differs from the source, an entity index outside its sentence or an
alignment file of another line count is one line naming the file and line, exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from experiments.cli import CommandParser, add_out_argument, add_tgt_lang_argument, command_main, fail, input_argument
from experiments.format import number
from experiments.options import add_options, from_args
from experiments.scoring.grammatical_gender import DEFAULT_SPACY_MODELS, load_analyser
from experiments.scoring.mustshe import sentences_path
from experiments.scoring.winomt import alignments_path, evaluate_transcripts, evaluate_translations
from experiments.scoring.word_alignment import SYMMETRISATIONS, read_parallel
from extract.options import Checked, option, seed_option


@dataclass(frozen=True)
class WinoMTOptions(Checked):
    """Which side is scored, how the words are aligned and read, and the bootstrap of the intervals."""

    task: str = option("st", "st: gender of the translated entity (default); asr: pronoun and profession in transcripts", choices=("st", "asr"))
    symmetrisation: str = option("grow-diag-final-and", "how eflomal's two directions are combined (default grow-diag-final-and)", choices=SYMMETRISATIONS)
    spacy_model: str | None = option(
        None,
        "spaCy pipeline that reads grammatical gender (default by --tgt-lang: " + ", ".join(f"{k} {v}" for k, v in DEFAULT_SPACY_MODELS.items()) + ")",
    )
    iterations: int = option(1000, "sentence-bootstrap resamples for the 95 % intervals (default 1000; 0: none)", least=0)
    seed: int = seed_option("bootstrap seed (default 0)")


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    input_argument(parser, "--source", required=True, type=Path, help="WinoMT aggregate file (en.txt): gender, index, sentence, profession per line")
    input_argument(parser, "--pro", required=True, type=Path, help="the pro-stereotypical sentences in the same format (en_pro.txt)")
    input_argument(parser, "--anti", required=True, type=Path, help="the anti-stereotypical sentences in the same format (en_anti.txt)")
    input_argument(
        parser,
        "--translations",
        required=True,
        type=Path,
        help="transcribe's .jsonl (matched by id) or one output per line of --source (translations, or transcripts with --task asr)",
    )
    add_tgt_lang_argument(parser, (), "target language of the translations (required with --task st; picks the default spaCy pipeline)")
    input_argument(
        parser,
        "--alignments",
        type=Path,
        help="precomputed Pharaoh alignments (i-j, 0-based whitespace tokens), one line per sentence; default: align with eflomal",
    )
    input_argument(
        parser, "--extra-parallel", type=Path, help="more parallel text for eflomal, 'source ||| target' per line (aligned with the test pairs, then dropped)"
    )
    add_options(parser, WinoMTOptions)
    add_out_argument(
        parser,
        "result JSON (per-sentence rows go to OUT.sentences.jsonl, alignments to OUT.alignments.txt)",
        sidecars=lambda out: [sentences_path(out), alignments_path(out)],
    )
    return parser


def _print_st(result: dict, out: Path, sentences: Path) -> None:
    print(f"[winomt] accuracy {number(result['accuracy'])}, F1 male {number(result['f1_male'])}, F1 female {number(result['f1_female'])}")
    print(f"[winomt] ΔG {number(result['delta_g'])}")
    print(f"[winomt] pro {number(result['accuracy_pro'])} (n={result['n_pro']}), anti {number(result['accuracy_anti'])} (n={result['n_anti']})")
    print(f"[winomt] ΔS {number(result['delta_s'])}")
    unknown = ", ".join(f"{gender} {count}" for gender, count in result["unknown"].items())
    alignments = Path(result["settings"]["alignments_used"]).name
    print(f"[winomt] {result['n']} sentences, unknown gender read: {unknown}; wrote {out}, {sentences.name} and {alignments}")


def _print_asr(result: dict, out: Path, sentences: Path) -> None:
    print(
        f"[winomt] ASR: pronoun accuracy {number(result['pronoun_accuracy'])}, profession recognised {number(result['profession_accuracy'])}, "
        f"pronoun accuracy where recognised {number(result['pronoun_accuracy_profession_recognised'])}"
    )
    print(f"[winomt] pronoun accuracy pro {number(result['pronoun_accuracy_pro'])}, anti {number(result['pronoun_accuracy_anti'])}")
    print(f"[winomt] pronoun ΔS {number(result['pronoun_delta_s'])}; {result['n']} sentences; wrote {out} and {sentences.name}")


def _warn(result: dict, args: argparse.Namespace) -> None:
    for name, count in result["stereotype_lines_unmatched"].items():
        if count:
            print(f"note: {count} line(s) of --{name} match no sentence of {args.source} (expected when --source is a subset)", file=sys.stderr)
    if "unmatched_outputs" in result:
        ids = result["unmatched_outputs"]["ids"]
        print(f"warning: {len(ids)} row id(s) in {args.translations} are not sentences of {args.source} and are not scored, e.g. {ids[:3]}", file=sys.stderr)


def _run(args: argparse.Namespace) -> int:
    options = from_args(WinoMTOptions, args)
    if options.task == "asr":
        print(f"[winomt] ASR side: pronouns and professions of {args.translations} against {args.source}")
        result, sentences = evaluate_transcripts(args.source, args.pro, args.anti, args.translations, args.out, options.iterations, options.seed)
        _warn(result, args)
        _print_asr(result, args.out, sentences)
        return 0
    if not args.tgt_lang:
        return fail("--task st needs --tgt-lang (the language of the translations)")
    model = options.spacy_model or DEFAULT_SPACY_MODELS.get(args.tgt_lang)
    if model is None:
        return fail(f"no default spaCy pipeline for --tgt-lang {args.tgt_lang}; give --spacy-model (a pipeline with a morphologizer)")
    extra = read_parallel(args.extra_parallel) if args.extra_parallel else ()
    print(f"[winomt] gender accuracy of {args.translations} (en -> {args.tgt_lang}) against {args.source}, genders read by {model}")
    analyser = load_analyser(model, args.tgt_lang)
    result, sentences = evaluate_translations(
        args.source,
        args.pro,
        args.anti,
        args.translations,
        analyser,
        args.out,
        alignments=args.alignments,
        symmetrisation=options.symmetrisation,
        extra_parallel=extra,
        iterations=options.iterations,
        seed=options.seed,
        tgt_lang=args.tgt_lang,
        log=lambda message: print(f"[winomt] {message}"),
    )
    _warn(result, args)
    _print_st(result, args.out, sentences)
    return 0


main = command_main(build_parser, _run, module=__name__)
