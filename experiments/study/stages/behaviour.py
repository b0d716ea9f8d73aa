"""``asr_gap``, ``mustshe`` and ``st_quality``: a model's behaviour on each hypotheses file it wrote
(a gap report per comparison, MuST-SHE scores, BLEU, chrF and COMET). Finished: the output records
the sha256 of its inputs as they are now and the study's settings."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from experiments.format import number
from experiments.study.context import Context, StudyStage, Unit, wait_for_outdated, with_sidecars
from experiments.study.schema import Corpus, Model, Part, StudyError
from extract.provenance import file_sha256


@dataclass
class Behaviour:
    """One behaviour output: computed from ``inputs`` (the sha256 of each recorded in it), current
    while they are unchanged and ``current(document)`` holds."""

    inputs: list[Path]
    out: Path
    current: Callable[[dict], bool]
    compute: Callable[[], str]


def behaviour_status(behaviour: Behaviour) -> tuple[bool, str]:
    missing = [path for path in behaviour.inputs if not path.exists()]
    if missing:
        return False, f"waits for {missing[0].name}"
    if not behaviour.out.exists():
        return False, ""
    try:
        document = json.loads(behaviour.out.read_text(encoding="utf-8"))
        recorded = [entry["sha256"] for entry in document["inputs"]]
    except (ValueError, KeyError, TypeError):
        return False, "unreadable or without its inputs: recomputed"
    if recorded != [file_sha256(path) for path in behaviour.inputs]:
        return False, "its inputs changed: recomputed"
    if not behaviour.current(document):
        return False, "other settings: recomputed"
    return True, ""


def gap_kind(options: dict) -> str:
    """The name of a gap comparison's outputs: ``gap`` for female against male (``gap-CORPUS-KEY.json``),
    ``gap_A-B`` for another (``gap_other-male-CORPUS-KEY.json``), ``gap_NAME_A-B`` for groups of an
    attribute (``gap_age_teens-thirties``; values that are not letters, digits and dots escaped:
    :func:`extract.attributes.task_file_name`), so that no two comparisons share a file and only the
    female-male reports start ``gap-``."""
    from experiments.results.records import gap_task
    from extract.attributes import task_file_name

    if options.get("attribute"):
        return f"gap_{task_file_name(gap_task(options))}"
    return "gap" if options["groups"] == ["female", "male"] else f"gap_{'-'.join(options['groups'])}"


def gap_behaviour(options: dict, hypotheses: Path, out: Path, manifest: Path | None = None) -> Behaviour:
    """A gap comparison's report of ``hypotheses``; an attribute's reads its labels from ``manifest``
    (the one transcribed, checked by the sha256 the transcription recorded) and depends on it too."""
    from experiments.scoring.asr_metrics import Scoring
    from experiments.scoring.gaps import gap_report, gap_settings, hypotheses_attribute, language_gap_line, read_hypotheses, save_gap_report

    groups, scoring, attribute = tuple(options["groups"]), Scoring(options["normalizer"], options["cer_spaces"]), options.get("attribute")
    settings = gap_settings(groups, options["iterations"], options["seed"], scoring, options["gap_estimate"], attribute=attribute)

    def compute() -> str:
        labels = hypotheses_attribute(hypotheses, attribute) if attribute else None
        rows = read_hypotheses(hypotheses)
        report, counts = gap_report(rows, groups, options["iterations"], options["seed"], scoring, options["gap_estimate"], hypotheses, attribute=labels)
        save_gap_report(report, counts, out)
        return "".join(f"\n  {language}: {language_gap_line(entry, groups)}" for language, entry in report["languages"].items()) + f"\n  -> {out}"

    inputs = [hypotheses, manifest] if attribute else [hypotheses]  # in the order the report records them
    return Behaviour(inputs, out, lambda document: document.get("settings") == settings, compute)


def check_attribute_gap(context: Context, options: dict, model: Model, corpus: Corpus, part: Part, checked: set) -> None:
    """An attribute comparison on ``part`` as ``model`` transcribes it: the plan refuses, in one line
    naming the study file and the comparison's key, an attribute that no utterance has or a group that
    none has (the gap would refuse it after transcription)."""
    from extract.attributes import attribute_value, own_label_hint

    attribute, where = options["attribute"], f"{context.study.path}: {options['where']}"
    utterances = context.model_utterances(model, corpus, part)
    key = (context.manifest(model, corpus, part), attribute, tuple(options["groups"]))
    if key in checked:
        return
    checked.add(key)
    try:
        values = {value for value in (attribute_value(utterance.extra, attribute) for utterance in utterances) if value is not None}
    except ValueError as error:
        raise StudyError(f"{where}.attribute: {key[0]}: {error}") from None
    if not values:
        found = sorted({name for utterance in utterances for name in utterance.extra})
        raise StudyError(
            f"{where}.attribute: no utterance of {part.name} ({key[0]}) has extra.{attribute}; the attributes its utterances have: {', '.join(found) or 'none'}"
            + own_label_hint(attribute, "compare it without attribute")
        )
    absent = [group for group in options["groups"] if group not in values]
    if absent:
        raise StudyError(
            f"{where}.groups: no utterance of {part.name} ({key[0]}) has {attribute} {absent[0]!r}; its values: {', '.join(sorted(values))}; "
            "name groups it has, or leave the part out of the comparison (languages, corpora)"
        )


def mustshe_behaviour(definition: Path, hypotheses: Path, target: str, out: Path) -> Behaviour:
    from experiments.scoring.mustshe import save_scores, score_hypotheses
    from extract.corpora.must_she import read_definition

    def compute() -> str:
        result, rows = score_hypotheses(read_definition(definition), hypotheses, target, definition=definition)
        save_scores(result, rows, out)
        accuracy = (result.get("category_1") or {}).get("accuracy")
        return f"category-1 accuracy {number(accuracy, 2)} -> {out}"

    return Behaviour([definition, hypotheses], out, lambda document: (document.get("subject") or {}).get("tgt_lang") == target, compute)


def quality_behaviour(context: Context, hypotheses: Path, out: Path, scorers: dict) -> Behaviour:
    from experiments.scoring.translation_quality import comet_scorer, quality_report, read_rows, save_quality_report

    options = context.study.st_quality

    def compute() -> str:
        rows = read_rows(hypotheses)
        if options["comet_model"] and "comet" not in scorers:
            scorers["comet"] = comet_scorer(options["comet_model"], options["batch_size"], options["gpus"], python=options["comet_python"])
        result = quality_report(rows, hypotheses, scorers.get("comet"), options["comet_model"])
        save_quality_report(result, out)
        return f"BLEU {number(result['groups']['all']['bleu'], 2)} -> {out}"

    return Behaviour([hypotheses], out, lambda document: document.get("comet_model") == options["comet_model"], compute)


def _compared(options: dict) -> str:
    """A gap comparison as the plan names it: ``other,male``, or ``age: teens,thirties``."""
    return (f"{options['attribute']}: " if options["attribute"] else "") + ",".join(options["groups"])


def plan_behaviour(context: Context, stage: str) -> list[Unit]:
    study, layout, units, scorers, checked = context.study, context.layout, [], {}, set()
    for model in study.models:
        for corpus in study.corpora:
            for part in study.transcribed(model, corpus):
                for target in part.targets:
                    hypotheses = layout.hypotheses(model, part, target)
                    if stage == "asr_gap":
                        for options in study.gaps_of(corpus, part):
                            manifest = None
                            if options["attribute"]:
                                check_attribute_gap(context, options, model, corpus, part, checked)
                                manifest = context.manifest(model, corpus, part)
                            behaviour = gap_behaviour(options, hypotheses, layout.behaviour(gap_kind(options), model, part, target), manifest)
                            done, note = behaviour_status(behaviour)
                            compared = "" if gap_kind(options) == "gap" else f" ({_compared(options)})"
                            units.append(Unit(stage, f"{model.name} {part.output_name(target)}{compared}", done, note, model, behaviour))
                        continue
                    if stage == "mustshe" and part.mustshe is not None:
                        behaviour = mustshe_behaviour(part.mustshe, hypotheses, target, layout.behaviour("mustshe", model, part, target))
                    elif stage == "st_quality" and study.scored("st_quality", corpus):
                        behaviour = quality_behaviour(context, hypotheses, layout.behaviour("st_quality", model, part, target), scorers)
                    else:
                        continue
                    done, note = behaviour_status(behaviour)
                    units.append(Unit(stage, f"{model.name} {part.output_name(target)}", done, note, model, behaviour))
                    wait_for_outdated(context, units[-1], behaviour.inputs)
    return units


def behaviour_outputs(context: Context, stage: str) -> list[Path]:
    """The outputs of a behaviour stage that exist (what ``collect`` reads)."""
    return [unit.job.out for unit in plan_behaviour(context, stage) if unit.job.out.exists()]


def run(context: Context, units: list[Unit]) -> None:
    """Each unit's :class:`Behaviour` computed, its summary printed."""
    for unit in units:
        print(f"[study] {unit.stage} {unit.what}: {unit.job.compute()}", flush=True)


def _stage(name: str) -> StudyStage:
    plan = partial(plan_behaviour, stage=name)
    return StudyStage(plan, run, lambda context: with_sidecars(Path(unit.job.out) for unit in plan(context)))


ASR_GAP, MUSTSHE, ST_QUALITY = _stage("asr_gap"), _stage("mustshe"), _stage("st_quality")
