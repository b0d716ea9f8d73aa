"""MuST-SHE's gendered words in a generated translation, and the decoder states at them.

A decoder-state store (``experiments.decoder_states``) holds one row per generated token with the
token's surface string (``ShardReader.tokens``). The gender-marked words of an utterance's MuST-SHE
annotation (``extra.category``, ``extra.genderterms``) are found in the hypothesis as the MuST-SHE
scorer finds them (:func:`experiments.scoring.mustshe.matched_terms`) and placed in the text
(:func:`word_spans`); a word's rows are those of the tokens that overlap it (:func:`tokens_of_span`;
a store written before ``holds_next`` misses a byte token holding part of one of its characters,
whose piece is empty). A word's state is the mean of its tokens' rows; an utterance's, the mean over
its words (:func:`utterance_features`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

POSITIONS = ("emitting", "reading")  # the row that generated a token; the row after it (the state that has read it)


@dataclass(frozen=True)
class GenderedWord:
    """A gender-marked form found in a hypothesis: the form, whether it is the term's correct or
    wrong form, and its characters in the text (None where Moses changed the token so that it is
    not a substring of the text)."""

    form: str
    kind: str
    span: tuple[int, int] | None


def _lowered(text: str) -> tuple[str, list[int]]:
    """``text`` lower-cased, and for each of its characters the index of the character of ``text``
    it came from (lower-casing can lengthen a character: ``İ`` becomes two)."""
    characters, origin = [], []
    for index, character in enumerate(text):
        for lowered in character.lower():
            characters.append(lowered)
            origin.append(index)
    return "".join(characters), origin


def token_spans(text: str, tokens: list[str]) -> list[tuple[int, int] | None]:
    """Each (lower-cased) token's characters in ``text``, searched in order from the end of the last
    one found; None for a token that is not a substring there."""
    lowered, origin = _lowered(text)
    spans, cursor = [], 0
    for token in tokens:
        start = lowered.find(token, cursor) if token else -1
        if start < 0:
            spans.append(None)
            continue
        end = start + len(token)
        spans.append((origin[start], origin[end - 1] + 1))
        cursor = end
    return spans


def word_spans(text: str, entry, language: str) -> list[GenderedWord]:
    """The gender-marked words of MuST-SHE ``entry`` that the scorer finds in ``text`` (in the order it finds them)."""
    from experiments.scoring.mustshe import matched_terms, tokenize

    tokens = tokenize([text], language, pretokenized=False)[0]
    spans = token_spans(text, tokens)
    return [GenderedWord(tokens[index], kind, spans[index]) for index, kind in matched_terms(tokens, entry)]


def tokens_of_span(pieces: tuple[str, ...] | list[str], span: tuple[int, int], holds_next: tuple[bool, ...] | None = None) -> list[int]:
    """The rows whose token's characters overlap ``span`` (``pieces`` joined are the text; an empty
    piece, a special token's, covers nothing), and the rows whose token holds leading bytes of a
    character in ``span`` (``holds_next``: that character is the first after the token's piece; a
    character split over byte tokens belongs to every token holding one of its bytes)."""
    rows, start = [], 0
    for row, piece in enumerate(pieces):
        end = start + len(piece)
        overlaps = piece and start < span[1] and span[0] < end
        splits = holds_next is not None and holds_next[row] and span[0] <= end < span[1]
        if span[0] < span[1] and (overlaps or splits):
            rows.append(row)
        start = end
    return rows


@dataclass
class UtteranceWords:
    """An utterance's gendered words and the rows of each (empty rows: a word not located in the tokens)."""

    words: list[GenderedWord]
    rows: list[list[int]]


def utterance_words(pieces: tuple[str, ...], entry, language: str, holds_next: tuple[bool, ...] | None = None) -> UtteranceWords:
    """The gendered words of ``entry`` in the hypothesis the ``pieces`` join to, with their rows
    (``holds_next``: :attr:`extract.store.GeneratedTokens.holds_next`)."""
    words = word_spans("".join(pieces), entry, language)
    return UtteranceWords(words, [tokens_of_span(pieces, word.span, holds_next) if word.span else [] for word in words])


def shifted(rows: list[int], position: str, count: int) -> list[int]:
    """The rows of a word's tokens for ``position``: ``emitting``, the rows themselves (the states that
    generated the tokens); ``reading``, one row later each (the states that have read them), those
    past the last row (a generation cut at its length limit, without an end-of-sequence row) left out."""
    if position not in POSITIONS:
        raise ValueError(f"position must be one of {', '.join(POSITIONS)}, got {position!r}")
    return rows if position == "emitting" else [row + 1 for row in rows if row + 1 < count]


def utterance_features(states: np.ndarray, word_rows: list[list[int]], position: str) -> np.ndarray | None:
    """The mean over the words of each word's mean over its tokens' rows of ``states`` (``[tokens, D]``);
    None when no word has a row."""
    means = [states[rows].mean(axis=0) for rows in (shifted(rows, position, len(states)) for rows in word_rows) if rows]
    return np.mean(means, axis=0) if means else None
