"""``transcribe``: a hypotheses file per model, transcribed part and target. Finished: the settings
file records this model, task, target, trim and manifest, and every manifest id has a row (or was
skipped for bad audio in this study's earlier run, listed in ``OUT.skipped.json``). With
``--executor``, one task per hypotheses file."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from experiments.study.context import Context, StaleOutput, StudyStage, Unit, run_by_model, stale_or_status, submit_tasks, with_sidecars
from experiments.study.schema import Corpus, Model, Part, StudyError
from extract.provenance import file_sha256

# known before the model loads; decoding.overrides: num_beams and max_new_tokens (a finished file written with another bound is stale, not done)
COMPARED_SETTINGS = ("model", "family", "task", "tgt_lang", "dtype", "max_seconds", "manifest_sha256", "decoding.overrides")


def transcription_job(context: Context, model: Model, corpus: Corpus, part: Part, target: str | None):
    from extract.families.generation import GenerationOptions
    from extract.jobs import TranscriptionJob

    options = context.study.transcribe
    engine = {"engine": options["engine"], "compute_type": options["compute_type"]}
    generation = GenerationOptions(options["num_beams"], options["max_new_tokens"], model.decoder, options["translate_by_forcing"], **engine)
    spec, manifest, out = context.spec(model), context.manifest(model, corpus, part), context.layout.hypotheses(model, part, target)
    trims = {"batch_seconds": options["batch_seconds"], "max_seconds": options["max_seconds"]}
    return TranscriptionJob(spec, manifest, out, corpus.task, tgt_lang=target, name=model.name, options=generation, **trims)


def skipped_path(hypotheses: Path) -> Path:
    """``OUT.skipped.json``: the ids a study's transcription skipped for bad audio, so that a rerun does not retry them."""
    return hypotheses.with_name(hypotheses.name + ".skipped.json")


def hypotheses_status(job, ids: list[str], reclaim_stale: bool = False) -> tuple[bool, str]:
    from extract.claims import claim_path, describe_holder, read_holder, stale_holder
    from extract.families import FAMILIES
    from extract.provenance import read_settings
    from extract.runner import finished_ids, holds_rows

    claimed = claim_path(job.out).exists()
    gone = stale_holder(claim_path(job.out)) if claimed else None  # a stopped run's claim on this host
    if gone and not reclaim_stale:  # the run would refuse it: say so now, not after the stages before it ran
        raise StudyError(
            f"{job.out} is claimed by {describe_holder(gone)}, which is gone (a run that was stopped): "
            "rerun with --reclaim-stale to take the claim over and resume it"
        )
    reclaimed = f"claimed by {describe_holder(gone)}, which is gone: --reclaim-stale takes it over and resumes" if gone else ""
    if not job.out.exists() or not Path(job.manifest).exists():
        return False, reclaimed
    recorded, manifest_sha256 = read_settings(job.out), file_sha256(job.manifest)
    expected = {"model": job.model_name(), "family": job.spec.family, "task": job.task, "tgt_lang": job.tgt_lang, "dtype": job.spec.dtype}
    expected |= {"max_seconds": job.trim_seconds, "manifest_sha256": manifest_sha256}
    recorded = recorded | {"decoding.overrides": recorded.get("decoding", {}).get("overrides")}
    expected["decoding.overrides"] = FAMILIES[job.spec.family].generator.decoding_overrides(job.options)
    differing = [key for key in COMPARED_SETTINGS if recorded.get(key) != expected[key]]
    if differing and holds_rows(job.out):  # the settings of a run that wrote no row are replaced, not refused (check_settings)
        shown = ", ".join(f"{key}: {recorded.get(key)!r} vs {expected[key]!r}" for key in differing)
        raise StaleOutput(job.out, job.manifest, f"other settings: {shown}", "transcription")
    if differing:
        return False, "its settings are rewritten: no row was written with them"
    if gone:
        return False, reclaimed
    if claimed:  # reading it would take the claim: the transcription says whether it may
        holder = read_holder(claim_path(job.out))
        return False, f"claimed by {describe_holder(holder) if holder else 'another writer'}: the transcription will say whether it resumes"
    done = finished_ids(job.out)
    ledger = skipped_path(job.out)
    if ledger.exists():
        skipped = json.loads(ledger.read_text(encoding="utf-8"))
        done |= {item["id"] for item in skipped["skipped"]} if skipped.get("manifest_sha256") == manifest_sha256 else set()
    todo = sum(identifier not in done for identifier in ids)
    return not todo, f"{todo} of {len(ids)} utterances to do" if todo else f"{len(ids)} utterances"


