"""``extract``: a store per model and part it probes. Finished: every part of every shard complete,
written with this store configuration (the manifest by its sha256); a store of other settings is
left to :func:`extract.jobs.extract`, which refuses it in one line. With ``--executor``, one task per
store shard."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from experiments.study.context import Context, StaleOutput, StudyStage, Unit, run_by_model, stale_or_status, submit_tasks
from experiments.study.schema import Corpus, Model, Part, StudyError
from extract.provenance import file_sha256


def extraction_job(context: Context, model: Model, corpus: Corpus, part: Part):
    from extract.families import FAMILIES
    from extract.jobs import ExtractionJob

    options = dict(context.study.extract)
    options["keep_padding"] = options["keep_padding"] and "keep_padding" in FAMILIES[model.family].extractor.load_options  # Whisper only
    manifest = context.manifest(model, corpus, part)
    return ExtractionJob(context.spec(model), manifest, context.layout.store(model, part), sites=model.sites, label=model.name, **options)


def store_status(job, utterances: int) -> tuple[bool, str]:
    """Whether the store of ``job`` is finished (see the module docstring), and a note saying what is there."""
    from experiments.scheduling import shard_parts
    from extract.fingerprint import compared
    from extract.store import ShardReader, comparable_config, differing_keys, is_complete

    if not Path(job.manifest).exists():
        return False, "its manifest is written when the study runs"
    if any(is_complete(path) for path in Path(job.out).glob("*.h5")):
        before = ShardReader(job.out, allow_partial=True).info.config.get("manifest_sha256")  # a store being written: its config only
        if before is not None and before != (now := file_sha256(job.manifest)):
            raise StaleOutput(job.out, job.manifest, f"sha256 {before[:12]}… then, {now[:12]}… now", "extraction")
    parts = [Path(job.out) / name for shard in range(job.num_shards) for name in shard_parts(job, utterances, shard)]
    complete = sum(is_complete(path) for path in parts)
    if complete < len(parts):
        return False, f"{complete} of {len(parts)} parts complete" if complete else ""
    if any(Path(job.out).glob("*.h5.lock")):  # a writer runs, or was killed as its last part ended: readers refuse the store until it is gone
        return False, "a writer's claim sits beside its complete parts"
    stored = ShardReader(job.out, allow_partial=True).info.config  # its config only: the probe stage refuses an incomplete store
    requested = stored.get("sites") if job.sites == "all" or set(job.sites) == set(stored.get("sites", ())) else list(job.sites)
    expected = job.store_config(requested, job.spec.resolved_checkpoint(), job.spec.fingerprint())
    stored, expected = compared(comparable_config(stored), comparable_config(expected))  # as a resume compares them
    differing = sorted(key for key in set(stored) | set(expected) if stored.get(key) != expected.get(key))
    if differing:
        raise StaleOutput(job.out, job.manifest, f"other settings: {differing_keys(stored, expected)}", "extraction")
    return True, f"{utterances} utterances, {len(stored.get('sites', []))} sites"


def extraction_jobs(context: Context) -> Iterator[tuple[Model, object, object, object]]:
    """Each store the study extracts: its model, job, corpus and part (no status: ``--redo`` lists
    them to set aside, where a status would refuse a stale one)."""
    for model in context.study.models:
        for corpus in context.study.probed(model):
            for part in corpus.parts:
                yield model, extraction_job(context, model, corpus, part), corpus, part


def refuse_unknown_sites(context: Context) -> None:
    """A model's ``sites`` that its site table lacks are refused by the plan (so by ``--dry-run``),
    wherever the table is known without loading weights (:meth:`extract.spec.ModelSpec.offline_sites`).
    Once a run: the plan is made again before each stage, and building a site table takes seconds."""
    if context.sites_checked:
        return
    for index, model in enumerate(context.study.models):
        if model.sites == "all" or any(name.startswith("every:") for name in model.sites):
            continue
        known = context.spec(model).offline_sites()
        unknown = [name for name in model.sites if known is not None and name not in known]
        if unknown:
            raise StudyError(
                f"{context.study.path}: models[{index}].sites: unknown site(s) {', '.join(unknown)} for {model.name} "
                f"({model.family}); its sites: {', '.join(known)}"
            )
    context.sites_checked = True


def plan(context: Context) -> list[Unit]:
    refuse_unknown_sites(context)
    units = []
    for model, job, corpus, part in extraction_jobs(context):
        size = len(context.model_utterances(model, corpus, part))
        done, note = stale_or_status(context, "extract", lambda job=job, size=size: store_status(job, size))
        if not done and Path(job.out).exists():
            context.outdated[Path(job.out)] = ("extract", note or "not complete")
        units.append(Unit("extract", f"{model.name} {part.name}", done, note, model, job, size))
    return units


def run(context: Context, units: list[Unit]) -> None:
    from extract.families import UnknownSiteError
    from extract.jobs import extract
    from extract.spec import load_extractor

    def each(unit: Unit, extractor) -> None:
        started = time.time()
        for shard in range(unit.job.num_shards):
            try:
                sites, report = extract(replace(unit.job, shard_index=shard), context.show_progress, context.reclaim_stale, extractor=extractor)
            except UnknownSiteError as error:
                raise StudyError(f"{context.study.path}: models {unit.model.name}: sites: {error.args[0]}") from None
        print(
            f"[study] extract {unit.what}: {len(sites)} sites, {report.written} written, {report.resumed} already there, "
            f"{len(report.skipped)} skipped for bad audio ({time.time() - started:.1f} s) -> {unit.job.out}",
            flush=True,
        )

    run_by_model(context, "extract", units, lambda job: load_extractor(job.spec, keep_padding=job.keep_padding), each)


def submit(context: Context, units: list[Unit], finished: int, executor) -> int:
    """One task per unfinished shard of each store."""
    from experiments.scheduling import extraction_tasks

    tasks = [replace(task, name=f"{unit.what} {task.name}") for unit in units for task in extraction_tasks(unit.job, unit.size)[0]]
    return submit_tasks(executor, "extract", tasks, finished)


EXTRACT = StudyStage(plan, run, lambda context: [Path(job.out) for _, job, _, _ in extraction_jobs(context)], submit)
