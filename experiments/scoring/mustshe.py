"""MuST-SHE term coverage and gender accuracy (the scorer; the TSV format is ``extract.corpora.must_she``).

The official evaluation's semantics (Gaido et al. 2020, FBK's mustshe_gender_accuracy.py): each
hypothesis is Moses-tokenized for the target language (sacremoses, no entity escaping) unless
pretokenized, lower-cased and split on whitespace. For each ``correct wrong`` pair in order, the
correct form is looked for and, if found, that one token is removed; then the wrong form is looked
for the same way; the term counts as found if either was (both can be counted). Coverage = found /
terms; accuracy = correct / (correct + wrong), and 0 where nothing was found. Scores are in percent.

Per-sentence counts are cached once; the scores per category, per category number, per speaker
gender and overall go through the group-metrics frame.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from sacremoses import MosesTokenizer

from experiments.results.records import MustSheScores
from experiments.scoring.group_metrics import GroupMetricFrame
from extract.corpora.must_she import SPEAKER_GENDERS, Entry, MustSheError, category_number
from extract.manifest import align_by_id, iter_text_lines, read_keyed_rows
from extract.provenance import hypotheses_file_subject, identified
from extract.records import schema_version, write_document, write_side_rows

COUNT_KEYS = ("terms", "found", "correct", "wrong")
SCORES_SCHEMA = schema_version("mustshe")  # the scores JSON's version (extract.records.FORMATS); files without ``schema`` read as version 1


@dataclass
class Counts:
    terms: int = 0
    found: int = 0
    correct: int = 0
    wrong: int = 0

    def scores(self) -> dict:
        coverage = 100.0 * self.found / self.terms if self.terms else 0.0
        judged = self.correct + self.wrong
        accuracy = 100.0 * self.correct / judged if self.found and judged else 0.0
        return {**asdict(self), "coverage": coverage, "accuracy": accuracy}


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


def matched_terms(hypothesis_tokens: list[str], entry: Entry) -> list[tuple[int, str]]:
    """Where :func:`sentence_counts` finds each term's forms: ``(token index, "correct" or "wrong")``
    for every form it takes, in its order. The same matching (each term's correct form, then its wrong
    form, takes the first token of that form not taken yet), keeping the token's place in the
    hypothesis: the decoder probe reads the states of these words (``experiments.decoder.words``)."""
    taken: set[int] = set()
    found = []
    for correct, wrong in entry.terms:
        for form, kind in ((correct, "correct"), (wrong, "wrong")):
            index = next((i for i, token in enumerate(hypothesis_tokens) if token == form and i not in taken), None)
            if index is not None:
                taken.add(index)
                found.append((index, kind))
    return found


def tokenize(lines: list[str], language: str, pretokenized: bool) -> list[list[str]]:
    if pretokenized:
        return [line.lower().split() for line in lines]
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
    """Per sentence: id, speaker gender, category, counts and the translation's gender (the confusion
    figure's input). The hypotheses must align with the entries one to one."""
    if len(entries) != len(hypotheses):
        raise MustSheError(f"{len(hypotheses)} hypotheses for {len(entries)} MuST-SHE entries: the files must align line by line")
    rows = []
    for tokens, entry in zip(tokenize(hypotheses, language, pretokenized), entries):
        counts = sentence_counts(tokens, entry)
        cells = {"id": entry.id, "gender": entry.gender, "category": entry.category, **asdict(counts)}
        rows.append(cells | {"translation_gender": translation_gender(entry, counts)})
    return rows


def summed_scores(columns) -> dict:
    """The group metric of MuST-SHE: coverage and accuracy of the summed per-sentence counts."""
    return Counts(*(int(np.sum(columns[key])) for key in COUNT_KEYS)).scores()


def score_sentences(rows: list[dict]) -> dict:
    """Scores per category (``categories``: 1F, 1M, 2F, 2M), per category number
    (``category_numbers``: "1" pools 1F and 1M), for category 1 alone (``category_1``: first-person
    references to the speaker; None without a category-1 sentence), per speaker gender (``genders``:
    She and He, also when empty) and overall (``global``), from :func:`sentence_rows`."""
    columns = {key: np.asarray([row[key] for row in rows], dtype=np.int64) for key in COUNT_KEYS}
    categories = [row["category"] for row in rows]
    numbers = [category_number(category) for category in categories]
    by_category = GroupMetricFrame(summed_scores, columns, categories, groups=sorted(set(categories)))
    by_number = GroupMetricFrame(summed_scores, columns, numbers, groups=sorted(set(numbers)))
    by_gender = GroupMetricFrame(summed_scores, columns, [SPEAKER_GENDERS.get(row["gender"].lower()) for row in rows], groups=list(SPEAKER_GENDERS.values()))
    category_numbers = by_number.by_group
    return {
        "categories": by_category.by_group,
        "category_numbers": category_numbers,
        "category_1": category_numbers.get("1"),
        "genders": {name: by_gender.evaluate(name) for name in by_gender.groups},
        "global": by_category.overall,
    }


def score(entries: list[Entry], hypotheses: list[str], language: str, pretokenized: bool = False) -> dict:
    """:func:`score_sentences` of the hypotheses, aligned with the entries."""
    return score_sentences(sentence_rows(entries, hypotheses, language, pretokenized))


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


def score_hypotheses(entries: list[Entry], path: Path, language: str, pretokenized: bool = False, definition: Path | None = None) -> tuple[dict, list[dict]]:
    """The scores (:func:`score_sentences`) and per-sentence rows of the hypotheses in ``path``
    (:func:`read_hypotheses`); ids the definition lacks are not scored, and listed in the scores'
    ``unmatched_hypotheses`` (count and ids). The scores are headed by :func:`extract.provenance.identified`
    (``tgt_lang`` ``language`` in their subject; ``definition``, the TSV the entries came from, and ``path`` their inputs)."""
    hypotheses, unmatched = read_hypotheses(path, entries)
    rows = sentence_rows(entries, hypotheses, language, pretokenized)
    subject = hypotheses_file_subject(path) | {"tgt_lang": language}
    result = identified(score_sentences(rows), SCORES_SCHEMA, [p for p in (definition, path) if p], subject, kind="mustshe")
    if unmatched:
        result["unmatched_hypotheses"] = {"count": len(unmatched), "ids": unmatched}
    return result, rows


def sentences_path(out: str | Path) -> Path:
    """Where the per-sentence rows of a MuST-SHE or WinoMT result ``out`` go (``OUT.sentences.jsonl``, ``OUT``'s suffix replaced)."""
    out = Path(out)
    return out.with_name(out.stem + ".sentences.jsonl")


def save_scores(result: dict, rows: list[dict], out: Path) -> Path:
    """Writes the scores to ``out`` (JSON) and the per-sentence rows beside it (:func:`sentences_path`, returned)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    write_document(MustSheScores.from_dict(result, str(out)), out)
    return write_side_rows(rows, sentences_path(out))
