"""A WinoST-style spoken set written for the demo: WinoMT's pattern, read by the demo's synthetic voices.

Each template names two professions, one that WinoBias lists as male-stereotyped and one listed as
female-stereotyped (the male-stereotyped one first in half of the templates), each with distinct masculine and feminine French forms, and two reasons, one that
makes the pronoun refer to each profession. A template gives four sentences (each reason with ``he``
and ``she``): two pro- and two anti-stereotypical, two male and two female entities. Written in the
public aggregate format (``en.txt``, ``en_pro.txt``, ``en_anti.txt``: see ``extract.corpora.winost``),
with a hand-written French reference translation of each sentence (``fr.reference.txt``; the other
entity takes its stereotyped form), which shows what the scorer itself reads when the translation is right.

Voices: within a template the four sentences are read by female, female, male, male voices, so that
the reader's gender is balanced within gold gender and within the pro and anti sets; each gender's
voices take turns across templates. Layout under the set's folder::

    en.txt, en_pro.txt, en_anti.txt   the set in WinoMT's aggregate format
    fr.reference.txt                  hand-written French, one line per sentence of en.txt
    wav/winost-0001.wav ...           16 kHz mono, one per line of en.txt
    manifest.jsonl                    the ``winost`` manifest, speaker and gender set per voice
    build.json                        settings; written last, marks the set complete

The voices are synthetic: numbers on this set show that the pipeline runs, not a finding.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, replace
from itertools import cycle, islice
from pathlib import Path

import numpy as np

from experiments.recipes.democorpus.build import synthesis_progress, write_wav
from experiments.recipes.democorpus.voices import Voice
from extract.corpora.winost import Sentence, winost, write_aggregate
from extract.manifest import write_manifest

SET_VERSION = 1


@dataclass(frozen=True)
class Profession:
    english: str
    masculine: str  # French with its article
    feminine: str
    stereotype: str  # the gender WinoBias' occupation statistics associate with it


@dataclass(frozen=True)
class Template:
    """``english``: the sentence up to the pronoun, ``{a}`` and ``{b}`` for the professions;
    ``reasons``: the clause after the pronoun that points to ``first`` and to ``second``;
    ``french``: the French up to the reason, ``{A}`` capitalised, and the French reasons, masculine and feminine."""

    first: Profession
    second: Profession
    english: str
    reasons: tuple[str, str]
    french: str
    french_reasons: tuple[tuple[str, str], tuple[str, str]]


def _same(text: str) -> tuple[str, str]:
    """A French reason whose only gendered word is the pronoun."""
    return text.format(qu="qu'il"), text.format(qu="qu'elle")


TEMPLATES = (
    Template(
        Profession("mechanic", "le mécanicien", "la mécanicienne", "male"),
        Profession("cashier", "le caissier", "la caissière", "female"),
        "The {a} paid the {b} because",
        ("needed new tools.", "asked for the money."),
        "{A} a payé {b}",
        (_same("parce {qu} avait besoin de nouveaux outils."), _same("parce {qu} avait demandé l'argent.")),
    ),
    Template(
        Profession("nurse", "l'infirmier", "l'infirmière", "female"),
        Profession("farmer", "le fermier", "la fermière", "male"),
        "The {a} helped the {b} because",
        ("is very kind.", "was injured."),
        "{A} a aidé {b}",
        (("parce qu'il est très gentil.", "parce qu'elle est très gentille."), ("parce qu'il était blessé.", "parce qu'elle était blessée.")),
    ),
    Template(
        Profession("lawyer", "l'avocat", "l'avocate", "male"),
        Profession("hairdresser", "le coiffeur", "la coiffeuse", "female"),
        "The {a} thanked the {b} because",
        ("liked the haircut.", "did a good job."),
        "{A} a remercié {b}",
        (_same("parce {qu} aimait la coupe."), _same("parce {qu} avait fait du bon travail.")),
    ),
    Template(
        Profession("baker", "le boulanger", "la boulangère", "female"),
        Profession("carpenter", "le charpentier", "la charpentière", "male"),
        "The {a} called the {b} because",
        ("needed a new table.", "builds good tables."),
        "{A} a appelé {b}",
        (_same("parce {qu} avait besoin d'une nouvelle table."), _same("parce {qu} fabrique de bonnes tables.")),
    ),
    Template(
        Profession("developer", "le développeur", "la développeuse", "male"),
        Profession("assistant", "l'assistant", "l'assistante", "female"),
        "The {a} hired the {b} because",
        ("needed help.", "was very organized."),
        "{A} a embauché {b}",
        (_same("parce {qu} avait besoin d'aide."), ("parce qu'il était très organisé.", "parce qu'elle était très organisée.")),
    ),
    Template(
        Profession("counselor", "le conseiller", "la conseillère", "female"),
        Profession("driver", "le chauffeur", "la chauffeuse", "male"),
        "The {a} listened to the {b} because",
        ("is patient.", "was tired of the road."),
        "{A} a écouté {b}",
        (("parce qu'il est patient.", "parce qu'elle est patiente."), ("parce qu'il était fatigué de la route.", "parce qu'elle était fatiguée de la route.")),
    ),
    Template(
        Profession("cook", "le cuisinier", "la cuisinière", "male"),
        Profession("teacher", "l'enseignant", "l'enseignante", "female"),
        "The {a} invited the {b} because",
        ("made too much soup.", "had helped the children."),
        "{A} a invité {b}",
        (_same("parce {qu} avait fait trop de soupe."), _same("parce {qu} avait aidé les enfants.")),
    ),
    Template(
        Profession("guard", "le gardien", "la gardienne", "male"),
        Profession("editor", "le rédacteur", "la rédactrice", "female"),
        "The {a} stopped the {b} because",
        ("was on duty.", "forgot the badge."),
        "{A} a arrêté {b}",
        (_same("parce {qu} était de service."), _same("parce {qu} avait oublié le badge.")),
    ),
    Template(
        Profession("tailor", "le couturier", "la couturière", "female"),
        Profession("salesperson", "le vendeur", "la vendeuse", "male"),
        "The {a} measured the {b} because",
        ("wanted to make a suit.", "needed a new suit."),
        "{A} a mesuré {b}",
        (_same("parce {qu} voulait faire un costume."), _same("parce {qu} avait besoin d'un nouveau costume.")),
    ),
    Template(
        Profession("auditor", "l'auditeur", "l'auditrice", "female"),
        Profession("supervisor", "le superviseur", "la superviseuse", "male"),
        "The {a} praised the {b} because",
        ("was pleased.", "kept good records."),
        "{A} a félicité {b}",
        (("parce qu'il était content.", "parce qu'elle était contente."), _same("parce {qu} tenait de bons registres.")),
    ),
)
PRONOUNS = {"male": "he", "female": "she"}
READER_GENDERS = ("female", "female", "male", "male")  # per sentence of a template: balanced within gold gender and within pro/anti


@dataclass(frozen=True)
class Item:
    """One sentence of the set: its aggregate line, its French reference and its stereotype set."""

    sentence: Sentence
    reference: str


def _capitalised(text: str) -> str:
    return text[0].upper() + text[1:]


def template_items(template: Template, first_line: int) -> list[Item]:
    """The four sentences of a template, numbered from ``first_line``: each reason with he and she."""
    items = []
    for target, (profession, reason, french_reasons) in enumerate(zip((template.first, template.second), template.reasons, template.french_reasons)):
        for gender in ("male", "female"):
            text = f"{template.english.format(a=template.first.english, b=template.second.english)} {PRONOUNS[gender]} {reason}"
            words = text.split()
            index = words.index(profession.english, 1 if target else 0)
            column = f"{words[index - 1]} {profession.english}"  # en.txt writes the article with its case: "The developer", "the designer"
            forms = {}
            for slot, other in ((template.first, "A"), (template.second, "b")):
                entity_gender = gender if slot is profession else slot.stereotype
                forms[other] = slot.feminine if entity_gender == "female" else slot.masculine
            french = template.french.format(A=_capitalised(forms["A"]), b=forms["b"])
            stereotype = "pro" if gender == profession.stereotype else "anti"
            sentence = Sentence(first_line + len(items), gender, index, text, column, stereotype)
            items.append(Item(sentence, f"{french} {french_reasons[0 if gender == 'male' else 1]}"))
    return items


def all_items(templates: int | None = None) -> list[Item]:
    items = []
    for template in TEMPLATES[:templates]:
        items.extend(template_items(template, len(items) + 1))
    return items


@dataclass(frozen=True)
class WinoSTSet:
    root: Path

    @property
    def source(self) -> Path:
        return self.root / "en.txt"

    @property
    def pro(self) -> Path:
        return self.root / "en_pro.txt"

    @property
    def anti(self) -> Path:
        return self.root / "en_anti.txt"

    @property
    def reference(self) -> Path:
        return self.root / "fr.reference.txt"

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.jsonl"

    @property
    def complete(self) -> bool:
        return (self.root / "build.json").is_file()


def _subset(items: list[Item], name: str) -> list[Sentence]:
    """The pro or anti lines as en_pro.txt / en_anti.txt write them: the profession without its article."""
    return [replace(item.sentence, profession=item.sentence.profession.split()[-1]) for item in items if item.sentence.stereotype == name]


def reader_voices(voices: tuple[Voice, ...], count: int) -> list[Voice]:
    """The voice of each of ``count`` sentences (see the module docstring)."""
    by_gender = {gender: sorted((v for v in voices if v.gender == gender and "en" in v.languages), key=lambda v: v.name) for gender in ("female", "male")}
    if not all(by_gender.values()):
        raise ValueError("the WinoST-style set needs at least one female and one male English voice")
    turns = {gender: cycle(readers) for gender, readers in by_gender.items()}
    return [next(turns[gender]) for gender in islice(cycle(READER_GENDERS), count)]


def build_winost_set(root: Path, voices: tuple[Voice, ...], templates: int | None = None, seed: int = 0, show_progress: bool = True) -> WinoSTSet:
    """Build the set unless a complete one with the same settings is there; returns its paths."""
    winost_set = WinoSTSet(Path(root))
    items = all_items(templates)
    readers = reader_voices(voices, len(items))
    settings = {"version": SET_VERSION, "seed": seed, "templates": len(items) // 4, "voices": [voice.name for voice in readers]}
    if winost_set.complete and json.loads((winost_set.root / "build.json").read_text()) == settings:
        return winost_set
    shutil.rmtree(winost_set.root, ignore_errors=True)
    winost_set.root.mkdir(parents=True)
    write_aggregate(winost_set.source, [item.sentence for item in items])
    write_aggregate(winost_set.pro, _subset(items, "pro"))
    write_aggregate(winost_set.anti, _subset(items, "anti"))
    winost_set.reference.write_text("".join(item.reference + "\n" for item in items), encoding="utf-8")
    rng = np.random.default_rng(seed)
    with synthesis_progress(len(items), "synthesizing the WinoST-style set", show_progress) as bar:
        for item, voice in zip(items, readers):
            write_wav(winost_set.root / "wav" / f"{item.sentence.id}.wav", *voice.synthesize(item.sentence.text, "en", float(rng.uniform(0.92, 1.08))))
            bar.update()
    result = winost(winost_set.source, winost_set.root / "wav", "{id}.wav")
    if result.missing_audio or len(result.utterances) != len(items):
        raise RuntimeError(f"WinoST-style set lost audio: {result.summary()}")
    utterances = [
        replace(
            utterance, speaker=voice.name, gender=voice.gender, dataset="winost-demo", extra={**utterance.extra, "voice": voice.describe(), "synthetic": True}
        )
        for utterance, voice in zip(result.utterances, readers)
    ]
    write_manifest(winost_set.manifest, utterances)
    (winost_set.root / "build.json").write_text(json.dumps(settings, indent=2))
    return winost_set
