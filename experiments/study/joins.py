"""Why probe rows meet no gap, said where it matters: in the plan (``--dry-run``), before hours of
work, and in RESULTS.md, after it.

``collect`` joins a per-position probe without control to a gap by (model, dataset, language, task)
(:mod:`experiments.results.collect`). A probe of a pooled store reads its languages joined
(``fr+it+ru``) while a gap report has one entry per language, so a pooled grid joins nothing; so do
two model labels, two tasks, or a dataset no gap scores. :func:`why_unjoined` names the reason for
each kind of miss and what would join, from the keys alone, so the plan (the keys the study will
write) and the report (``collect.json``'s unmatched keys) say the same thing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

POOLED_JOIN = "+"  # how a probe row spells the languages of a pooled store (extract: sorted, joined)
DEFAULT_TASK = "female-male"


def why_unjoined(probes: Iterable[dict], gaps: Iterable[dict]) -> list[str]:
    """One line per (model, dataset, task) of ``probes`` that meet no gap, naming why and what would
    join. ``probes`` and ``gaps``: dicts with ``model``, ``dataset``, ``language`` and ``task`` (the
    unmatched entries of ``collect.json``, or the keys a study will write); ``gaps`` are every gap
    (matched or not), so that a model or task that differs can be told apart from a missing gap."""
    gaps = [dict(gap) for gap in gaps]
    missing: dict[tuple, list[str]] = defaultdict(list)
    for probe in probes:
        key = (probe["model"], probe["dataset"], probe.get("task") or DEFAULT_TASK)
        if probe["language"] not in missing[key]:
            missing[key].append(probe["language"])
    return [_reason(model, dataset, task, sorted(languages), gaps) for (model, dataset, task), languages in sorted(missing.items(), key=str)]


def _reason(model: str, dataset: str, task: str, languages: list[str], gaps: list[dict]) -> str:
    what = f"the {_task(task)} probes of {model} on {dataset} (language {', '.join(languages)})"
    same = [gap for gap in gaps if (gap["model"], gap["dataset"], gap.get("task") or DEFAULT_TASK) == (model, dataset, task)]
    gap_languages = sorted({gap["language"] for gap in same})
    if same:
        pooled = [language for language in languages if POOLED_JOIN in language]
        parts = sorted({part for language in pooled for part in language.split(POOLED_JOIN)} & set(gap_languages))
        if parts:
            return (
                f"{what} read the languages pooled in one store, while the gaps are per language ({', '.join(gap_languages)}): "
                f"probe each language alone (a grid's `languages: [{', '.join(parts)}]`; `probe --language L`) to join them"
            )
        return f"{what}: the gaps of {model} on {dataset} are in {', '.join(gap_languages)}; probe those languages to join them"
    others = sorted({gap["model"] for gap in gaps if gap["dataset"] == dataset and (gap.get("task") or DEFAULT_TASK) == task})
    if others:
        return f"{what}: the gaps on {dataset} are of the model(s) {', '.join(others)}, not {model}; the join uses the model's label (its `name`)"
    tasks = sorted({gap.get("task") or DEFAULT_TASK for gap in gaps if (gap["model"], gap["dataset"]) == (model, dataset)})
    if tasks:
        return f"{what}: the gaps of {model} on {dataset} compare {', '.join(map(_task, tasks))}; a gap joins the probes of its own groups"
    return f"{what}: no gap scores {dataset} for {model} (behaviour.gap and its corpora; the model transcribes it)"


def _task(task: str) -> str:
    return task.replace("attribute:", "attribute ")


def join_warnings(context) -> list[str]:
    """The plan's warnings (``context``: :class:`experiments.study.context.Context`): each probe grid whose
    per-position probes without control will join no gap of the study, why, and the grid that would
    (with the split it needs, where the grid's own split would refuse the languages alone)."""
    from dataclasses import replace

    from experiments.study.schema import StudyError
    from experiments.study.stages.probe import check_probe_splits

    study = context.study
    gaps = planned_gaps(context)
    if not study.gaps:
        return []
    warnings = []
    for number, grid in enumerate(study.probes):
        probes = planned_probes(context, grid)
        if not probes or any((p["model"], p["dataset"], p["language"], p["task"]) in {_key(g) for g in gaps} for p in probes):
            continue
        where = "probes" + (f" (grid {number + 1} of {len(study.probes)})" if len(study.probes) > 1 else "")
        line = f"{where} will join no gap (no f1_vs_gap.csv row, no F1-vs-gap scatter from it): " + "; ".join(why_unjoined(probes, gaps))
        languages = sorted({g["language"] for g in gaps if any((g["model"], g["dataset"]) == (p["model"], p["dataset"]) for p in probes)})
        pooled = all(part.pooled for corpus in map(study.corpus, grid.corpora) for part in corpus.parts)
        if languages and pooled and grid.languages == (None,):
            joining = replace(grid, languages=tuple(languages))
            try:
                check_probe_splits(context, [joining])
            except StudyError as error:
                refusal = str(error).split(": ", 2)[-1]
                joining = replace(joining, options={**joining.options, "split": "stratified"})
                line += f"; per language, split {grid.options.get('split', 'fixed')} is refused ({refusal}), so speakers are shared"
            line += f"; a grid that joins: {grid_yaml(joining)}"
        warnings.append(line)
    return warnings


def planned_probes(context, grid) -> list[dict]:
    """The (model, dataset, language, task) of the rows ``grid``'s per-position probes without control will write."""
    from probing.kinds import is_per_position

    study = context.study
    if "none" not in grid.controls or not any(is_per_position(probe) for probe in grid.probes):
        return []
    task = grid.options.get("task", DEFAULT_TASK)
    keys = []
    for model in study.models:
        if not grid.probes_model(model.name):
            continue
        for corpus in map(study.corpus, grid.corpora):
            for part in corpus.parts:
                present = sorted({u.language for u in context.model_utterances(model, corpus, part)})
                for language in grid.languages:
                    spelled = language or (part.language if not part.pooled else POOLED_JOIN.join(present))
                    key = {"model": model.name, "dataset": corpus.name, "language": spelled, "task": task}
                    if key not in keys:
                        keys.append(key)
    return keys


def planned_gaps(context) -> list[dict]:
    """The (model, dataset, language, task) of every gap entry the study's gap reports will hold: one
    per language of each part a comparison scores, of each model that transcribes it."""
    from experiments.results.records import gap_task

    study, keys = context.study, []
    for model in study.models:
        for corpus in study.corpora:
            for part in study.transcribed(model, corpus):
                languages = sorted({u.language for u in context.model_utterances(model, corpus, part)})
                for gap in study.gaps_of(corpus, part):
                    keys += [{"model": model.name, "dataset": corpus.name, "language": language, "task": gap_task(gap)} for language in languages]
    return keys


def grid_yaml(grid) -> str:
    """``grid`` as a study file's flow mapping (the keys it sets)."""
    fields = {"models": grid.models, "corpora": grid.corpora, "probes": grid.probes, "controls": grid.controls, "seeds": grid.seeds}
    fields |= {"languages": None if grid.languages == (None,) else grid.languages, "sites": grid.sites, **grid.options}
    shown = [f"{key}: {_flow(value)}" for key, value in fields.items() if value is not None]
    return "{" + ", ".join(shown) + "}"


def _flow(value) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value).lower() if isinstance(value, bool) else str(value)


def _key(gap: dict) -> tuple:
    return gap["model"], gap["dataset"], gap["language"], gap["task"]
