"""``probe``: the probe grids' runs on the study's stores, rows of ``probes/probes.jsonl``. Finished:
a row of the run id computed on the stores as they are (:func:`probing.grid.pending`). The plan
makes every grid's split as the run will, so that a split the run would refuse is refused before
anything is extracted. With ``--executor``, one task per ``--cells-per-task`` grid cells."""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import product
from pathlib import Path

from experiments.study.context import Context, StudyStage, Unit, wait_for_outdated
from experiments.study.schema import F0, ProbeGrid, StudyError


def probe_configs(context: Context) -> tuple[list, list[str]]:
    """The grids' runs over the stores that exist, and the stores whose sites are known only once
    extracted (``sites: all`` before extraction). Each grid runs on its models' stores of its corpora,
    at the model's sites it keeps, once per language of its ``languages`` (pooled parts) that the
    model reads (a model restricted to ``languages`` is probed on those only)."""
    from extract.store import ShardReader

    layout = context.layout
    configs, unknown = [], []
    for grid in context.study.probes:
        had, known_sites = len(unknown), set()
        for model in context.study.models:
            if not grid.probes_model(model.name):
                continue
            applied = [str(layout.store(model, part)) for part in context.study.corpus(grid.apply_to).parts] if grid.apply_to else []
            for name in grid.corpora:
                for part in context.study.corpus(name).parts:
                    store = layout.store(model, part)
                    if model.sites == "all" and not store.exists():
                        unknown.append(f"{model.name} {part.name}")
                        continue
                    sites = ShardReader(store, allow_partial=True).sites if model.sites == "all" else model.sites  # the probe refuses an incomplete one
                    known_sites.update(sites)
                    languages = [language for language in grid.languages if language is None or model.languages is None or language in model.languages]
                    for site in (site for site in sites if grid.sites is None or site in grid.sites):
                        configs += grid_runs(grid, store, site, languages, context.device, applied)
        configs += f0_configs(context, grid)
        missing = [site for site in grid.sites or () if site not in known_sites and site != F0]
        if missing and len(unknown) == had and known_sites:
            raise StudyError(
                f"{context.study.path}: {grid.where}.sites: {missing[0]!r} is no site of the stores it probes; their sites: {', '.join(sorted(known_sites))}"
            )
    return configs, sorted(set(unknown), key=unknown.index)


def grid_runs(grid, store: Path, site: str, languages: list, device: str, applied: list[str] = ()) -> list:
    """A grid's runs on one store at one site: every probe, control, seed and language, and an
    applying probe kind once per store in ``applied``."""
    from probing.kinds import KINDS
    from probing.run import ProbeConfig

    configs = []
    for probe, control, seed, language in product(grid.probes, grid.controls, grid.seeds, languages):
        for apply_to in applied if KINDS[probe].applies_to_other_stores and applied else [None]:
            options = grid.options | {"apply_to": apply_to, "device": device, "language": language}
            configs.append(ProbeConfig(str(store), site, probe, control, seed, **options))
    return configs


def f0_configs(context: Context, grid) -> list:
    """A grid's runs on the F0 baseline's stores (when it names the model ``f0``), at site ``f0``."""
    from experiments.analysis.f0 import F0_SITE

    if not grid.models or F0 not in grid.models or (grid.sites is not None and F0_SITE not in grid.sites):
        return []
    parts = [part for name in grid.corpora for part in context.study.corpus(name).parts]
    return [config for part in parts for config in grid_runs(grid, context.layout.f0_store(part), F0_SITE, grid.languages, context.device)]


