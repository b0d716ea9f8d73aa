"""Lexical features of each record's reference text (Attanasio et al. 2024, §5.2 and appendix B.2), with spaCy.

Features (``features`` of each row):

- ``pos_<TAG>``: tokens tagged with each of the 17 universal POS tags (:data:`UNIVERSAL_POS`; spaCy's
  ``token.pos_``), every tag present, 0 where absent;
- ``entities`` and ``ent_<LABEL>``: named-entity spans, in total and per label of the pipeline's
  recogniser (e.g. ``LOC``, ``MISC``, ``ORG``, ``PER`` for French); a pipeline without ``ner`` gives
  no entity features (say so rather than counting zeros);
- ``words``: tokens that are words, i.e. every token but ``PUNCT``, ``SYM``, ``SPACE``;
- ``lexical_density``: content words / words (Halliday 1985), with content words the tokens tagged
  :data:`CONTENT_POS` = NOUN, PROPN, VERB, ADJ, ADV (the lexical classes of the paper's appendix; AUX,
  NUM, INTJ and all closed classes are not content); null, with its reason, for a text without words;
- ``lexical_complexity``: content words / the function words of the paper's appendix (PRON, AUX,
  CCONJ, DET, PART; Imani & Habil 2017), the ratio the paper's appendix reports; null without
  function words.

The English pipeline on PyPI is a third-party re-upload: install the pipeline of each language from
spaCy's own release (``python -m spacy download NAME``) and check its card before relying on it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

from experiments.analysis.contrasts import feature_row_identity
from experiments.scoring import spacy_pipeline
from extract.errors import UserError

UNIVERSAL_POS = ("ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN", "PUNCT", "SCONJ", "SYM", "VERB", "X")
CONTENT_POS = frozenset({"NOUN", "PROPN", "VERB", "ADJ", "ADV"})
FUNCTION_POS = frozenset({"PRON", "AUX", "CCONJ", "DET", "PART"})  # the paper's appendix B.2 list (Imani & Habil 2017)
NOT_WORDS = frozenset({"PUNCT", "SYM", "SPACE"})


class LexicalError(UserError, ValueError):
    """A pipeline that cannot be loaded or lacks what the features need."""


def load_pipeline(name: str, language: str):
    """The pipeline ``name`` for records in ``language``; one that is not installed, is no pipeline,
    is for another language (:mod:`experiments.scoring.spacy_pipeline`) or has no POS tagger is one line."""
    try:
        nlp = spacy_pipeline.load_pipeline(name, language, "the records' language")
    except spacy_pipeline.SpacyPipelineError as error:
        raise LexicalError(str(error)) from None
    if not {"morphologizer", "tagger"} & set(nlp.pipe_names):
        raise LexicalError(f"the spaCy pipeline {name!r} has no POS tagger (components: {', '.join(nlp.pipe_names)})")
    return nlp


def entity_labels(nlp) -> tuple[str, ...] | None:
    """The recogniser's labels, or None for a pipeline without ``ner``."""
    return tuple(sorted(nlp.get_pipe("ner").labels)) if "ner" in nlp.pipe_names else None


def doc_features(doc, labels: tuple[str, ...] | None) -> tuple[dict, dict]:
    """(features, null reasons) of one parsed text."""
    tags = [token.pos_ for token in doc]
    features: dict[str, float | int | None] = {f"pos_{tag}": tags.count(tag) for tag in UNIVERSAL_POS}
    if labels is not None:
        entities = [entity.label_ for entity in doc.ents]
        features["entities"] = len(entities)
        features |= {f"ent_{label}": entities.count(label) for label in labels}
    words = sum(tag not in NOT_WORDS for tag in tags)
    content = sum(tag in CONTENT_POS for tag in tags)
    function = sum(tag in FUNCTION_POS for tag in tags)
    features["words"] = words
    reasons = {}
    features["lexical_density"] = content / words if words else None
    if not words:
        reasons["lexical_density"] = "no words (only punctuation or symbols)"
    features["lexical_complexity"] = content / function if function else None
    if not function:
        reasons["lexical_complexity"] = "no function word (PRON, AUX, CCONJ, DET, PART)"
    return features, reasons


def lexical_rows(utterances: Iterable, nlp, batch_size: int = 64) -> Iterator[dict]:
    """One row per utterance (its ``text``), in order: ``id``, ``speaker``, ``gender``, ``language``,
    ``dataset``, ``features``, ``null_reasons``."""
    utterances = list(utterances)
    labels = entity_labels(nlp)
    for utterance, doc in zip(utterances, nlp.pipe((u.text or "" for u in utterances), batch_size=batch_size)):
        features, reasons = doc_features(doc, labels)
        yield {**feature_row_identity(utterance), "features": features, "null_reasons": reasons}


def pipeline_label(name: str, nlp) -> str:
    """What each row's ``pipeline`` records: the name given and the pipeline's version."""
    return f"{name} {nlp.meta.get('version', '')}".strip()


def write_lexical_rows(utterances: list, nlp, name: str, out: Path, batch_size: int = 64, show_progress: bool = True) -> Counter:
    """Every utterance's row (:func:`lexical_rows`, with its ``pipeline``) to ``out``, through a
    temporary file renamed when complete; returns the nulls as ``"feature: reason"`` -> records."""
    from tqdm.auto import tqdm

    out = Path(out)
    temporary = out.with_name(out.name + ".tmp")
    nulls: Counter = Counter()
    with temporary.open("w", encoding="utf-8") as handle:
        rows = lexical_rows(utterances, nlp, batch_size)
        for row in tqdm(rows, total=len(utterances), desc="lexical", unit="rec", disable=not show_progress):
            row["pipeline"] = pipeline_label(name, nlp)
            nulls.update(f"{feature}: {reason}" for feature, reason in row["null_reasons"].items())
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    temporary.replace(out)
    return nulls
