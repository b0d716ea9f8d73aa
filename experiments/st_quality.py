"""``python -m experiments.st_quality``: BLEU, chrF and COMET of translations, overall and per speaker gender.

    python -m experiments.st_quality --hypotheses HYPS.jsonl --json OUT.json [--comet-model Unbabel/wmt22-comet-da | PATH] [--no-comet]

Rows are those of ``experiments.transcribe --task st``: ``reference`` (a string or a list of
references), ``hypothesis``, ``source`` (the transcript, for COMET), ``gender``, ``tgt_lang``; they are read with the
shared id-keyed reader (a duplicate id, a missing key, a null or numeric hypothesis or reference,
an empty file: an error naming the file and line, exit 2). BLEU and chrF come
from sacrebleu with references passed as a list of streams, and their signatures are recorded.
COMET loads a local checkpoint or a hub name (which needs the network); no COMET weights can be
fetched on the machines this package is tested on.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from extract.manifest import ManifestError, normalize_gender, read_keyed_rows

DEFAULT_COMET = "Unbabel/wmt22-comet-da"

Scorer = Callable[[list[dict]], list[float]]  # [{"src", "mt", "ref"}] -> segment scores


REQUIRED = ("reference", "hypothesis", "gender")


def _is_reference(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, list) and bool(value) and all(isinstance(r, str) for r in value))


def read_rows(path: Path) -> list[dict]:
    """``experiments.transcribe --task st`` rows; bad rows raise :class:`ManifestError` with file:line."""
    rows = []
    for number, row in read_keyed_rows(path, required=REQUIRED, strings=("hypothesis", "source"), what="translation row"):
        if not _is_reference(row["reference"]):
            raise ManifestError(path, number, f"reference must be a string or a non-empty list of strings, got {json.dumps(row['reference'], ensure_ascii=False)}; "
                                              "the manifest needs a translation for every utterance")
        try:
            row["gender"] = normalize_gender(row["gender"])
        except ValueError as error:
            raise ManifestError(path, number, str(error)) from error
        rows.append(row)
    return rows


def target_language(rows: list[dict], path: Path) -> str | None:
    """The rows' one ``tgt_lang`` (None when absent), which picks sacrebleu's tokenizer; several are an error."""
    languages = sorted({row["tgt_lang"] for row in rows if row.get("tgt_lang")})
    if len(languages) > 1:
        raise ManifestError(path, None, f"rows translate into several languages {languages}; score one target language per file")
    return languages[0] if languages else None


def reference_streams(references: list[str | list[str]]) -> list[list[str]]:
    """sacrebleu's layout: one stream per reference index; every segment needs the same count."""
    as_lists = [r if isinstance(r, list) else [r] for r in references]
    counts = {len(r) for r in as_lists}
    if len(counts) != 1:
        raise ValueError(f"every segment needs the same number of references, got {sorted(counts)}")
    return [list(stream) for stream in zip(*as_lists)]


def bleu_chrf(hypotheses: list[str], references: list[str | list[str]], target_language: str | None = None) -> dict:
    from sacrebleu.metrics import BLEU, CHRF

    streams = reference_streams(references)
    tokenize = {"ja": "ja-mecab", "zh": "zh", "ko": "ko-mecab"}.get(target_language or "", "13a")
    bleu, chrf = BLEU(tokenize=tokenize), CHRF()
    return {
        "bleu": bleu.corpus_score(hypotheses, streams).score,
        "chrf": chrf.corpus_score(hypotheses, streams).score,
        "bleu_signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
    }


def comet_scorer(model: str = DEFAULT_COMET, batch_size: int = 16, gpus: int = 0) -> Scorer:
    """A COMET scorer from a local checkpoint (a ``.ckpt`` or a folder holding ``checkpoints/model.ckpt``) or a hub name."""
    from comet import download_model, load_from_checkpoint

    path = Path(model)
    if path.is_dir():
        path = path / "checkpoints" / "model.ckpt"
    if not path.is_file():
        try:
            path = Path(download_model(model))
        except Exception as error:  # the hub client raises several types when offline
            raise RuntimeError(f"cannot load COMET model {model!r}: not a local checkpoint and the download failed ({error})") from error
    loaded = load_from_checkpoint(str(path))

    def score(segments: list[dict]) -> list[float]:
        return list(loaded.predict(segments, batch_size=batch_size, gpus=gpus, progress_bar=False).scores)

    return score


def evaluate(rows: list[dict], scorer: Scorer | None = None, target_language: str | None = None) -> dict:
    """Overall and per-gender BLEU, chrF and (with a scorer) COMET, in sacrebleu's and COMET's scales."""
    groups = {"all": rows}
    for row in rows:
        groups.setdefault(row["gender"], []).append(row)
    comet = None
    if scorer is not None:
        missing = [r["id"] for r in rows if not r.get("source")]
        if missing:
            raise ValueError(f"COMET needs the source transcript; rows without 'source': {missing[:5]}")
        scores = scorer([{"src": r["source"], "mt": r["hypothesis"], "ref": r["reference"] if isinstance(r["reference"], str) else r["reference"][0]} for r in rows])
        comet = {r["id"]: s for r, s in zip(rows, scores)}
    result = {}
    for name, members in groups.items():
        entry = {"segments": len(members), **bleu_chrf([m["hypothesis"] for m in members], [m["reference"] for m in members], target_language)}
        if comet is not None:
            entry["comet"] = 100.0 * sum(comet[m["id"]] for m in members) / len(members)
        result[name] = entry
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hypotheses", required=True, type=Path)
    parser.add_argument("--json", required=True, type=Path)
    parser.add_argument("--comet-model", default=DEFAULT_COMET, help="hub name or local checkpoint")
    parser.add_argument("--no-comet", action="store_true")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--gpus", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        rows = read_rows(args.hypotheses)
        language = target_language(rows, args.hypotheses)
        scorer = None if args.no_comet else comet_scorer(args.comet_model, args.batch_size, args.gpus)
        groups = evaluate(rows, scorer, language)
    except (ValueError, RuntimeError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    result = {"groups": groups, "target_language": language, "comet_model": None if args.no_comet else args.comet_model}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2))
    for name, entry in result["groups"].items():
        comet = f", COMET {entry['comet']:.2f}" if "comet" in entry else ""
        print(f"[st_quality] {name} ({entry['segments']}): BLEU {entry['bleu']:.2f}, chrF {entry['chrf']:.2f}{comet}")
    print(f"[st_quality] wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
