"""``python -m experiments.manifest FORMAT ... --out M.jsonl``: native corpus files to a manifest.

Rows whose audio file is missing are listed on stderr and counted, never dropped silently; with
``--strict`` any missing audio is an error. Gender values outside the alias table
(``extract.manifest.GENDER_ALIASES``) become ``unknown``; the summary counts them per value. A
source that gives no utterance is an error, not an empty manifest. The recipes are
``extract.corpora.<format>``; ``--target-language`` is a deprecated spelling of ``--tgt-lang``.
"""

from __future__ import annotations

import argparse
import sys

from experiments.cli import CommandParser, add_out_argument, add_tgt_lang_argument, fail, input_argument, run_cli
from extract import corpora
from extract.corpora.base import AdapterResult
from extract.manifest import write_manifest


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    formats = parser.add_subparsers(dest="format", required=True)

    def add(name, help_text):
        sub = formats.add_parser(name, help=help_text)
        add_out_argument(sub, "manifest to write (JSONL)")
        sub.add_argument("--strict", action="store_true", help="fail if any audio file is missing")
        return sub

    sub = add("common_voice", "Common Voice TSV (client_id, path, sentence, gender)")
    input_argument(sub, "tsv"), sub.add_argument("--language", required=True), input_argument(sub, "--clips-dir")
    sub = add("fleurs", "Fleurs TSV")
    input_argument(sub, "tsv"), sub.add_argument("--language", required=True), input_argument(sub, "--audio-dir")
    sub = add("voxpopuli", "VoxPopuli asr_{split}.tsv")
    input_argument(sub, "tsv"), sub.add_argument("--language", required=True), input_argument(sub, "--audio-dir", required=True)
    sub = add("must_c", "MuST-C split folder (txt/{split}.yaml, wav/)")
    input_argument(sub, "split_dir"), sub.add_argument("--split-name", required=True)
    add_tgt_lang_argument(sub, ("--target-language",), "target language of the translations (txt/{split}.{tgt})", required=True)
    input_argument(sub, "--speakers", required=True, help="MuST-Speaker-style TSV")
    sub = add("must_she", "MuST-SHE TSV with wav/")
    input_argument(sub, "tsv"), input_argument(sub, "--wav-dir")
    sub = add("winost", "WinoST: WinoMT's aggregate file (en.txt) with one WAV per line")
    input_argument(sub, "tsv", metavar="AGGREGATE", help="en.txt: gender, index, sentence, profession per line")
    input_argument(sub, "--wav-dir", required=True, help="the folder of WAV files")
    sub.add_argument("--wav-template", help="each line's WAV name, e.g. '{line}.wav' (1-based line) or '{id}.wav'; default: the folder's WAVs in natural order")
    sub.add_argument("--speaker", default="winost-reader"), sub.add_argument("--speaker-gender", default="female", help="the reader's gender (WinoST: female)")
    sub = add("tsv", "generic TSV whose header uses the manifest keys")
    input_argument(sub, "tsv"), sub.add_argument("--language"), sub.add_argument("--dataset", default="")
    sub = add("jsonl", "generic JSONL whose keys are the manifest keys")
    input_argument(sub, "jsonl"), sub.add_argument("--language"), sub.add_argument("--dataset", default="")
    return parser


def _adapt(args) -> AdapterResult:
    if args.format == "common_voice":
        return corpora.common_voice(args.tsv, args.language, args.clips_dir)
    if args.format == "fleurs":
        return corpora.fleurs(args.tsv, args.language, args.audio_dir)
    if args.format == "voxpopuli":
        return corpora.voxpopuli(args.tsv, args.language, args.audio_dir)
    if args.format == "must_c":
        return corpora.must_c(args.split_dir, args.split_name, args.tgt_lang, args.speakers)
    if args.format == "must_she":
        return corpora.must_she(args.tsv, args.wav_dir)
    if args.format == "winost":
        return corpora.winost(args.tsv, args.wav_dir, args.wav_template, args.speaker, args.speaker_gender)
    defaults = {key: value for key, value in (("language", args.language), ("dataset", args.dataset)) if value}
    if args.format == "tsv":
        return corpora.generic_tsv(args.tsv, **defaults)
    return corpora.generic_jsonl(args.jsonl, **defaults)


def _source(args) -> str:
    return getattr(args, "tsv", None) or getattr(args, "jsonl", None) or args.split_dir


def _run(args) -> int:
    result = _adapt(args)
    for missing in result.missing_audio:
        print(f"missing audio: {missing.source}:{missing.line} id={missing.id} {missing.audio}", file=sys.stderr)
    if not result.utterances:
        reason = f"all {len(result.missing_audio)} rows lack their audio file" if result.missing_audio else "it holds no rows"
        return fail(f"{_source(args)} gives no utterances ({reason}); no manifest written")
    if args.strict and result.missing_audio:
        return fail(f"{len(result.missing_audio)} rows have no audio file (--strict); no manifest written")
    write_manifest(args.out, result.utterances)
    print(f"{result.summary()}; wrote {args.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_cli(lambda: _run(args))


if __name__ == "__main__":
    sys.exit(main())
