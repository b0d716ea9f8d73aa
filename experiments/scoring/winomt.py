"""WinoMT's gender accuracy, ΔG and ΔS for translations, and WinoST's ASR side, in percent.

Translation (Stanovsky et al. 2019, as mt_gender's scorer computes it): the entity (its word and the
article before it) is aligned to the translation (``experiments.scoring.word_alignment``) and the
aligned words' grammatical gender is read (``experiments.scoring.grammatical_gender``); an entity
whose gender cannot be read is ``unknown``.

- accuracy: sentences whose read gender equals the gold gender, over all sentences (unknown readings
  and neutral gold sentences count in the denominator; a neutral gold is right only if read neutral);
- F1 per gender g: precision = correct g / sentences read g (0 when none is read g), recall = correct
  g / gold g, F1 their harmonic mean (0 when both are 0, null without a gold g sentence);
  ΔG = F1(male) − F1(female) (mt_gender rounds precision and recall to 0.1 first; this does not);
- accuracy on the pro- and anti-stereotypical sentences (those of en.txt found in en_pro.txt /
  en_anti.txt) and ΔS = acc(pro) − acc(anti); null where a set has no sentence;
- unknown readings counted per gold gender.

ASR (Costa-jussà et al. 2022, Sec. 6.3: the side product): per transcript, whether its gendered
pronouns are the source's (``pronoun_correct``: the counts of he/him/his/himself, she/her/hers/herself
and they/them/their/theirs/themselves/themself equal those of the source sentence) and whether the
profession is recognised (its words, contiguous, in the transcript); accuracies overall, per gold
gender and per stereotype set, and the pronoun accuracy over the sentences whose profession was
recognised (the paper's 98.72 % figure discards misrecognised professions this way).

Per-sentence values are cached once as columns of the group-metrics frame; per-group values come from
it, and 95 % intervals from a bootstrap over sentences (WinoST has one speaker, so a speaker
bootstrap has nothing to resample): each resample draws the N sentences N times with replacement.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from experiments.results.records import WinoMTResult
from experiments.scoring.grammatical_gender import UNKNOWN, GenderAnalyser
from experiments.scoring.group_metrics import GroupMetricFrame, Members
from experiments.scoring.mustshe import read_hypotheses, sentences_path
from experiments.scoring.word_alignment import Links, align, read_alignments, tokens, write_alignments
from extract.corpora.winost import GOLD_GENDERS, Sentence, read_aggregate
from extract.errors import UserError
from extract.provenance import hypotheses_file_subject, identified
from extract.records import schema_version, write_document, write_side_rows

RESULT_SCHEMA = schema_version("winomt")  # the result JSON's version (extract.records.FORMATS); files without ``schema`` read as version 1
STEREOTYPES = ("pro", "anti")
NO_STEREOTYPE = "none"
GENDER_CODES = {gender: code for code, gender in enumerate((*GOLD_GENDERS, UNKNOWN))}
STEREOTYPE_CODES = {name: code for code, name in enumerate((*STEREOTYPES, NO_STEREOTYPE))}
PRONOUNS = {
    **dict.fromkeys(("he", "him", "his", "himself"), "male"),
    **dict.fromkeys(("she", "her", "hers", "herself"), "female"),
    **dict.fromkeys(("they", "them", "their", "theirs", "themselves", "themself"), "neutral"),
}
TRANSLATION_KEYS = ("accuracy", "f1_male", "f1_female", "delta_g", "accuracy_pro", "accuracy_anti", "delta_s")
ASR_KEYS = (
    "pronoun_accuracy",
    "profession_accuracy",
    "pronoun_accuracy_profession_recognised",
    "pronoun_accuracy_pro",
    "pronoun_accuracy_anti",
    "pronoun_delta_s",
)
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)*")


class WinoMTError(UserError, ValueError):
    """Inputs that do not fit together (counts, sets); the message names the file and line."""


# ---------------------------------------------------------------- inputs


def assign_stereotypes(sentences: list[Sentence], pro: str | Path, anti: str | Path) -> tuple[list[Sentence], dict[str, int]]:
    """The sentences with their stereotype set (``pro``, ``anti`` or ``none``), matched by gender,
    index and text, and per set how many of its lines match no sentence (0 when the source is the
    whole en.txt). A sentence listed in both sets is an error naming both lines."""
    labels: dict[tuple, tuple[str, str]] = {}
    unmatched = {}
    keys = {sentence.key for sentence in sentences}
    for name, path in (("pro", pro), ("anti", anti)):
        listed = read_aggregate(path)
        for sentence in listed:
            other = labels.get(sentence.key)
            if other and other[0] != name:
                raise WinoMTError(f"{path}:{sentence.line}: the sentence is also in the {other[0]} set ({other[1]}); a sentence is pro or anti, not both")
            labels[sentence.key] = (name, f"{path}:{sentence.line}")
        unmatched[name] = sum(sentence.key not in keys for sentence in listed)
    labelled = [replace(sentence, stereotype=labels.get(sentence.key, (NO_STEREOTYPE,))[0]) for sentence in sentences]
    return labelled, unmatched


def read_outputs(path: str | Path, sentences: list[Sentence], source: str | Path) -> tuple[list[str], list[str]]:
    """One output (translation or transcript) per sentence, and the ids of JSONL rows no sentence has.

    A ``.jsonl`` file holds ``experiments.transcribe`` rows matched by id (:func:`extract.corpora.winost.sentence_id`
    of the source line), read as MuST-SHE's hypotheses are; any other file holds one output per line
    in the source's order, and a count that differs is an error naming the first line without a partner."""
    path = Path(path)
    outputs, unmatched = read_hypotheses(path, sentences)
    if path.suffix != ".jsonl" and len(outputs) != len(sentences):
        if len(outputs) < len(sentences):
            missing = sentences[len(outputs)]
            raise WinoMTError(
                f"{path}:{len(outputs) + 1}: no output for {source}:{missing.line}; {path} has {len(outputs)} lines for {len(sentences)} sentences"
            )
        raise WinoMTError(f"{path}:{len(sentences) + 1}: {len(outputs)} lines for the {len(sentences)} sentences of {source}; give one output per sentence")
    return outputs, unmatched


