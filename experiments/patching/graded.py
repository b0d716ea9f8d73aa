"""The graded metric of a patch row: how likely the model finds the clean utterance's reference, patched against plain.

Activation patching reads a graded metric, not a decoded output that flips only past a threshold
(Heimersheim & Nanda 2024). The scores come from :func:`extract.forced.generate_scored` (teacher
forcing with the encoder's output of the run, in nats):

- **ASR** (``logprob``): the reference transcript's per-token log-probability (mean over its tokens)
  on the patched run minus that on the plain run of the same input: negative where the patch makes
  the reference less likely.
- **ST** (``gender_margin``): the *gender margin* of a run, the summed log-probability of the
  tokens of the reference's gendered words (MuST-SHE category 1: the correct forms, the speaker's
  own gender) minus the summed log-probability of the tokens of their other-gender forms in the
  reference with each such word replaced by its wrong form (:func:`other_gender_text`); each form
  is teacher-forced after its own sentence's prefix. The row's effect is the patched margin minus
  the plain one: negative where the patch moves the words towards the other gender.

A word's tokens are those whose characters overlap it (``experiments.decoder.words``, as the
decoder probe finds them). A reference whose terms cannot all be located, or whose other-gender
version does not hold as many wrong forms as it held correct ones, is not scored, with the reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from extract.errors import UserError

if TYPE_CHECKING:
    from extract.corpora.must_she import Entry
    from extract.forced import ForcedText


class GradedError(UserError, ValueError):
    """A reference the graded metric cannot score (the message says why; the row records it)."""


def _cased(form: str, original: str) -> str:
    """``form`` with ``original``'s case: all upper, first letter upper, or as written (lower)."""
    if len(original) > 1 and original.isupper():
        return form.upper()
    if original[:1].isupper():
        return form[:1].upper() + form[1:]
    return form


def other_gender_text(text: str, entry: Entry, language: str) -> str:
    """``text`` with each of ``entry``'s correct forms the MuST-SHE scorer finds in it replaced by the
    term's wrong form (in the original's case); a :class:`GradedError` when none is found or one
    cannot be placed in the text."""
    from experiments.decoder.words import word_spans

    found = [word for word in word_spans(text, entry, language) if word.kind == "correct"]
    if not found:
        raise GradedError("none of the category-1 terms' correct forms is found in the reference")
    if any(word.span is None for word in found):
        raise GradedError("a gendered word of the reference could not be placed in its text")
    wrong = dict(entry.terms)
    for word in sorted(found, key=lambda word: word.span[0], reverse=True):
        start, end = word.span
        text = text[:start] + _cased(wrong[word.form], text[start:end]) + text[end:]
    return text


def _word_rows(tokenizer, forced: ForcedText, entry: Entry, language: str, kind: str) -> list[list[int]]:
    """The token rows of each ``kind`` (correct or wrong) form found in the text ``forced`` holds."""
    from experiments.decoder.words import tokens_of_span, word_spans
    from extract.decoder import token_pieces

    pieces = token_pieces(tokenizer, list(forced.ids))
    words = [word for word in word_spans("".join(pieces), entry, language) if word.kind == kind]
    return [tokens_of_span(pieces, word.span) if word.span else [] for word in words]


def gender_margin(tokenizer, reference: ForcedText, other: ForcedText, entry: Entry, language: str) -> float:
    """Σ log p(the reference's correct forms' tokens) − Σ log p(the other-gender text's wrong forms' tokens)."""
    correct = _word_rows(tokenizer, reference, entry, language, "correct")
    wrong = _word_rows(tokenizer, other, entry, language, "wrong")
    if len(correct) != len(wrong) or not all(correct) or not all(wrong):
        raise GradedError(f"the reference's {len(correct)} gendered words and the other-gender text's {len(wrong)} could not all be placed in their tokens")
    correct_rows = sorted({row for rows in correct for row in rows})
    wrong_rows = sorted({row for rows in wrong for row in rows})
    return sum(reference.logprobs[row] for row in correct_rows) - sum(other.logprobs[row] for row in wrong_rows)


def logprob_scores(plain: ForcedText, patched: ForcedText) -> dict:
    """The ASR row's ``logprob``: the reference's tokens and its per-token log-probability, plain and patched, and the change."""
    return {"scored": True, "tokens": len(plain.ids), "plain": plain.mean, "patched": patched.mean, "effect": patched.mean - plain.mean}


def margin_scores(tokenizer, plain: list[ForcedText], patched: list[ForcedText], entry: Entry, language: str) -> dict:
    """The ST row's ``gender_margin``: plain and patched (``[reference, other-gender text]`` each), and the change."""
    before = gender_margin(tokenizer, *plain, entry, language)
    after = gender_margin(tokenizer, *patched, entry, language)
    terms = len(_word_rows(tokenizer, plain[0], entry, language, "correct"))
    return {"scored": True, "terms": terms, "plain": before, "patched": after, "effect": after - before}
