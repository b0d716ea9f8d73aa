"""Why probes meet no gap (experiments.study.joins): each reason from hand-written keys, and the dry
run's warning on a pooled study, with the grid that would join (issue 45, item 2)."""

import pytest

from experiments.study.__main__ import main
from experiments.study.joins import grid_yaml, why_unjoined
from experiments.study.schema import ProbeGrid
from extract.manifest import read_manifest, write_manifest
from tests.experiments.study.test_study import write_four_voices
from tests.experiments.study.toy_study import toy_study_head


def key(model="wb", dataset="rv", language="fr", task="female-male"):
    return {"model": model, "dataset": dataset, "language": language, "task": task}


GAPS = [key(language=language) for language in ("fr", "it", "ru")]


def test_a_pooled_probe_against_per_language_gaps_names_the_languages_that_would_join():
    (line,) = why_unjoined([key(language="fr+it+ru")], GAPS)
    assert line == (
        "the female-male probes of wb on rv (language fr+it+ru) read the languages pooled in one store, while the gaps are per "
        "language (fr, it, ru): probe each language alone (a grid's `languages: [fr, it, ru]`; `probe --language L`) to join them"
    )


def test_a_pooled_probe_is_offered_only_the_languages_that_have_a_gap():
    (line,) = why_unjoined([key(language="en+fr")], GAPS)
    assert "`languages: [fr]`" in line


@pytest.mark.parametrize(
    "probe, expected",
    [
        (key(language="de"), "the gaps of wb on rv are in fr, it, ru; probe those languages to join them"),
        (key(model="whisper"), "the gaps on rv are of the model(s) wb, not whisper; the join uses the model's label"),
        (key(task="attribute:locale"), "the gaps of wb on rv compare female-male; a gap joins the probes of its own groups"),
        (key(dataset="cv"), "no gap scores cv for wb (behaviour.gap and its corpora; the model transcribes it)"),
    ],
)
def test_each_other_reason_is_named(probe, expected):
    (line,) = why_unjoined([probe], GAPS)
    assert line.endswith(expected) or expected in line, line


def test_one_line_per_model_dataset_and_task_whatever_the_sites():
    probes = [key(language="fr+it+ru")] * 3 + [key(model="other", language="fr+it+ru")]
    assert len(why_unjoined(probes, GAPS)) == 2
    assert why_unjoined([], GAPS) == []


def test_a_grid_is_shown_as_the_study_file_writes_it():
    grid = ProbeGrid(("positional",), ("none", "shuffled"), (0,), ("rv",), options={"positions": 200, "split": "stratified"}, languages=("fr", "it"))
    assert (
        grid_yaml(grid)
        == "{corpora: [rv], probes: [positional], controls: [none, shuffled], seeds: [0], languages: [fr, it], positions: 200, split: stratified}"
    )


POOLED = (
    toy_study_head("pooled", "all: toy-all.jsonl")
    + """\
probes: {{probes: [positional], controls: [none], seeds: [0], positions: 10{options}}}
behaviour: {{gap: {{iterations: 10}}}}
"""
)


def pooled_study(folder, options="", drop=()):
    """English and Italian in one manifest (2 voices a gender each, 5 clips a voice), less the English voices ``drop``."""
    write_four_voices(folder, clips=5)
    rows = [u for language in ("en", "it") for u in read_manifest(folder / f"toy-{language}.jsonl") if (u.language, u.speaker) not in drop]
    write_manifest(folder / "toy-all.jsonl", rows)
    path = folder / "pooled.yaml"
    path.write_text(POOLED.format(options=options))
    return path


def warnings_of(study, capsys) -> list[str]:
    assert main(["run", str(study), "--dry-run"]) == 0
    return [line for line in capsys.readouterr().out.splitlines() if line.startswith("[study] warning: ")]


def test_the_dry_run_warns_that_a_pooled_grid_joins_no_gap_and_shows_the_grid_that_would(tmp_path, capsys):
    (line,) = warnings_of(pooled_study(tmp_path, ", split: loso"), capsys)
    assert line.startswith("[study] warning: probes will join no gap (no f1_vs_gap.csv row, no F1-vs-gap scatter from it): ")
    assert "the female-male probes of tiny on toy (language en+it) read the languages pooled in one store, while the gaps are per language (en, it)" in line
    assert line.endswith(
        "; a grid that joins: {corpora: [toy], probes: [positional], controls: [none], seeds: [0], languages: [en, it], positions: 10, split: loso}"
    )


def test_the_grid_shown_shares_speakers_where_its_split_refuses_a_language_alone(tmp_path, capsys):
    (line,) = warnings_of(pooled_study(tmp_path, ", split: loso", drop={("en", "m1")}), capsys)
    assert "per language, split loso is refused (tiny toy-all: leave-one-speaker-out in language en needs at least 2 male speakers" in line
    assert line.endswith("languages: [en, it], positions: 10, split: stratified}")


def test_a_grid_that_joins_gets_no_warning(tmp_path, capsys):
    assert warnings_of(pooled_study(tmp_path, ", split: loso, languages: [en, it]"), capsys) == []
