"""What a patch changed in the output, per pair and site (the per-site summary is :mod:`.summary`).

ASR: the patched transcript's errors against the reference beside the plain run's errors, with the
scoring setup of every ASR score (``experiments.scoring.asr_metrics``); a pair's ``effect`` is the
patched error rate minus the plain one, in points.

ST: MuST-SHE category 1 (the speaker speaks of themself) with the official scorer's matching
(``experiments.scoring.mustshe``): the gender the translation gives the speaker (feminine,
masculine, mixed, none) before and after the patch, whether it is the source speaker's
(``follows_source``), and the ``outcome`` (:func:`outcome`): from the form the run's own speaker
takes, a ``flip`` to the other form, a ``lost`` word, ``mixed`` forms, or ``unchanged``. Where the
manifest carries no MuST-SHE annotation for the target (or its category is not 1), the row keeps
the hypotheses and says why it has no gender score.

The graded scores beside these (the reference's log-probability, the gender margin) are :mod:`.graded`'s.
"""

from __future__ import annotations

from experiments.scoring.asr_metrics import Scoring, error_counts
from extract.manifest import Utterance

GENDER_FORMS = {"female": "feminine", "male": "masculine"}  # the grammatical gender a speaker's self-references take


def asr_scores(reference: str, plain: str, patched: str, language: str, scoring: Scoring) -> dict:
    """Errors of the plain and the patched transcript against ``reference``, their rates and the effect (points)."""
    before = error_counts(reference, plain, language, scoring)
    after = error_counts(reference, patched, language, scoring)
    words = before.reference_length
    return {
        "reference_length": words,
        "plain_errors": before.errors,
        "patched_errors": after.errors,
        "plain_error_rate": 100.0 * before.errors / words,
        "patched_error_rate": 100.0 * after.errors / words,
        "effect": 100.0 * (after.errors - before.errors) / words,
    }


def mustshe_entry(target: Utterance):
    """The MuST-SHE entry of a category-1 target (its annotations in the manifest's ``extra``), or the reason there is none."""
    from extract.corpora.must_she import Entry, MustSheError, category_number, parse_gender_terms

    category, terms = target.extra.get("category"), target.extra.get("genderterms")
    if not category or not terms:
        return None, "no MuST-SHE annotation (category and genderterms) in the manifest"
    if category_number(str(category)) != "1":
        return None, f"MuST-SHE category {category}: its gendered words refer to someone else than the speaker"
    speaker = {"F": "She", "M": "He"}.get(str(category)[-1:].upper())
    if speaker is None:
        return None, f"MuST-SHE category {category} names no speaker gender (1F or 1M)"
    try:
        return Entry(str(category), speaker, parse_gender_terms(str(terms), f"utterance {target.id}"), target.id), None
    except MustSheError as error:
        return None, str(error)


def outcome(expected: str, before: str, after: str) -> str | None:
    """What the patch did to the translation's gender, from the form the run's own speaker takes
    (``expected``): ``flip`` (to the other form), ``lost`` (no gendered word left), ``mixed`` (both
    forms), ``unchanged``; None where the plain translation did not have the expected form (a row
    outside the flip rate's denominator)."""
    if before != expected:
        return None
    if after == expected:
        return "unchanged"
    if after == "none":
        return "lost"
    return "mixed" if after == "mixed" else "flip"


def mustshe_scores(target: Utterance, source_gender: str, plain: str, patched: str, tgt_lang: str, own_gender: str | None = None) -> dict:
    """The translation's gender for the speaker before and after the patch (category 1), or why there
    is none. ``target``: the utterance whose MuST-SHE entry scores the translation; ``own_gender``:
    the gender of the utterance the model ran on (default the target's; the source's when denoising),
    whose form is ``expected_form``; ``source_gender``: that of the utterance whose states were patched in."""
    from experiments.scoring.mustshe import sentence_counts, tokenize, translation_gender

    entry, reason = mustshe_entry(target)
    if entry is None:
        return {"scored": False, "reason": reason}
    before_tokens, after_tokens = tokenize([plain, patched], tgt_lang, pretokenized=False)
    before = translation_gender(entry, sentence_counts(before_tokens, entry))
    after = translation_gender(entry, sentence_counts(after_tokens, entry))
    form, expected = GENDER_FORMS[source_gender], GENDER_FORMS[own_gender or target.gender]
    return {
        "scored": True,
        "category": entry.category,
        "terms": len(entry.terms),
        "plain_gender": before,
        "patched_gender": after,
        "source_form": form,
        "followed_source_before": before == form,
        "follows_source": after == form,
        "effect": 100.0 * ((after == form) - (before == form)),
        "expected_form": expected,
        "outcome": outcome(expected, before, after),
    }


def not_patched(row: dict) -> bool:
    """Whether the row's patch replaced no frame (a span past the target's or the source's frames):
    its output is the plain one by construction, so it is not scored (rows written before this was
    said in the row included). A joint site's row (``patched`` by member) replaced no frame when none of its members did."""
    patched = row.get("patched") or {}
    cells = [patched] if "start" in patched else [cell for cell in patched.values() if isinstance(cell, dict)]
    return bool(cells) and all("start" in cell and "end" in cell and cell["end"] <= cell["start"] for cell in cells)