def check_probe_splits(context: Context, grids: Sequence[ProbeGrid] | None = None) -> None:
    """Make every grid's split on every manifest it will probe, as the probe run will make it (from the
    rows' gender, speaker, language and split: what the store's metadata will hold; an attribute
    task's labels from the rows' ``extra``, as the run reads them from the manifest), so that a split the
    run would refuse is refused by the plan, in one line, before anything is extracted. ``grids``:
    these instead of the study's (a grid the plan proposes, :mod:`experiments.study.joins`)."""
    from probing.data import DEFAULT_SPLIT, ProbeError, leave_one_speaker_out, make_splits, speaker_stratified_splits
    from probing.kinds import KINDS

    study, checked = context.study, {}  # what was split already -> its class names
    grids = study.probes if grids is None else tuple(grids)
    for number, grid in enumerate(grids):
        where = f"{study.path}: probes" + (f" (grid {number + 1} of {len(grids)})" if len(grids) > 1 else "")
        task, split = grid.options.get("task", "female-male"), grid.options.get("split", DEFAULT_SPLIT)
        shared = grid.options.get("allow_shared_speakers", False)
        read = [(model, part, context.model_utterances(model, corpus, part)) for model in study.models if grid.probes_model(model.name)
                for corpus in map(study.corpus, grid.corpora) for part in corpus.parts]  # fmt: skip
        if grid.models and F0 in grid.models:
            read += [(None, part, context.utterances(corpus, part)) for corpus in map(study.corpus, grid.corpora) for part in corpus.parts]
        for model, part, utterances in read:
            metadata = {key: [getattr(utterance, key) for utterance in utterances] for key in ("gender", "speaker", "language", "split")}
            try:
                metadata |= attribute_metadata(task, utterances)
            except ProbeError as error:  # no utterance has the attribute: named as the probe stage names its run
                raise StudyError(f"{where}: {model.name if model else F0} {part.name}: {error}") from None
            except ValueError as error:  # a value the manifest gives is no label
                raise StudyError(f"{where}: {part.manifest}: {error}") from None
            ids = [utterance.id for utterance in utterances]
            languages = [language for language in grid.languages if language is None or model is None or model.languages is None or language in model.languages]
            for language, probe in product(languages, grid.probes):
                dev = bool(KINDS[probe].selects_on_dev)
                key = (part.manifest, model.languages if model else None, task, split, dev, shared, language)
                whose = f"{model.name if model else F0} {part.name}" + (f" ({probe} probe)" if dev else "")
                try:
                    if key not in checked:
                        if split == "loso":
                            checked[key] = leave_one_speaker_out(metadata, ids, task, grid.seeds[0], language, dev=dev)[0].splits.class_names
                        elif split == "stratified":
                            checked[key] = speaker_stratified_splits(metadata, ids, task, grid.seeds[0], language).class_names
                        else:
                            checked[key] = make_splits(metadata, ids, task, grid.seeds[0], language, shared, dev_needed=dev).class_names
                    refuse_what_the_classes_forbid(grid, probe, checked[key])
                except ProbeError as error:
                    raise StudyError(f"{where}: {whose}: {error}") from None


def refuse_what_the_classes_forbid(grid, probe: str, classes: tuple[str, ...]) -> None:
    """The probe stage's refusal of a kind, control, MDL or split defined for two classes on a task
    of more (:func:`probing.run.refuse_many_classes`), made by the plan for each control of ``grid``."""
    from dataclasses import fields

    from probing.run import ProbeConfig, refuse_many_classes

    known = {item.name for item in fields(ProbeConfig)}
    options = {key: value for key, value in grid.options.items() if key in known and key not in ("store", "site", "probe", "control", "seed")}
    for control in grid.controls:
        refuse_many_classes(ProbeConfig(store="", site="", probe=probe, control=control, seed=grid.seeds[0], **options), classes)


def attribute_metadata(task: str, utterances) -> dict:
    """An attribute task's labels as the probe run will read them from the manifest (each utterance's
    ``extra``, :func:`extract.attributes.attribute_value`), as the metadata column it reads; nothing
    for a gender task. An attribute no utterance has is a :class:`probing.data.ProbeError` naming those they have."""
    from extract.attributes import attribute_value
    from probing.data import ProbeError, attribute_column, task_attribute

    attribute = task_attribute(task)
    if attribute is None:
        return {}
    values = [attribute_value(utterance.extra, attribute) for utterance in utterances]
    if all(value is None for value in values):
        found = sorted({name for utterance in utterances for name in utterance.extra or {}})
        raise ProbeError(f"no utterance has a value of extra.{attribute}; the attributes its utterances have: {', '.join(found) or 'none'}")
    return {attribute_column(attribute): values}


