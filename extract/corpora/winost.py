"""WinoMT and WinoST (Stanovsky et al. 2019; Costa-jussà et al. 2022): the one home of the aggregate format.

WinoMT ships its sentences as aggregate files (``data/aggregates/en.txt``, ``en_pro.txt``,
``en_anti.txt`` in gabrielStanovsky/mt_gender): no header, one sentence per line, four
tab-separated fields::

    female	1	The developer argued with the designer because she did not like the design.	The developer

the gold gender of the entity (``male``, ``female`` or ``neutral``), the 0-based index of the
entity's word among the sentence's whitespace-separated tokens, the sentence, and the profession
(``The developer``, ``the designer`` or ``developer``: its article and case vary between files).
``en_pro.txt`` and ``en_anti.txt`` list the pro- and anti-stereotypical sentences in the same format.

WinoST is WinoMT read aloud (one WAV per sentence of ``en.txt``). :func:`winost` makes a manifest
of it: the WAV of line N is ``wav_template`` filled with ``line`` = N (and ``id``), or, without a
template, the N-th WAV of the folder in natural order (``2.wav`` before ``10.wav``). Each
utterance's id is :func:`sentence_id` of its line, which is how ``experiments.winomt`` matches
transcribe's rows back to the sentences. The manifest's ``gender`` is the speaker's (WinoST's
reader is one American woman); the entity's gold gender is in ``extra``.

Read here by the recipe and by the scorer (``experiments.scoring.winomt``); written by
:func:`write_aggregate` (the demo's WinoST-style set).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from extract.corpora.base import AdapterResult, Collector, Recipe, argument
from extract.manifest import ManifestError, iter_text_lines

GOLD_GENDERS = ("male", "female", "neutral")
ARTICLES = ("the", "a", "an")
FIELDS = 4


@dataclass(frozen=True)
class Sentence:
    """One line of an aggregate file; ``stereotype`` is ``pro``, ``anti`` or ``none`` once the sets are matched."""

    line: int
    gender: str
    index: int
    text: str
    profession: str
    stereotype: str = "none"

    @property
    def id(self) -> str:
        return sentence_id(self.line)

    @property
    def key(self) -> tuple[str, int, str]:
        """What identifies the sentence across en.txt and the pro/anti files (their profession columns differ)."""
        return self.gender, self.index, self.text

    @property
    def entity_indices(self) -> list[int]:
        """The entity's token and the article before it, as WinoMT aligns them (``the developer`` -> both)."""
        words = self.text.split()
        article = self.index > 0 and words[self.index - 1].lower() in ARTICLES
        return [self.index - 1, self.index] if article else [self.index]

    @property
    def profession_words(self) -> list[str]:
        """The profession column lower-cased without its leading article (``The construction worker`` -> construction worker)."""
        words = self.profession.lower().split()
        return words[1:] if len(words) > 1 and words[0] in ARTICLES else words


def sentence_id(line: int) -> str:
    """The utterance id of an aggregate file's line (1-based)."""
    return f"winost-{line:04d}"


def read_aggregate(path: str | Path) -> list[Sentence]:
    """The sentences of an aggregate file. A line without exactly four tab-separated fields, a gender
    other than male/female/neutral, an index that is not a token of its sentence, or an empty
    profession (never recognised in a transcript, it would read as a recognition error) is an error
    naming the file and line; blank lines are skipped (the others keep their line numbers)."""
    path = Path(path)
    sentences = []
    for number, raw in iter_text_lines(path):
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != FIELDS:
            raise ManifestError(path, number, f"expected {FIELDS} tab-separated fields (gender, index, sentence, profession), got {len(fields)}")
        gender, index, text, profession = (field.strip() for field in fields)
        if gender.lower() not in GOLD_GENDERS:
            raise ManifestError(path, number, f"gender {gender!r} is not one of {', '.join(GOLD_GENDERS)}")
        if not index.isdigit():
            raise ManifestError(path, number, f"index {index!r} is not a 0-based token index")
        words = text.split()
        if int(index) >= len(words):
            raise ManifestError(path, number, f"index {index} is outside its sentence ({len(words)} whitespace-separated tokens, counted from 0): {text!r}")
        if not profession:
            raise ManifestError(path, number, "the profession field is empty; WinoMT's fourth field names the entity's profession (e.g. 'the developer')")
        sentences.append(Sentence(number, gender.lower(), int(index), text, profession))
    if not sentences:
        raise ManifestError(path, None, "holds no sentences (empty file); expected WinoMT's tab-separated gender, index, sentence, profession")
    return sentences