# ---------------------------------------------------------------- per-sentence rows


def aligned_indices(sentence: Sentence, links: Links) -> list[int]:
    """Target tokens linked to the entity's source tokens (:attr:`Sentence.entity_indices`), in order."""
    sources = set(sentence.entity_indices)
    return sorted({j for i, j in links if i in sources})


def _sentence_fields(sentence: Sentence) -> dict:
    """What every per-sentence row starts with: where the sentence is, its gold gender and stereotype set."""
    return {"line": sentence.line, "id": sentence.id, "gold": sentence.gender, "stereotype": sentence.stereotype, "source": sentence.text}


def translation_rows(sentences: Sequence[Sentence], translations: Sequence[str], alignments: Sequence[Links], analyser: GenderAnalyser) -> list[dict]:
    """Per sentence: the source entity, the aligned target words, what the analyser read and whether it is right."""
    aligned = [aligned_indices(sentence, links) for sentence, links in zip(sentences, alignments)]
    readings = analyser.read(translations, aligned)
    rows = []
    for sentence, translation, indices, reading in zip(sentences, translations, aligned, readings):
        words = tokens(sentence.text)
        target = tokens(translation)
        rows.append(
            {
                **_sentence_fields(sentence),
                "source_entity": " ".join(words[i] for i in sentence.entity_indices),
                "translation": translation,
                "aligned": indices,
                "target_words": [target[j] for j in indices],
                "read_words": reading.words,
                "read_gender": reading.gender,
                "unknown_reason": reading.reason,
                "correct": reading.gender == sentence.gender,
            }
        )
    return rows


def words(text: str) -> list[str]:
    """Lower-cased words of a transcript or sentence, a clitic dropped (``she's`` -> she, ``housekeeper's`` -> housekeeper)."""
    return [word.split("'")[0] for word in _WORD.findall(text.lower().replace("’", "'"))]


def pronoun_counts(text: str) -> dict[str, int]:
    counts = Counter(PRONOUNS[word] for word in words(text) if word in PRONOUNS)
    return {gender: counts[gender] for gender in GOLD_GENDERS}


def recognised(profession: list[str], transcript_words: list[str]) -> bool:
    """The profession's words occur contiguously in the transcript."""
    size = len(profession)
    return size > 0 and any(transcript_words[start : start + size] == profession for start in range(len(transcript_words) - size + 1))