def check_tiny_transcription(context: Context, model: Model) -> None:
    """A tiny random model the study transcribes with must have a tokenizer offline (Whisper's does)."""
    from extract.families import FAMILIES
    from extract.families.generation import GenerationOptions, tiny_refusal
    from extract.spec import TINY_RANDOM

    if model.checkpoint == TINY_RANDOM and not FAMILIES[model.family].generator.tiny_can_transcribe(GenerationOptions(decoder=model.decoder)):
        raise StudyError(f"{context.study.path}: models[{context.study.models.index(model)}] ({model.name}): {tiny_refusal(model.family)}")


def transcription_jobs(context: Context) -> Iterator[tuple[Model, object, object, object, object]]:
    """Each hypotheses file the study writes: its model, corpus, part, target and job (no status, as
    :func:`experiments.study.stages.extract.extraction_jobs`)."""
    for model in context.study.models:
        for corpus in context.study.corpora:
            for part in context.study.transcribed(model, corpus):
                for target in part.targets:
                    yield model, corpus, part, target, transcription_job(context, model, corpus, part, target)


def plan(context: Context) -> list[Unit]:
    units = []
    for model in context.study.models:
        if any(context.study.transcribed(model, corpus) for corpus in context.study.corpora):
            check_tiny_transcription(context, model)
    for model, corpus, part, target, job in transcription_jobs(context):
        ids = [utterance.id for utterance in context.model_utterances(model, corpus, part)]
        done, note = stale_or_status(context, "transcribe", lambda job=job, ids=ids: hypotheses_status(job, ids, context.reclaim_stale))
        if not done and job.out.exists():
            context.outdated[job.out] = ("transcribe", note)
        units.append(Unit("transcribe", f"{model.name} {part.output_name(target)} ({corpus.task})", done, note, model, job, len(ids)))
    return units


def run(context: Context, units: list[Unit]) -> None:
    from extract.jobs import transcribe
    from extract.spec import load_generator

    def each(unit: Unit, generator) -> None:
        started = time.time()
        report = transcribe(unit.job, context.show_progress, generator=generator, reclaim_stale=context.reclaim_stale)
        if report.skipped:
            record = {"manifest_sha256": file_sha256(unit.job.manifest), "skipped": report.skipped}
            skipped_path(unit.job.out).write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(
            f"[study] transcribe {unit.what}: {report.written} written, {report.total - report.todo} already there, "
            f"{len(report.skipped)} skipped for bad audio ({time.time() - started:.1f} s) -> {unit.job.out}",
            flush=True,
        )

    run_by_model(context, "transcribe", units, lambda job: load_generator(job.spec, job.options), each)


def submit(context: Context, units: list[Unit], finished: int, executor) -> int:
    """One task per unfinished hypotheses file."""
    from experiments.scheduling import transcription_tasks

    tasks = []
    for unit in units:
        ids = [utterance.id for utterance in context.manifests[unit.job.manifest]]
        tasks += [replace(task, name=unit.what) for task in transcription_tasks(unit.job, ids)[0]]
    return submit_tasks(executor, "transcribe", tasks, finished)


TRANSCRIBE = StudyStage(plan, run, lambda context: with_sidecars(Path(job.out) for *_, job in transcription_jobs(context)), submit)
