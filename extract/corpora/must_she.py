"""MuST-SHE (Bentivogli et al. 2020): the one home of its TSV format, read and written.

A MuST-SHE definition is a tab-separated file with a header (no quoting): per sentence its ``ID``,
language pair ``LANG`` (``en-it``), ``TALK``, source ``SRC``, correct reference ``REF`` and the
reference with the speaker's gender swapped ``WRONG-REF``, ``SPEAKER``, the speaker's ``GENDER``
(``She`` or ``He``), the ``CATEGORY`` (``1F``, ``1M``: first-person references to the speaker,
whose gender only the audio tells; ``2F``, ``2M``: gender given by the text), ``TEXT-CATEGORY``
and ``GENDERTERMS``: ``correct wrong`` word pairs separated by ``;``.

Read here by the corpus recipe (:func:`must_she`: a manifest over ``wav/{ID}.wav``) and by the
scorer (:func:`read_definition`, used by ``experiments.scoring.mustshe``); written by
:func:`write_definition` (the demo corpus).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from extract.corpora.base import AdapterResult, Collector, Recipe, argument, read_tsv
from extract.errors import UserError

COLUMNS = ("ID", "LANG", "TALK", "SRC", "REF", "WRONG-REF", "SPEAKER", "GENDER", "CATEGORY", "TEXT-CATEGORY", "GENDERTERMS")
RECIPE_COLUMNS = ("ID", "LANG", "TALK", "SRC", "REF", "SPEAKER", "GENDER", "CATEGORY", "GENDERTERMS")  # a manifest needs these
DEFINITION_COLUMNS = ("CATEGORY", "GENDER", "GENDERTERMS")  # scoring needs these
CATEGORIES = ("1F", "1M", "2F", "2M")
SPEAKER_GENDERS = {"she": "She", "he": "He"}  # GENDER values (any case) -> the speaker-gender groups
TERM_SEPARATOR = ";"


class MustSheError(UserError, ValueError):
    pass


@dataclass(frozen=True)
class Entry:
    """One sentence of a definition: its category, speaker gender and ``(correct, wrong)`` term pairs."""

    category: str
    gender: str
    terms: tuple[tuple[str, str], ...]
    id: str = ""


def parse_gender_terms(text: str, where: str) -> tuple[tuple[str, str], ...]:
    """``"Correct wrong;correct wrong"`` as lower-cased pairs; anything but a pair is an error naming ``where``."""
    pairs = []
    for term in text.strip().lower().split(TERM_SEPARATOR):
        forms = term.split()
        if len(forms) != 2:
            raise MustSheError(f"{where}: GENDERTERMS entry {term!r} is not a 'correct wrong' pair")
        pairs.append((forms[0], forms[1]))
    return tuple(pairs)


def format_gender_terms(pairs: Iterable[tuple[str, str]]) -> str:
    """The GENDERTERMS cell of ``(correct, wrong)`` pairs."""
    return TERM_SEPARATOR.join(f"{correct} {wrong}" for correct, wrong in pairs)


def category_number(category: str) -> str:
    """``1F`` -> ``1``: the leading digits (MuST-SHE's category without the speaker's gender);
    a name without leading digits stands for itself."""
    match = re.match(r"\d+", category)
    return match.group() if match else category


def read_definition(path: str | Path) -> list[Entry]:
    """The definition's entries for scoring. A missing column or a row with the wrong number of
    fields (:class:`ManifestError`), a malformed pair, a repeated ID (both lines named) or a file
    without entries (:class:`MustSheError`) is an error."""
    path = Path(path)
    entries, first_line = [], {}
    for line, row in read_tsv(path, DEFINITION_COLUMNS):
        pairs = parse_gender_terms(row["GENDERTERMS"], f"{path}:{line}")
        identifier = (row.get("ID") or str(len(entries) + 1)).strip()
        if identifier in first_line:
            raise MustSheError(f"{path}:{line}: duplicate ID {identifier!r}, first on {path}:{first_line[identifier]}")
        first_line[identifier] = line
        entries.append(Entry(row["CATEGORY"].strip(), row["GENDER"].strip(), pairs, identifier))
    if not entries:
        raise MustSheError(f"{path}: holds no MuST-SHE entries (only a header or empty); check the path")
    return entries


def write_definition(path: str | Path, rows: Iterable[Mapping[str, str]]) -> Path:
    """A definition with :data:`COLUMNS` in the release's order, one row per mapping. A missing
    column, a cell holding a tab or a line break (the format has no quoting) or GENDERTERMS that
    do not parse is an error naming the row."""
    path = Path(path)
    lines = ["\t".join(COLUMNS)]
    for number, row in enumerate(rows, start=1):
        missing = [column for column in COLUMNS if column not in row]
        if missing:
            raise MustSheError(f"MuST-SHE row {number}: missing column(s) {', '.join(missing)}")
        broken = [column for column in COLUMNS if any(character in row[column] for character in "\t\r\n")]
        if broken:
            raise MustSheError(f"MuST-SHE row {number}: {', '.join(broken)} hold(s) a tab or line break, which the format cannot quote")
        parse_gender_terms(row["GENDERTERMS"], f"MuST-SHE row {number}")
        lines.append("\t".join(row[column] for column in COLUMNS))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def must_she(tsv: str | Path, wav_dir: str | Path | None = None, split: str = "test") -> AdapterResult:
    """A MuST-SHE definition as a manifest over ``wav/{ID}.wav`` (or ``wav_dir``)."""
    tsv = Path(tsv)
    wavs = Path(wav_dir) if wav_dir else tsv.parent / "wav"
    collector = Collector(tsv)
    for line, row in read_tsv(tsv, RECIPE_COLUMNS):
        pair = row["LANG"].strip()
        collector.add(
            line,
            id=row["ID"],
            audio=str(wavs / f"{row['ID']}.wav"),
            language=pair.split("-")[0] or "en",
            text=row["SRC"],
            translation=row["REF"],
            gender=row["GENDER"],
            speaker=row["SPEAKER"] or f"talk-{row['TALK']}",
            split=split,
            dataset="must_she",
            extra={
                "pair": pair,
                "talk": row["TALK"],
                "category": row["CATEGORY"],
                "genderterms": row["GENDERTERMS"],
                "wrong_reference": row.get("WRONG-REF", ""),
                "text_category": row.get("TEXT-CATEGORY", ""),
            },
        )
    return collector.result


RECIPES = (Recipe("must_she", "MuST-SHE TSV with wav/", must_she, (argument("tsv", reads=True), argument("--wav-dir", reads=True))),)