def transcript_rows(sentences: Sequence[Sentence], transcripts: Sequence[str]) -> list[dict]:
    """Per sentence: the pronoun genders of source and transcript, and whether the profession was recognised."""
    rows = []
    for sentence, transcript in zip(sentences, transcripts):
        expected, heard = pronoun_counts(sentence.text), pronoun_counts(transcript)
        profession = words(" ".join(sentence.profession_words))
        rows.append(
            {
                **_sentence_fields(sentence),
                "transcript": transcript,
                "source_pronouns": expected,
                "transcript_pronouns": heard,
                "pronoun_correct": expected == heard,
                "profession": " ".join(profession),
                "profession_recognised": recognised(profession, words(transcript)),
            }
        )
    return rows


# ---------------------------------------------------------------- metrics (along the last axis, so one call scores every resample)


def _percent(part, whole) -> np.ndarray:
    part, whole = np.asarray(part, dtype=float), np.asarray(whole, dtype=float)
    return np.where(whole > 0, 100.0 * part / np.maximum(whole, 1), np.nan)


def _f1(gold: np.ndarray, predicted: np.ndarray, gender: str) -> np.ndarray:
    code = GENDER_CODES[gender]
    is_gold, is_predicted = gold == code, predicted == code
    hits = (is_gold & is_predicted).sum(-1)
    recall = _percent(hits, is_gold.sum(-1))
    precision = np.nan_to_num(_percent(hits, is_predicted.sum(-1)), nan=0.0)
    total = precision + recall
    f1 = np.divide(2 * precision * recall, total, out=np.zeros_like(total), where=total > 0)
    return np.where(np.isnan(recall), np.nan, f1)


def _accuracy_in(correct: np.ndarray, stereotype: np.ndarray, name: str) -> np.ndarray:
    members = stereotype == STEREOTYPE_CODES[name]
    return _percent((correct & members).sum(-1), members.sum(-1))


def translation_metric(columns) -> dict[str, np.ndarray]:
    """WinoMT's scores of the records in ``columns`` (gold and predicted gender codes, stereotype codes)."""
    gold, predicted, stereotype = columns["gold"], columns["predicted"], columns["stereotype"]
    correct = gold == predicted
    scores = {"accuracy": _percent(correct.sum(-1), np.full(correct.shape[:-1], correct.shape[-1]))}
    scores["f1_male"], scores["f1_female"] = _f1(gold, predicted, "male"), _f1(gold, predicted, "female")
    scores["delta_g"] = scores["f1_male"] - scores["f1_female"]
    scores["accuracy_pro"], scores["accuracy_anti"] = _accuracy_in(correct, stereotype, "pro"), _accuracy_in(correct, stereotype, "anti")
    scores["delta_s"] = scores["accuracy_pro"] - scores["accuracy_anti"]
    return scores


def transcript_metric(columns) -> dict[str, np.ndarray]:
    """The ASR side's scores of the records in ``columns`` (pronoun_correct, recognised, stereotype)."""
    pronoun, profession, stereotype = columns["pronoun_correct"].astype(bool), columns["recognised"].astype(bool), columns["stereotype"]
    size = np.full(pronoun.shape[:-1], pronoun.shape[-1])
    scores = {
        "pronoun_accuracy": _percent(pronoun.sum(-1), size),
        "profession_accuracy": _percent(profession.sum(-1), size),
        "pronoun_accuracy_profession_recognised": _percent((pronoun & profession).sum(-1), profession.sum(-1)),
        "pronoun_accuracy_pro": _accuracy_in(pronoun, stereotype, "pro"),
        "pronoun_accuracy_anti": _accuracy_in(pronoun, stereotype, "anti"),
    }
    scores["pronoun_delta_s"] = scores["pronoun_accuracy_pro"] - scores["pronoun_accuracy_anti"]
    return scores


def _value(number) -> float | None:
    number = float(number)
    return None if np.isnan(number) else number


def _group_summary(columns) -> dict:
    """n, accuracy and unknown readings of one group's translations."""
    correct = columns["gold"] == columns["predicted"]
    return {
        "n": int(correct.size),
        "accuracy": _value(_percent(correct.sum(), correct.size)),
        "unknown": int((columns["predicted"] == GENDER_CODES[UNKNOWN]).sum()),
    }