def write_aggregate(path: str | Path, sentences: Iterable[Sentence]) -> Path:
    """Sentences in the aggregate format, one line each, in the order given."""
    path = Path(path)
    lines = []
    for sentence in sentences:
        fields = (sentence.gender, str(sentence.index), sentence.text, sentence.profession)
        if any(character in field for field in fields for character in "\t\r\n"):
            raise ValueError(f"sentence {sentence.text!r}: a field holds a tab or line break, which the format cannot hold")
        lines.append("\t".join(fields) + "\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines), encoding="utf-8")
    return path


def _natural_key(path: Path) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name)]


def winost(
    aggregate: str | Path, wav_dir: str | Path, wav_template: str | None = None, speaker: str = "winost-reader", speaker_gender: str = "female"
) -> AdapterResult:
    """WinoST audio as a manifest: one utterance per sentence of ``aggregate`` (see the module docstring).

    ``wav_template`` (e.g. ``"{line}.wav"``, ``"en_{line:04d}.wav"``) names each line's WAV, and a
    missing one is reported as missing audio; without it, the folder must hold exactly one WAV per
    sentence, paired in natural order.
    """
    aggregate, wav_dir = Path(aggregate), Path(wav_dir)
    sentences = read_aggregate(aggregate)
    if wav_template is None:
        wavs = sorted(wav_dir.glob("*.wav"), key=_natural_key)
        if len(wavs) != len(sentences):
            raise ManifestError(
                wav_dir,
                None,
                f"holds {len(wavs)} WAV files for the {len(sentences)} sentences of {aggregate}; "
                "pairing by order needs one per sentence: give --wav-template (e.g. '{line}.wav') to name each line's file",
            )
    else:
        try:
            wavs = [wav_dir / wav_template.format(line=sentence.line, id=sentence.id) for sentence in sentences]
        except (KeyError, IndexError, ValueError) as error:
            raise ManifestError(aggregate, None, f"--wav-template {wav_template!r} does not format ({error}); use the fields {{line}} and {{id}}") from None
    collector = Collector(aggregate)
    for sentence, wav in zip(sentences, wavs):
        collector.add(
            sentence.line,
            id=sentence.id,
            audio=str(wav),
            language="en",
            text=sentence.text,
            gender=speaker_gender,
            speaker=speaker,
            split="test",
            dataset="winost",
            extra={"line": sentence.line, "gold_gender": sentence.gender, "entity_index": sentence.index, "profession": sentence.profession},
        )
    return collector.result


RECIPES = (
    Recipe(
        "winost",
        "WinoST: WinoMT's aggregate file (en.txt) with one WAV per line",
        winost,
        (
            argument("tsv", keyword="aggregate", reads=True, metavar="AGGREGATE", help="en.txt: gender, index, sentence, profession per line"),
            argument("--wav-dir", reads=True, required=True, help="the folder of WAV files"),
            argument(
                "--wav-template", help="each line's WAV name, e.g. '{line}.wav' (1-based line) or '{id}.wav'; default: the folder's WAVs in natural order"
            ),
            argument("--speaker", default="winost-reader"),
            argument("--speaker-gender", default="female", help="the reader's gender (WinoST: female)"),
        ),
    ),
)
