"""``python -m experiments.mustshe``: term coverage and gender accuracy on MuST-SHE.

    python -m experiments.mustshe --definition MONOLINGUAL.it_v1.2.tsv --hypotheses HYP.txt [--pretokenized] [--lang it] --json OUT.json

The official evaluation's semantics (Gaido et al. 2020, FBK's mustshe_gender_accuracy.py): each
hypothesis is Moses-tokenized for the target language (sacremoses, no entity escaping) unless
``--pretokenized``, lower-cased and split on whitespace. GENDERTERMS holds ``correct wrong`` pairs
separated by ``;``. For each pair in order, the correct form is looked for and, if found, that one
token is removed; then the wrong form is looked for the same way; the term counts as found if
either was (both can be counted). Coverage = found / terms; accuracy = correct / (correct + wrong),
and 0 where nothing was found. Scores are in percent.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from dataclasses import dataclass
from pathlib import Path

GENDER_GROUPS = {"she": "She", "he": "He"}


@dataclass(frozen=True)
class Entry:
    category: str
    gender: str
    terms: tuple[tuple[str, str], ...]
    id: str = ""


@dataclass
class Counts:
    terms: int = 0
    found: int = 0
    correct: int = 0
    wrong: int = 0

    def add(self, other: "Counts") -> None:
        self.terms += other.terms
        self.found += other.found
        self.correct += other.correct
        self.wrong += other.wrong

    def scores(self) -> dict:
        coverage = 100.0 * self.found / self.terms if self.terms else 0.0
        judged = self.correct + self.wrong
        accuracy = 100.0 * self.correct / judged if self.found and judged else 0.0
        return {"terms": self.terms, "found": self.found, "correct": self.correct, "wrong": self.wrong, "coverage": coverage, "accuracy": accuracy}


class MustSheError(ValueError):
    pass


def read_definition(path: Path) -> list[Entry]:
    entries = []
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        missing = [c for c in ("CATEGORY", "GENDER", "GENDERTERMS") if c not in (reader.fieldnames or [])]
        if missing:
            raise MustSheError(f"{path}:1: missing column(s) {', '.join(missing)}")
        for row in reader:
            pairs = []
            for term in row["GENDERTERMS"].strip().lower().split(";"):
                forms = term.split()
                if len(forms) != 2:
                    raise MustSheError(f"{path}:{reader.line_num}: GENDERTERMS entry {term!r} is not a 'correct wrong' pair")
                pairs.append((forms[0], forms[1]))
            entries.append(Entry(row["CATEGORY"].strip(), row["GENDER"].strip(), tuple(pairs), (row.get("ID") or str(len(entries) + 1)).strip()))
    return entries


def _take(tokens: list[str], form: str) -> bool:
    """Remove the first occurrence of ``form`` from ``tokens``; True if there was one."""
    try:
        tokens.remove(form)
    except ValueError:
        return False
    return True


def sentence_counts(hypothesis_tokens: list[str], entry: Entry) -> Counts:
    tokens = list(hypothesis_tokens)
    counts = Counts(terms=len(entry.terms))
    for correct, wrong in entry.terms:
        found_correct = _take(tokens, correct)
        found_wrong = _take(tokens, wrong)
        counts.correct += found_correct
        counts.wrong += found_wrong
        counts.found += found_correct or found_wrong
    return counts


def tokenize(lines: list[str], language: str, pretokenized: bool) -> list[list[str]]:
    if pretokenized:
        return [line.lower().split() for line in lines]
    from sacremoses import MosesTokenizer

    tokenizer = MosesTokenizer(lang=language)
    return [tokenizer.tokenize(line, escape=False, return_str=True).lower().split() for line in lines]


def translation_gender(entry: Entry, counts: Counts) -> str:
    """The grammatical gender the translation gave the speaker: the correct form is feminine for a
    She entry and masculine for a He entry. ``mixed`` when both appear as often, ``none`` when no
    term was found."""
    feminine, masculine = (counts.correct, counts.wrong) if entry.gender.lower() == "she" else (counts.wrong, counts.correct)
    if feminine == masculine:
        return "none" if feminine == 0 else "mixed"
    return "feminine" if feminine > masculine else "masculine"


def sentence_rows(entries: list[Entry], hypotheses: list[str], language: str, pretokenized: bool = False) -> list[dict]:
    """Per sentence: id, speaker gender, counts and the translation's gender (the confusion figure's input)."""
    rows = []
    for tokens, entry in zip(tokenize(hypotheses, language, pretokenized), entries):
        counts = sentence_counts(tokens, entry)
        rows.append({"id": entry.id, "gender": entry.gender, "category": entry.category, "terms": counts.terms, "found": counts.found,
                     "correct": counts.correct, "wrong": counts.wrong, "translation_gender": translation_gender(entry, counts)})
    return rows


def score(entries: list[Entry], hypotheses: list[str], language: str, pretokenized: bool = False) -> dict:
    if len(entries) != len(hypotheses):
        raise MustSheError(f"{len(hypotheses)} hypotheses for {len(entries)} MuST-SHE entries: the files must align line by line")
    categories: dict[str, Counts] = {}
    genders = {name: Counts() for name in GENDER_GROUPS.values()}
    total = Counts()
    for tokens, entry in zip(tokenize(hypotheses, language, pretokenized), entries):
        counts = sentence_counts(tokens, entry)
        categories.setdefault(entry.category, Counts()).add(counts)
        group = GENDER_GROUPS.get(entry.gender.lower())
        if group:
            genders[group].add(counts)
        total.add(counts)
    return {
        "categories": {name: counts.scores() for name, counts in sorted(categories.items())},
        "genders": {name: counts.scores() for name, counts in genders.items()},
        "global": total.scores(),
    }


def read_hypotheses(path: Path, entries: list[Entry] | None = None) -> list[str]:
    """One hypothesis per line; an empty line is an empty hypothesis, the final newline ends the last one.
    A ``.jsonl`` file holds ``experiments.transcribe`` rows, put in the definition's order by id."""
    if path.suffix == ".jsonl":
        from extract.manifest import iter_json_objects

        by_id = {row["id"]: row["hypothesis"] or "" for _, row in iter_json_objects(path)}
        missing = [entry.id for entry in entries or [] if entry.id not in by_id]
        if missing:
            raise MustSheError(f"{path}: no hypothesis for {len(missing)} MuST-SHE id(s), e.g. {missing[:3]}")
        return [by_id[entry.id] for entry in entries or []]
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    return lines[:-1] if text.endswith("\n") else lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--definition", required=True, type=Path, help="MuST-SHE TSV")
    parser.add_argument("--hypotheses", required=True, type=Path, help="one translation per line, aligned with the TSV, or transcribe's .jsonl (matched by ID)")
    parser.add_argument("--pretokenized", action="store_true")
    parser.add_argument("--lang", default="it", help="target language for the Moses tokenizer")
    parser.add_argument("--json", required=True, type=Path)
    args = parser.parse_args(argv)
    try:
        entries = read_definition(args.definition)
        hypotheses = read_hypotheses(args.hypotheses, entries)
        result = score(entries, hypotheses, args.lang, args.pretokenized)
    except (MustSheError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2))
    sentences = args.json.with_name(args.json.stem + ".sentences.jsonl")
    rows = sentence_rows(entries, hypotheses, args.lang, args.pretokenized)
    sentences.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    for name, scores in result["categories"].items():
        print(f"[mustshe] {name}: coverage {scores['coverage']:.2f}, accuracy {scores['accuracy']:.2f}")
    print(f"[mustshe] global: coverage {result['global']['coverage']:.2f}, accuracy {result['global']['accuracy']:.2f}; wrote {args.json} and {sentences.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