def _asr_group_summary(columns) -> dict:
    pronoun, profession = columns["pronoun_correct"].astype(bool), columns["recognised"].astype(bool)
    return {
        "n": int(pronoun.size),
        "pronoun_accuracy": _value(_percent(pronoun.sum(), pronoun.size)),
        "profession_accuracy": _value(_percent(profession.sum(), profession.size)),
        "pronoun_accuracy_profession_recognised": _value(_percent((pronoun & profession).sum(), profession.sum())),
    }


def sentence_bootstrap(members: Members, metric: Callable[[dict], dict], keys: Sequence[str], iterations: int, seed: int, chunk: int = 100) -> dict:
    """95 % percentile intervals of ``metric``'s ``keys`` when the N sentences are drawn N times with
    replacement, ``iterations`` times (the draws are the frame's :meth:`Members.take` of index
    matrices, scored in chunks of ``chunk`` resamples). Resamples where a key is undefined are left
    out; a key undefined in all of them gets null bounds."""
    rng = np.random.default_rng(seed)
    values = {key: [] for key in keys}
    for start in range(0, iterations, chunk):
        draws = rng.integers(0, len(members), size=(min(chunk, iterations - start), len(members)))
        scores = metric(members.take(draws))
        for key in keys:
            values[key].append(scores[key])
    intervals = {}
    for key in keys:
        sample = np.concatenate(values[key])
        sample = sample[~np.isnan(sample)]
        intervals[key] = [float(bound) for bound in np.percentile(sample, [2.5, 97.5])] if sample.size else [None, None]
    return intervals


def _columns(rows: list[dict], extra: dict[str, str]) -> dict[str, np.ndarray]:
    columns = {
        "gold": np.asarray([GENDER_CODES[row["gold"]] for row in rows], dtype=np.int8),
        "stereotype": np.asarray([STEREOTYPE_CODES[row["stereotype"]] for row in rows], dtype=np.int8),
    }
    for name, key in extra.items():
        values = [row[key] for row in rows]
        columns[name] = np.asarray([GENDER_CODES[value] for value in values] if name == "predicted" else values, dtype=np.int8)
    return columns


def score_translation_rows(rows: list[dict], iterations: int = 1000, seed: int = 0) -> dict:
    """WinoMT's scores of :func:`translation_rows` (keys in the module docstring), per gold gender and
    stereotype set, with sentence-bootstrap intervals (``iterations`` 0: none)."""

    def unknown(by_gender) -> dict:
        return {"unknown": {gender: by_gender.evaluate(gender)["unknown"] for gender in GOLD_GENDERS}}

    return _grouped_scores(rows, {"predicted": "read_gender"}, _group_summary, translation_metric, TRANSLATION_KEYS, iterations, seed, unknown)


def score_transcript_rows(rows: list[dict], iterations: int = 1000, seed: int = 0) -> dict:
    """The ASR side's scores of :func:`transcript_rows`, per gold gender and stereotype set, with sentence-bootstrap intervals."""
    fields = {"pronoun_correct": "pronoun_correct", "recognised": "profession_recognised"}
    return _grouped_scores(rows, fields, _asr_group_summary, transcript_metric, ASR_KEYS, iterations, seed)


def _grouped_scores(rows: list[dict], fields: dict, summary, metric, keys, iterations: int, seed: int, head=None) -> dict:
    """The overall scores of ``metric`` on ``rows`` and their count, what ``head`` adds from the
    per-gender frame, the counts and scores per gold gender and stereotype set, and (``iterations``
    above 0) sentence-bootstrap intervals of ``keys``: both sides' result, in this key order."""
    if not rows:
        raise WinoMTError("no sentences to score")
    columns = _columns(rows, fields)
    by_gender = GroupMetricFrame(summary, columns, [row["gold"] for row in rows], groups=GOLD_GENDERS)
    by_stereotype = GroupMetricFrame(summary, columns, [row["stereotype"] for row in rows], groups=STEREOTYPES)
    result = {**{key: _value(value) for key, value in metric(by_gender.all.columns).items()}, "n": len(rows)}
    if head is not None:
        result |= head(by_gender)
    result["n_pro"], result["n_anti"] = (by_stereotype.evaluate(name)["n"] for name in STEREOTYPES)
    result["by_gender"] = {gender: by_gender.evaluate(gender) for gender in GOLD_GENDERS}
    result["by_stereotype"] = {name: by_stereotype.evaluate(name) for name in STEREOTYPES}
    if iterations:
        result["intervals"] = sentence_bootstrap(by_gender.all, metric, keys, iterations, seed)
        result["bootstrap"] = {"unit": "sentence", "iterations": iterations, "seed": seed, "level": 95}
    return result


