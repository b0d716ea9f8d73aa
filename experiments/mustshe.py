"""``python -m experiments.mustshe``: term coverage and gender accuracy on MuST-SHE.

    python -m experiments.mustshe --definition MONOLINGUAL.it_v1.2.tsv --hypotheses HYP.txt [--pretokenized] [--lang it] --json OUT.json

The official evaluation's semantics (Gaido et al. 2020, FBK's mustshe_gender_accuracy.py): each
hypothesis is Moses-tokenized for the target language (sacremoses, no entity escaping) unless
``--pretokenized``, lower-cased and split on whitespace. GENDERTERMS holds ``correct wrong`` pairs
separated by ``;``. For each pair in order, the correct form is looked for and, if found, that one
token is removed; then the wrong form is looked for the same way; the term counts as found if
either was (both can be counted). Coverage = found / terms; accuracy = correct / (correct + wrong),
and 0 where nothing was found. Scores are in percent.

The JSON holds these scores per category (``categories``: 1F, 1M, 2F, 2M), per speaker gender
(``genders``), per category number (``category_numbers``: "1" pools 1F and 1M), for category 1
alone (``category_1``: first-person references to the speaker, the accuracy Fucci et al. 2025
correlate with probe F1; null when the definition has no category-1 entry) and ``global``.
Hypothesis ids that the definition lacks are not scored: they are counted on stderr and listed in
``unmatched_hypotheses``.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from extract.manifest import ManifestError, align_by_id, iter_text_lines, read_keyed_rows

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
    """The MuST-SHE TSV's entries; a malformed pair, a repeated ID (both lines named) or a file
    without entries is an error."""
    entries, first_line = [], {}
    reader = csv.DictReader((line for _, line in iter_text_lines(path)), delimiter="\t", quoting=csv.QUOTE_NONE)
    missing = [c for c in ("CATEGORY", "GENDER", "GENDERTERMS") if c not in (reader.fieldnames or [])]
    if missing:
        raise MustSheError(f"{path}:1: missing column(s) {', '.join(missing)}")
    for row in reader:
        if any(row[c] is None for c in ("CATEGORY", "GENDER", "GENDERTERMS")):
            raise MustSheError(f"{path}:{reader.line_num}: expected {len(reader.fieldnames)} tab-separated fields")
        pairs = []
        for term in row["GENDERTERMS"].strip().lower().split(";"):
            forms = term.split()
            if len(forms) != 2:
                raise MustSheError(f"{path}:{reader.line_num}: GENDERTERMS entry {term!r} is not a 'correct wrong' pair")
            pairs.append((forms[0], forms[1]))
        identifier = (row.get("ID") or str(len(entries) + 1)).strip()
        if identifier in first_line:
            raise MustSheError(f"{path}:{reader.line_num}: duplicate ID {identifier!r}, first on {path}:{first_line[identifier]}")
        first_line[identifier] = reader.line_num
        entries.append(Entry(row["CATEGORY"].strip(), row["GENDER"].strip(), tuple(pairs), identifier))
    if not entries:
        raise MustSheError(f"{path}: holds no MuST-SHE entries (only a header or empty); check the path")
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


def category_number(category: str) -> str:
    """``1F`` -> ``1``: the leading digits (MuST-SHE's category without the speaker's gender);
    a name without leading digits stands for itself."""
    match = re.match(r"\d+", category)
    return match.group() if match else category


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
    numbers: dict[str, Counts] = {}
    for name, counts in categories.items():
        numbers.setdefault(category_number(name), Counts()).add(counts)
    return {
        "categories": {name: counts.scores() for name, counts in sorted(categories.items())},
        "category_numbers": {name: counts.scores() for name, counts in sorted(numbers.items())},
        "category_1": numbers["1"].scores() if "1" in numbers else None,
        "genders": {name: counts.scores() for name, counts in genders.items()},
        "global": total.scores(),
    }


def read_hypotheses(path: Path, entries: list[Entry]) -> tuple[list[str], list[str]]:
    """The hypotheses in the definition's order, and the ids of hypotheses the definition lacks.

    A plain file holds one hypothesis per line, aligned with the definition (an empty line is an
    empty hypothesis, the final newline ends the last one; no ids, so nothing is unmatched). A
    ``.jsonl`` file holds ``experiments.transcribe`` rows matched by ``id`` through the shared
    id-keyed reader: a duplicate id, a row without ``hypothesis``, a hypothesis that is not a string
    or a definition id without a row is an error.
    """
    if path.suffix == ".jsonl":
        rows = read_keyed_rows(path, required=("hypothesis",), strings=("hypothesis",), what="hypothesis row")
        aligned, unmatched = align_by_id(rows, [entry.id for entry in entries], path)
        return [row["hypothesis"] for row in aligned], unmatched
    text = "".join(line for _, line in iter_text_lines(path))
    if not text:
        raise MustSheError(f"{path}: holds no hypotheses (empty file); check the path or rerun the translation")
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    return (lines[:-1] if text.endswith("\n") else lines), []


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
        hypotheses, unmatched = read_hypotheses(args.hypotheses, entries)
        result = score(entries, hypotheses, args.lang, args.pretokenized)
    except (MustSheError, ManifestError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if unmatched:
        result["unmatched_hypotheses"] = {"count": len(unmatched), "ids": unmatched}
        print(f"warning: {len(unmatched)} hypothesis id(s) in {args.hypotheses} are not in {args.definition} and are not scored, "
              f"e.g. {unmatched[:3]}", file=sys.stderr)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2))
    sentences = args.json.with_name(args.json.stem + ".sentences.jsonl")
    rows = sentence_rows(entries, hypotheses, args.lang, args.pretokenized)
    sentences.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    for name, scores in result["categories"].items():
        print(f"[mustshe] {name}: coverage {scores['coverage']:.2f}, accuracy {scores['accuracy']:.2f}")
    first_person = result["category_1"]
    if first_person is None:
        print("[mustshe] category 1 (1F + 1M): no entries in the definition")
    else:
        print(f"[mustshe] category 1 (1F + 1M): coverage {first_person['coverage']:.2f}, accuracy {first_person['accuracy']:.2f}")
    print(f"[mustshe] global: coverage {result['global']['coverage']:.2f}, accuracy {result['global']['accuracy']:.2f}; wrote {args.json} and {sentences.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