def plan(context: Context) -> list[Unit]:
    from probing.grid import pending

    check_probe_splits(context)
    configs, unknown = probe_configs(context)
    extracted = [config for config in configs if all(Path(store).exists() for store in (config.store, config.apply_to) if store)]
    todo, stale = pending(extracted, context.layout.probes) if extracted else ([], 0)
    waiting = {config.run_id() for config in todo} | {config.run_id() for config in configs} - {config.run_id() for config in extracted}
    units = [Unit("probe", _describe(config), config.run_id() not in waiting, "", None, config) for config in configs]
    for unit in units:
        wait_for_outdated(context, unit, [Path(store) for store in (unit.job.store, unit.job.apply_to) if store])
    if stale:
        units.append(Unit("probe", f"{stale} runs finished on stores that changed since", False, "recomputed"))
    units += [Unit("probe", f"{what}: every site", False, "known once extracted") for what in unknown]
    return units


def _describe(config) -> str:
    store = Path(config.store)
    applied = f" applied to {Path(config.apply_to).name}" if config.apply_to else ""
    language = f" language={config.language}" if config.language else ""
    split = f" split={config.split}" if config.split != "fixed" else ""
    task = f" task={config.task}" if config.task != "female-male" else ""
    return f"{store.parent.name} {store.name} {config.site} {config.probe} control={config.control} seed={config.seed}{language}{split}{task}{applied}"


def run(context: Context, units: list[Unit], finished: int = 0, executor=None) -> int:
    """The grids' runs here, or with ``executor`` their cells without a current row, ``--cells-per-task``
    to a task (:func:`experiments.scheduling.submit_grid`); then the rows they replace set aside.
    0, or 1 when a submitted task failed."""
    from experiments.scheduling import submit_grid
    from probing.grid import run_all

    configs, unknown = probe_configs(context)
    if unknown:
        raise StudyError(f"the stores of {', '.join(unknown)} do not exist yet: run the extract stage first")
    if executor is None:
        run_all(configs, context.layout.probes, reclaim_stale=context.reclaim_stale)
        status = 0
    else:
        status = submit_grid(executor, configs, context.layout.probes, context.cells_per_task, context.reclaim_stale)
    if status == 0 and context.layout.probes.exists():
        supersede_probe_rows(context, configs)
    return status


def supersede_probe_rows(context: Context, configs: list) -> None:
    """Rows of earlier runs that a row of this grid's runs replaces: the same (model, dataset,
    language, site, probe, control, seed, task, applied store, split), which collect reads as one
    key, from a run id the grid no longer has (its options changed, or the study folder was moved or
    copied: a run id counts the store's path). They are moved out of ``probes.jsonl``: the whole file
    as it was goes to ``OUT/.superseded/STAMP/probes/probes.jsonl`` (:mod:`extract.supersede`)."""
    import os
    import shutil

    from experiments.results.collect import Probe
    from extract.claims import Claim
    from extract.supersede import superseded_folder
    from probing.results import load_numbered_rows

    path = context.layout.probes
    current = {config.run_id() for config in configs}
    with Claim(path, context.reclaim_stale):
        numbered = load_numbered_rows(path)
        keys = {}
        for run_id, (line, row) in numbered.items():
            try:
                keys[run_id] = Probe(row, path, line).key
            except (KeyError, TypeError, AttributeError):
                continue  # not a row collect joins: left for collect to name
        replaced = {keys[run_id] for run_id in current if run_id in keys}
        superseded = {run_id for run_id, key in keys.items() if run_id not in current and key in replaced}
        if not superseded:
            return
        folder = superseded_folder(context.study.out)
        kept = folder / "kept.jsonl"
        with path.open("rb") as source, kept.open("wb") as target:
            for line in source:
                try:
                    run_id = json.loads(line).get("run_id")
                except (ValueError, AttributeError):
                    run_id = None
                if run_id not in superseded:
                    target.write(line)
        old = folder / path.relative_to(context.study.out)
        old.parent.mkdir(parents=True)
        shutil.copy2(path, old)
        os.replace(kept, path)
    print(f"[study] probe: {len(superseded)} rows of earlier runs of the same probes (other options, or the study folder moved) set aside -> {old}", flush=True)


PROBE = StudyStage(plan, run, lambda context: [context.layout.probes.parent], submit=run)