def save_result(result: dict, rows: list[dict], out: str | Path) -> Path:
    """Writes the result to ``out`` (JSON) and the per-sentence rows beside it (:func:`sentences_path`, returned)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_document(WinoMTResult.from_dict(result, str(out)), out)
    return write_side_rows(rows, sentences_path(out))


def alignments_path(out: str | Path) -> Path:
    """Where the alignments used for ``out`` are saved (Pharaoh format)."""
    out = Path(out)
    return out.with_name(out.stem + ".alignments.txt")


# ---------------------------------------------------------------- whole evaluations (the CLI and the demo call these)


def settings_record(task: str, sentences_source: str | Path, outputs: str | Path, **more) -> dict:
    return {"task": task, "source": str(sentences_source), "outputs": str(outputs), **more}


def evaluate_translations(
    source: str | Path,
    pro: str | Path,
    anti: str | Path,
    translations: str | Path,
    analyser: GenderAnalyser,
    out: str | Path,
    alignments: str | Path | None = None,
    symmetrisation: str = "grow-diag-final-and",
    extra_parallel: Sequence[tuple[str, str]] = (),
    iterations: int = 1000,
    seed: int = 0,
    tgt_lang: str | None = None,
    log: Callable[[str], None] = print,
) -> tuple[dict, Path]:
    """WinoMT on a translation file: reads the inputs, aligns (eflomal, or the ``alignments`` file),
    reads genders, scores, and saves the result at ``out``, the per-sentence rows and the alignments
    used beside it. Returns the result and the rows' path."""
    sentences, unmatched_lines = assign_stereotypes(read_aggregate(source), pro, anti)
    outputs, unmatched_ids = read_outputs(translations, sentences, source)
    sources = [sentence.text for sentence in sentences]
    if alignments is None:
        log(f"aligning {len(sentences)} sentence pairs{f' (+ {len(extra_parallel)} extra)' if extra_parallel else ''} with eflomal, {symmetrisation}")
        links = align(sources, outputs, symmetrisation, extra_parallel)
        alignment = {"aligner": "eflomal", "symmetrisation": symmetrisation, "extra_pairs": len(extra_parallel)}
    else:
        links = read_alignments(alignments, sources, outputs)
        alignment = {"aligner": "precomputed", "file": str(alignments)}
    saved = write_alignments(alignments_path(out), links)
    log(f"reading genders with {analyser.name}")
    rows = translation_rows(sentences, outputs, links, analyser)
    result = score_translation_rows(rows, iterations, seed)
    result["stereotype_lines_unmatched"] = unmatched_lines
    if unmatched_ids:
        result["unmatched_outputs"] = {"count": len(unmatched_ids), "ids": unmatched_ids}
    result["settings"] = settings_record(
        "st", source, translations, pro=str(pro), anti=str(anti), tgt_lang=tgt_lang, analyser=analyser.name, alignment=alignment, alignments_used=str(saved)
    )
    inputs = [source, pro, anti, translations, *([alignments] if alignments else [])]
    result = identified(result, RESULT_SCHEMA, inputs, hypotheses_file_subject(translations) | {"tgt_lang": tgt_lang}, kind="winomt")
    return result, save_result(result, rows, out)


def evaluate_transcripts(
    source: str | Path, pro: str | Path, anti: str | Path, transcripts: str | Path, out: str | Path, iterations: int = 1000, seed: int = 0
) -> tuple[dict, Path]:
    """WinoST's ASR side on a transcript file; saves the result at ``out`` and the per-sentence rows beside it."""
    sentences, unmatched_lines = assign_stereotypes(read_aggregate(source), pro, anti)
    outputs, unmatched_ids = read_outputs(transcripts, sentences, source)
    rows = transcript_rows(sentences, outputs)
    result = score_transcript_rows(rows, iterations, seed)
    result["stereotype_lines_unmatched"] = unmatched_lines
    if unmatched_ids:
        result["unmatched_outputs"] = {"count": len(unmatched_ids), "ids": unmatched_ids}
    result["settings"] = settings_record("asr", source, transcripts, pro=str(pro), anti=str(anti))
    result = identified(result, RESULT_SCHEMA, [source, pro, anti, transcripts], hypotheses_file_subject(transcripts), kind="winomt")
    return result, save_result(result, rows, out)
