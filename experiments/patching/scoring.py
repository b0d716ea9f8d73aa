"""What a patch changed in the output, per pair and site, and the per-site summary.

ASR: the patched transcript's errors against the target's reference beside the target's own
(unpatched) errors, with the scoring setup of every ASR score (``experiments.scoring.asr_metrics``).
A pair's ``effect`` is the patched error rate minus the plain one, in points; a site's effect is the
corpus-level one (summed patched errors minus summed plain errors over summed reference words).

ST: MuST-SHE category 1 (the speaker speaks of themself) with the official scorer's matching
(``experiments.scoring.mustshe``): the gender the translation gives the speaker (feminine,
masculine, mixed, none) before and after the patch, and whether it is the source speaker's
(``follows_source``). A site's effect is the share of pairs whose patched translation takes the
source's gender minus the share whose plain translation had it, in points: for ``cross`` pairs, how
often the patch carries the source's gender into the words; for ``within`` pairs (the source's
gender is the target's), how often the patch loses or keeps it. Where the manifest carries no
MuST-SHE annotation for the target (or its category is not 1), the row keeps the hypotheses and says
why it has no gender score.

The summary gives, per site and pairing, the pairs, target speakers and effect, and the effect of
``cross`` minus that of ``within`` with a 95 % interval from resampling target speakers within each
pairing (``experiments.scoring.group_metrics``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from experiments.scoring.asr_metrics import Scoring, error_counts
from experiments.scoring.group_metrics import GroupMetricFrame
from extract.manifest import Utterance

GENDER_FORMS = {"female": "feminine", "male": "masculine"}  # the grammatical gender a speaker's self-references take
RELIABLE_SPEAKERS = 5  # per pairing: fewer, and the interval is flagged (as the gap reports flag theirs)


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


def mustshe_scores(target: Utterance, source_gender: str, plain: str, patched: str, tgt_lang: str) -> dict:
    """The translation's gender for the speaker before and after the patch (category 1), or why there is none."""
    from experiments.scoring.mustshe import sentence_counts, tokenize, translation_gender

    entry, reason = mustshe_entry(target)
    if entry is None:
        return {"scored": False, "reason": reason}
    before_tokens, after_tokens = tokenize([plain, patched], tgt_lang, pretokenized=False)
    before = translation_gender(entry, sentence_counts(before_tokens, entry))
    after = translation_gender(entry, sentence_counts(after_tokens, entry))
    form = GENDER_FORMS[source_gender]
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
    }


def _asr_effect(columns) -> float:
    words = float(np.sum(columns["reference_length"]))
    if not words:
        return math.nan
    return 100.0 * (float(np.sum(columns["patched_errors"])) - float(np.sum(columns["plain_errors"]))) / words


def _st_effect(columns) -> float:
    if not len(columns["follows_source"]):
        return math.nan
    return 100.0 * (float(np.mean(columns["follows_source"])) - float(np.mean(columns["followed_source_before"])))


def not_patched(row: dict) -> bool:
    """Whether the row's patch replaced no frame (a span past the target's or the source's frames):
    its output is the plain one by construction, so it is not scored (rows written before this was
    said in the row included). A joint site's row (``patched`` by member) replaced no frame when none of its members did."""
    patched = row.get("patched") or {}
    cells = [patched] if "start" in patched else [cell for cell in patched.values() if isinstance(cell, dict)]
    return bool(cells) and all("start" in cell and "end" in cell and cell["end"] <= cell["start"] for cell in cells)


def _scored(row: dict) -> dict | None:
    """The columns a row adds to its site's metric, or None (not scored)."""
    if not_patched(row):
        return None
    if row["task"] == "asr":
        scores = row.get("asr")
        return None if scores is None else {key: scores[key] for key in ("reference_length", "plain_errors", "patched_errors")}
    scores = row.get("mustshe") or {}
    return {key: float(scores[key]) for key in ("follows_source", "followed_source_before")} if scores.get("scored") else None


def _finite(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def site_summary(rows: Sequence[dict], iterations: int = 1000, seed: int = 0) -> dict:
    """Per site (in the order first seen): per pairing the pairs written, those scored, the target
    speakers and the effect, and ``not_patched``: the rows whose patch replaced no frame (not scored);
    ``cross_minus_within`` with ``ci95`` (speaker bootstrap) where both
    pairings have scored pairs. Unscored rows are counted, never silently left out."""
    sites: dict[str, list[dict]] = {}
    for row in rows:
        sites.setdefault(row["site"], []).append(row)
    summary = {}
    for site, site_rows in sites.items():
        scored = [(row, columns) for row in site_rows if (columns := _scored(row)) is not None]
        task = site_rows[0]["task"]
        metric = _asr_effect if task == "asr" else _st_effect
        keys = ("reference_length", "plain_errors", "patched_errors") if task == "asr" else ("follows_source", "followed_source_before")
        columns = {key: np.asarray([c[key] for _, c in scored], dtype=float) for key in keys}
        frame = GroupMetricFrame(
            metric, columns, [row["pairing"] for row, _ in scored], [row["target_speaker"] for row, _ in scored], groups=["cross", "within"]
        )
        entry = {"site_index": site_rows[0]["site_index"], "pairings": {}}
        for pairing in ("cross", "within"):
            written = [row for row in site_rows if row["pairing"] == pairing]
            if not written:
                continue
            has = pairing in frame.present
            entry["pairings"][pairing] = {
                "pairs": len(written),
                "scored": sum(1 for row, _ in scored if row["pairing"] == pairing),
                "not_patched": sum(1 for row in written if not_patched(row)),
                "speakers": frame.speaker_count(pairing) if has else 0,
                "effect": _finite(frame.evaluate(pairing)) if has else None,
            }
        if set(frame.present) == {"cross", "within"}:
            entry["cross_minus_within"] = _finite(frame.difference("cross", "within"))
            entry.update(_interval(frame, iterations, seed))
        summary[site] = entry
    return summary


def _interval(frame: GroupMetricFrame, iterations: int, seed: int) -> dict:
    fewest = min(frame.speaker_count("cross"), frame.speaker_count("within"))
    if fewest < 2:
        return {"ci95": [None, None], "ci95_note": "a pairing has one target speaker: a speaker bootstrap has nothing to resample"}
    low, high = frame.speaker_bootstrap("cross", "within", iterations, seed=seed, compare="difference")
    interval = {"ci95": [_finite(low), _finite(high)]}
    if fewest < RELIABLE_SPEAKERS:
        interval["ci95_note"] = f"only {fewest} target speakers in a pairing: too few for a reliable interval"
    return interval
