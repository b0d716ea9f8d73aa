"""A study's stages: what each would write, whether that is already there, and running what is not.

:func:`plan` turns a :class:`~experiments.study.schema.Study` into :class:`Unit` s, one per output
of a stage, each knowing whether its output is finished. :func:`run_stage` computes the unfinished
ones through the library, in this process, or (extraction, transcription, probes) as one submitit
job array per stage through :mod:`experiments.scheduling`. What counts as finished is each stage's
own rule:

- ``extract``: every part of every shard complete, written with this store configuration (the
  manifest by its sha256); a store of other settings is left to :func:`extract.jobs.extract`, which
  refuses it in one line;
- ``f0``: the F0 store (``experiments.f0_baseline``) records this manifest (by its sha256) and pitch
  range rule;
- ``transcribe``: the settings file records this model, task, target, trim and manifest, and every
  manifest id has a row (or was skipped for bad audio in this study's earlier run, listed in
  ``OUT.skipped.json``);
- ``probe``: a row of the run id computed on the stores as they are (:func:`probing.grid.pending`);
- ``asr_gap``, ``mustshe``, ``st_quality``: the output records the sha256 of the inputs as they
  are now and the study's settings;
- ``acoustic``: the stamp ``OUT.inputs.json`` beside the feature rows records this manifest (its
  sha256) and these settings, and that every record was computed; rows from another manifest or
  settings, or without the stamp (written before the first row), are refused (they are appended
  to: ``--redo acoustic``);
- ``lexical``: the stamp records this manifest and pipeline (rewritten whole when they change);
- ``feature_gaps``: the output records the sha256 of its manifests, feature files and gap reports
  as they are now and the study's options;
- ``collect``, ``correlate``, ``figures``, ``report``: every output newer than every input.

Layout under the study's ``out``: ``manifests/MODEL/CORPUS-all.jsonl`` (a pooled part restricted to a
model's languages), ``stores/MODEL/CORPUS-KEY`` (``stores/f0/CORPUS-KEY``: the F0 baseline), ``hyps/MODEL/CORPUS-KEY[-TGT].jsonl``,
``behaviour/MODEL/{gap,gap_A-B,gap_NAME_A-B,mustshe,st_quality}-CORPUS-KEY[-TGT].json`` (``gap_other-male``: a
second gap comparison; ``gap_age_teens-thirties``: groups of an attribute), ``probes/probes.jsonl``,
``features/`` (``analyses``: ``acoustic-CORPUS-KEY.jsonl`` with its ``.ranges.json``, ``.summary.json``
and ``.inputs.json``; ``lexical-CORPUS-KEY[-LANG].jsonl`` (LANG on a pooled part) with its
``.inputs.json``; ``feature_gaps-CORPUS.json`` with ``.contrasts.csv`` and ``.setups.csv``),
``results/`` (collect's tables, ``correlations.json``), ``figures/``, ``RESULTS.md``, ``logs/``.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from itertools import product
from pathlib import Path

from experiments.stage_table import JOB_ARRAY_STAGES, STUDY_STAGES
from experiments.study.schema import F0, Corpus, Model, Part, ProbeGrid, Study, StudyError
from extract.manifest import read_manifest
from extract.provenance import file_sha256

STAGES = STUDY_STAGES  # in the order a study runs them (experiments.stage_table, the one list of stages)
EXECUTOR_STAGES = tuple(stage for stage in STAGES if stage in JOB_ARRAY_STAGES)  # the stages submitted as job arrays with --executor
ANALYSIS_STAGES = ("acoustic", "lexical", "feature_gaps")  # Attanasio et al. 2024, section 5 (experiments.study.analyses)
SHOWN = 12  # units listed per stage in the printed plan


def study_errors() -> tuple[type[BaseException], ...]:
    """What a stage raises for a problem the user can fix: one ``error:`` line, exit status 2."""
    from experiments.analysis.acoustic import AcousticError
    from experiments.analysis.contrasts import ContrastError
    from experiments.analysis.f0 import F0Error
    from experiments.analysis.lexical import LexicalError
    from experiments.results.collect import CollectError
    from experiments.results.correlation import CorrelationError
    from experiments.scheduling import SchedulingError
    from experiments.scoring.translation_quality import CometUnavailableError
    from extract.claims import ClaimError
    from extract.corpora.must_she import MustSheError
    from extract.families.errors import NonFiniteError
    from extract.families.generation import LanguageCodeError
    from extract.interventions import InterventionError
    from extract.runner import SettingsMismatchError
    from extract.spec import LOAD_ERRORS
    from extract.store import StoreError
    from extract.supersede import SupersedeError
    from probing.data import ProbeError
    from probing.grid import GridError
    from probing.results import ResultsError

    stages = (
        GridError,
        ProbeError,
        ResultsError,
        StoreError,
        NonFiniteError,
        SettingsMismatchError,
        MustSheError,
        CollectError,
        CorrelationError,
        CometUnavailableError,
    )
    analyses = (AcousticError, LexicalError, ContrastError)
    return (StudyError, *stages, F0Error, *analyses, SchedulingError, InterventionError, LanguageCodeError, SupersedeError, ClaimError, *LOAD_ERRORS)


@dataclass(frozen=True)
class Layout:
    """Where a study writes each output."""

    out: Path

    def store(self, model: Model, part: Part) -> Path:
        return self.out / "stores" / model.name / part.name

    def f0_store(self, part: Part) -> Path:
        return self.out / "stores" / F0 / part.name

    def hypotheses(self, model: Model, part: Part, target: str | None) -> Path:
        return self.out / "hyps" / model.name / f"{part.output_name(target)}.jsonl"

    def manifest(self, model: Model, part: Part) -> Path:
        """A pooled part's manifest restricted to ``model``'s languages."""
        return self.out / "manifests" / model.name / f"{part.name}.jsonl"

    def behaviour(self, kind: str, model: Model, part: Part, target: str | None) -> Path:
        return self.out / "behaviour" / model.name / f"{kind}-{part.output_name(target)}.json"

    def features(self, kind: str, part: Part, language: str | None = None) -> Path:
        """``acoustic`` or ``lexical`` feature rows of ``part`` (lexical on a pooled part: of one ``language``)."""
        return self.out / "features" / f"{kind}-{part.name}{f'-{language}' if language else ''}.jsonl"

    def feature_gaps(self, corpus: Corpus) -> Path:
        return self.out / "features" / f"feature_gaps-{corpus.name}.json"

    @property
    def probes(self) -> Path:
        return self.out / "probes" / "probes.jsonl"

    @property
    def results(self) -> Path:
        return self.out / "results"

    @property
    def figures(self) -> Path:
        return self.out / "figures"

    @property
    def results_md(self) -> Path:
        return self.out / "RESULTS.md"

    @property
    def logs(self) -> Path:
        return self.out / "logs"


@dataclass
class Unit:
    """One output of a stage: what it is, whether it is finished, and how to make it."""

    stage: str
    what: str
    done: bool
    note: str = ""
    model: Model | None = None
    job: object = None  # ExtractionJob, TranscriptionJob, ProbeConfig or a Behaviour
    size: int = 0  # utterances (extract, transcribe)
    waits: str | None = None  # the earlier stage whose output it reads is not up to date (it is then not done)


@dataclass
class Context:
    """A study with its layout, the device and the manifests read once. ``write``: whether the plan may
    write the filtered manifests of models restricted to languages (not in a dry run)."""

    study: Study
    device: str
    show_progress: bool = True
    manifests: dict[Path, list] = field(default_factory=dict)
    write: bool = True
    reclaim_stale: bool = False  # take over the claims of a killed run (--reclaim-stale)
    unfinished: set[str] = field(default_factory=set)  # the stages planned with work to do (see plan)
    outdated: dict[Path, tuple[str, str]] = field(default_factory=dict)  # an existing output not up to date -> (its stage, why)
    redo: tuple[str, ...] = ()  # the stages given to --redo: their outputs are set aside (or, in a dry run, would be)
    stale: list = field(default_factory=list)  # the StaleOutput errors the plan met (see refuse_stale)
    sites_checked: bool = False  # the models' sites were checked against their site tables (refuse_unknown_sites: once a run)

    @property
    def layout(self) -> Layout:
        return Layout(self.study.out)

    def utterances(self, corpus: Corpus, part: Part) -> list:
        """The part's manifest, read once; its rows must be of the corpus (``dataset``) and of the key's
        language (any language in a pooled part)."""
        if part.manifest not in self.manifests:
            utterances = read_manifest(part.manifest)
            where = f"{self.study.path}: corpora[{self.study.corpora.index(corpus)}].manifests.{part.key}: {part.manifest}"
            for utterance in utterances:
                if utterance.dataset != corpus.name:
                    raise StudyError(
                        f"{where}: utterance {utterance.id!r} records dataset {utterance.dataset!r}, not {corpus.name!r}; the tables join on it: "
                        f"name the corpus after it, or rewrite the manifest with --dataset {corpus.name}"
                    )
                if not part.pooled and utterance.language != part.language:
                    raise StudyError(
                        f"{where}: utterance {utterance.id!r} is in {utterance.language!r}, not {part.language!r}; give each language its own manifest"
                    )
            self.manifests[part.manifest] = utterances
        return self.manifests[part.manifest]

    def manifest(self, model: Model, corpus: Corpus, part: Part) -> Path:
        """The manifest ``model`` reads of ``part``: the part's own, or on a pooled part with model
        ``languages`` its rows of those languages (written under ``OUT/manifests/`` unless a dry run;
        rewritten only when they changed, so that its sha256, which the store records, is stable)."""
        utterances = self.utterances(corpus, part)
        if model.languages is None:
            return part.manifest
        where = f"{self.study.path}: models[{self.study.models.index(model)}].languages"
        if not part.pooled:
            if part.language not in model.languages:
                raise StudyError(f"{where}: {list(model.languages)} excludes {part.name}, whose language is {part.language!r}; leave the model off its grids")
            return part.manifest
        present = {utterance.language for utterance in utterances}
        missing = [language for language in model.languages if language not in present]
        if missing:
            raise StudyError(f"{where}: {part.name} ({part.manifest}) has no utterance in {missing[0]!r}; its languages: {', '.join(sorted(present))}")
        path = self.layout.manifest(model, part)
        if path not in self.manifests:
            from extract.manifest import write_manifest

            kept = [utterance for utterance in utterances if utterance.language in model.languages]
            if self.write and (not path.exists() or read_manifest(path) != kept):
                write_manifest(path, kept)
            self.manifests[path] = kept
        return path

    def model_utterances(self, model: Model, corpus: Corpus, part: Part) -> list:
        """The utterances ``model`` reads of ``part`` (see :meth:`manifest`)."""
        return self.manifests[self.manifest(model, corpus, part)]

    def spec(self, model: Model):
        from extract.spec import ModelSpec

        return ModelSpec(model.family, model.checkpoint, model.revision, model.dtype, self.device, model.random_init, model.trust_remote_code, model.seed)


def newer(outputs: Iterable[Path], inputs: Iterable[Path]) -> bool:
    """Every output exists and none is older than any input."""
    outputs, inputs = list(outputs), [path for path in inputs if path.exists()]
    if not all(path.exists() for path in outputs):
        return False
    return not inputs or min(p.stat().st_mtime_ns for p in outputs) >= max(p.stat().st_mtime_ns for p in inputs)


# --- extract ---------------------------------------------------------------------------------------


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
        before, now = (
            ShardReader(job.out, allow_partial=True).info.config.get("manifest_sha256"),
            file_sha256(job.manifest),
        )  # a store being written: its config only
        if before is not None and before != now:
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


class StaleOutput(StudyError):
    """An output written from a manifest since edited, or with other settings: its stage would refuse
    to add to it. The plan gathers every one (:func:`refuse_stale`), then names them in one line."""

    def __init__(self, out: Path, manifest: Path, how: str, stage: str):
        self.stage = {"extraction": "extract", "transcription": "transcribe", "acoustic analysis": "acoustic"}[stage]
        super().__init__(f"{out} was written from {manifest} as it was before or with other settings ({how}): the {stage} would refuse to add to it")


def stale_or_status(context: Context, stage: str, status: Callable[[], tuple[bool, str]]) -> tuple[bool, str]:
    """A unit's status, where a stage given to ``--redo`` has its outputs set aside (so it is to do),
    and a stale output is noted in ``context.stale`` for :func:`refuse_stale` (and to do)."""
    if stage in context.redo:
        return False, "set aside by --redo"
    try:
        return status()
    except StaleOutput as stale:
        context.stale.append(stale)
        return False, "written from another manifest or with other settings"


def refuse_stale(context: Context) -> None:
    """Every stale output of the plan in one line: the first, how many more, and the ``--redo`` that
    sets them all aside (a run would otherwise stop at the first, after the stages before it ran)."""
    if not context.stale:
        return
    stages = [stage for stage in STAGES if any(stale.stage == stage for stale in context.stale)]
    more = f" (and {len(context.stale) - 1} more output(s) of {', '.join(stages)})" if len(context.stale) > 1 else ""
    raise StudyError(f"{context.stale[0]}{more}; rerun with --redo {','.join(stages)} to set them aside and rebuild them and what depends on them")


def _extraction_jobs(context: Context) -> Iterator[tuple[Model, object, object, object]]:
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


def plan_extract(context: Context) -> list[Unit]:
    refuse_unknown_sites(context)
    units = []
    for model, job, corpus, part in _extraction_jobs(context):
        size = len(context.model_utterances(model, corpus, part))
        done, note = stale_or_status(context, "extract", lambda job=job, size=size: store_status(job, size))
        if not done and Path(job.out).exists():
            context.outdated[Path(job.out)] = ("extract", note or "not complete")
        units.append(Unit("extract", f"{model.name} {part.name}", done, note, model, job, size))
    return units


def run_extract(context: Context, units: list[Unit]) -> None:
    from extract.families import UnknownSiteError
    from extract.jobs import extract
    from extract.spec import load_extractor

    for model, todo in _by_model(units):
        print(f"[study] extract: loading {model.name} ({model.family} {model.checkpoint or 'default checkpoint'}) on {context.device}", flush=True)
        extractor = _loaded(model, load_extractor, todo[0].job.spec, keep_padding=todo[0].job.keep_padding)
        for unit in todo:
            started = time.time()
            for shard in range(unit.job.num_shards):
                try:
                    sites, report = extract(replace(unit.job, shard_index=shard), context.show_progress, context.reclaim_stale, extractor=extractor)
                except UnknownSiteError as error:
                    raise StudyError(f"{context.study.path}: models {model.name}: sites: {error.args[0]}") from None
            print(
                f"[study] extract {unit.what}: {len(sites)} sites, {report.written} written, {report.resumed} already there, "
                f"{len(report.skipped)} skipped for bad audio ({time.time() - started:.1f} s) -> {unit.job.out}",
                flush=True,
            )
        del extractor
        gc.collect()


def _by_model(units: list[Unit]) -> list[tuple[Model, list[Unit]]]:
    groups: dict[str, tuple[Model, list[Unit]]] = {}
    for unit in units:
        groups.setdefault(unit.model.name, (unit.model, []))[1].append(unit)
    return list(groups.values())


def _loaded(model: Model, load: Callable, *args, **kwargs):
    """``load(*args, **kwargs)``, with a checkpoint that cannot be read said in one line naming the model."""
    try:
        return load(*args, **kwargs)
    except OSError as error:
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise StudyError(f"model {model.name}: cannot load {model.checkpoint or 'its default checkpoint'}: {first}") from None


def extraction_tasks(units: list[Unit]) -> list:
    from experiments.scheduling import extraction_tasks as shard_tasks

    tasks = []
    for unit in units:
        for task in shard_tasks(unit.job, unit.size)[0]:
            tasks.append(replace(task, name=f"{unit.what} {task.name}"))
    return tasks


# --- f0 --------------------------------------------------------------------------------------------


def plan_f0(context: Context) -> list[Unit]:
    """The F0 baseline's stores: one per part of ``baselines.f0.corpora``."""
    from experiments.analysis.f0 import f0_store_current

    study, units = context.study, []
    if study.f0 is None:
        return units
    for name in study.f0["corpora"]:
        corpus = study.corpus(name)
        for part in corpus.parts:
            size = len(context.utterances(corpus, part))
            out = context.layout.f0_store(part)
            done = f0_store_current(part.manifest, out, study.f0["range_by"])
            if not done and out.exists():
                context.outdated[out] = ("f0", "another manifest or pitch range rule")
            units.append(Unit("f0", f"{F0} {part.name}", done, f"{size} utterances" if done else "", None, (corpus, part, out), size))
    return units


def run_f0(context: Context, units: list[Unit]) -> None:
    from experiments.analysis.f0 import write_f0_store

    for unit in units:
        corpus, part, out = unit.job
        started = time.time()
        written = write_f0_store(context.utterances(corpus, part), part.manifest, out, context.study.f0["range_by"], context.show_progress)
        print(
            f"[study] f0 {part.name}: {written.get('stored', 0)} stored, {len(written.get('skipped', []))} without F0 ({time.time() - started:.1f} s) -> {out}"
        )


# --- transcribe ------------------------------------------------------------------------------------


def transcription_job(context: Context, model: Model, corpus: Corpus, part: Part, target: str | None):
    from extract.families.generation import GenerationOptions
    from extract.jobs import TranscriptionJob

    options = context.study.transcribe
    generation = GenerationOptions(options["num_beams"], options["max_new_tokens"], model.decoder, options["translate_by_forcing"])
    return TranscriptionJob(
        context.spec(model),
        context.manifest(model, corpus, part),
        context.layout.hypotheses(model, part, target),
        corpus.task,
        tgt_lang=target,
        name=model.name,
        options=generation,
        batch_seconds=options["batch_seconds"],
        max_seconds=options["max_seconds"],
    )


# known before the model loads; decoding.overrides: num_beams and max_new_tokens (a finished file written with another bound is stale, not done)
COMPARED_SETTINGS = ("model", "family", "task", "tgt_lang", "dtype", "max_seconds", "manifest_sha256", "decoding.overrides")


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


def _transcription_jobs(context: Context) -> Iterator[tuple[Model, object, object, object, object]]:
    """Each hypotheses file the study writes: its model, corpus, part, target and job (no status, as
    :func:`_extraction_jobs`)."""
    for model in context.study.models:
        for corpus in context.study.corpora:
            for part in context.study.transcribed(model, corpus):
                for target in part.targets:
                    yield model, corpus, part, target, transcription_job(context, model, corpus, part, target)


def plan_transcribe(context: Context) -> list[Unit]:
    units = []
    for model in context.study.models:
        if any(context.study.transcribed(model, corpus) for corpus in context.study.corpora):
            check_tiny_transcription(context, model)
    for model, corpus, part, target, job in _transcription_jobs(context):
        ids = [utterance.id for utterance in context.model_utterances(model, corpus, part)]
        done, note = stale_or_status(context, "transcribe", lambda job=job, ids=ids: hypotheses_status(job, ids, context.reclaim_stale))
        if not done and job.out.exists():
            context.outdated[job.out] = ("transcribe", note)
        units.append(Unit("transcribe", f"{model.name} {part.output_name(target)} ({corpus.task})", done, note, model, job, len(ids)))
    return units


def run_transcribe(context: Context, units: list[Unit]) -> None:
    from extract.jobs import transcribe
    from extract.spec import load_generator

    for model, todo in _by_model(units):
        print(f"[study] transcribe: loading {model.name} ({model.family} {model.checkpoint or 'default checkpoint'}) on {context.device}", flush=True)
        generator = _loaded(model, load_generator, todo[0].job.spec, todo[0].job.options)
        for unit in todo:
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
        del generator
        gc.collect()


def transcription_tasks(units: list[Unit], context: Context) -> list:
    from experiments.scheduling import transcription_tasks as file_tasks

    tasks = []
    for unit in units:
        ids = [utterance.id for utterance in context.manifests[unit.job.manifest]]
        tasks += [replace(task, name=unit.what) for task in file_tasks(unit.job, ids)[0]]
    return tasks


# --- probe -----------------------------------------------------------------------------------------


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
                    sites = (
                        ShardReader(store, allow_partial=True).sites if model.sites == "all" else model.sites
                    )  # planning: the probe refuses an incomplete store
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


def plan_probe(context: Context) -> list[Unit]:
    from probing.grid import pending

    check_probe_splits(context)
    configs, unknown = probe_configs(context)
    extracted = [config for config in configs if all(Path(store).exists() for store in (config.store, config.apply_to) if store)]
    todo, stale = pending(extracted, context.layout.probes) if extracted else ([], 0)
    waiting = {config.run_id() for config in todo} | {config.run_id() for config in configs} - {config.run_id() for config in extracted}
    units = [Unit("probe", _describe(config), config.run_id() not in waiting, "", None, config) for config in configs]
    for unit in units:
        _wait_for_outdated(context, unit, [Path(store) for store in (unit.job.store, unit.job.apply_to) if store])
    if stale:
        units.append(Unit("probe", f"{stale} runs finished on stores that changed since", False, "recomputed"))
    units += [Unit("probe", f"{what}: every site", False, "known once extracted") for what in unknown]
    return units


def _wait_for_outdated(context: Context, unit: Unit, inputs: list[Path]) -> None:
    """``unit`` is not up to date when an input of it exists but is not (its manifest changed, other
    settings): it waits for the stage that writes that input."""
    for path in inputs:
        if path in context.outdated:
            stage, why = context.outdated[path]
            unit.done, unit.waits = False, stage
            shown = path.relative_to(context.study.out) if path.is_relative_to(context.study.out) else path
            unit.note = f"reads {shown}, not up to date ({why}): {stage} first"
            return


def _describe(config) -> str:
    store = Path(config.store)
    applied = f" applied to {Path(config.apply_to).name}" if config.apply_to else ""
    language = f" language={config.language}" if config.language else ""
    split = f" split={config.split}" if config.split != "fixed" else ""
    task = f" task={config.task}" if config.task != "female-male" else ""
    return f"{store.parent.name} {store.name} {config.site} {config.probe} control={config.control} seed={config.seed}{language}{split}{task}{applied}"


# --- behaviour -------------------------------------------------------------------------------------


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
        return f"category-1 accuracy {_number(accuracy)} -> {out}"

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
        return f"BLEU {_number(result['groups']['all']['bleu'])} -> {out}"

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
                    _wait_for_outdated(context, units[-1], behaviour.inputs)
    return units


def behaviour_outputs(context: Context, stage: str) -> list[Path]:
    """The outputs of a behaviour stage that exist (what ``collect`` reads)."""
    return [unit.job.out for unit in plan_behaviour(context, stage) if unit.job.out.exists()]


def _number(value, sign: str = "") -> str:
    return "n/a" if value is None else f"{value:{sign}.2f}"


# --- collect, correlate, figures, report -----------------------------------------------------------


def collect_paths(context: Context) -> tuple[list[Path], list[Path], list[Path]]:
    probes = [context.layout.probes] if context.layout.probes.exists() else []
    return probes, behaviour_outputs(context, "asr_gap"), behaviour_outputs(context, "mustshe")


def collected_tables(layout: Layout) -> list[Path]:
    return [layout.results / name for name in ("f1_vs_gap.csv", "f1_vs_mustshe.csv", "long.csv", "collect.json")]


def plan_collect(context: Context) -> list[Unit]:
    probes, gaps, mustshe = collect_paths(context)
    if not probes:
        return [Unit("collect", "probe rows with behaviour", False, "waits for probe rows", waits="probe")] if context.study.probes else []
    done = newer(collected_tables(context.layout), [*probes, *gaps, *mustshe])
    unit = Unit("collect", f"{len(gaps)} gap and {len(mustshe)} MuST-SHE results with the probe rows", done, "", None, (probes, gaps, mustshe))
    return [_after(context, unit, ("probe", "asr_gap", "mustshe"))]


def _after(context: Context, unit: Unit, stages: tuple[str, ...]) -> Unit:
    """``unit`` is up to date only when every one of ``stages`` (the stages whose outputs it reads) is."""
    waiting = [stage for stage in stages if stage in context.unfinished]
    if waiting and unit.done:
        unit.done, unit.waits, unit.note = False, waiting[0], f"{waiting[0]} has work to do first"
    return unit


def run_collect(context: Context, unit: Unit) -> None:
    from experiments.results.collect import collect, write_collected

    if unit.job is None:
        grids = ", ".join(grid.where for grid in context.study.probes)
        raise StudyError(f"{context.study.path}: {grids}: the probe stage wrote no row to {context.layout.probes}; check the grids' models, corpora and sites")
    configs, unknown = probe_configs(context)
    if not unknown:
        supersede_probe_rows(context, configs)  # a probe stage stopped before it could
    probes, gaps, mustshe = unit.job
    result = collect(probes, gaps, mustshe)
    written = write_collected(result, context.layout.results)
    print(
        f"[study] collect: {len(result.f1_vs_gap)} f1_vs_gap rows, {len(result.f1_vs_mustshe)} f1_vs_mustshe rows, {len(result.long)} scores; "
        f"unmatched: {result.unmatched_summary()} -> {written['collect'].parent}",
        flush=True,
    )


def plan_reporting(context: Context, stage: str) -> list[Unit]:
    """``correlate``, ``figures`` and ``report``: each current when its outputs are newer than its inputs."""
    from experiments.study import report

    layout = context.layout
    if not layout.results.joinpath("collect.json").exists():
        return [Unit(stage, stage, False, "waits for collect")] if context.study.probes else []
    inputs, outputs = report.stage_files(stage, layout, context.study)
    unit = Unit(stage, {"correlate": "correlations", "figures": "figures", "report": str(layout.results_md)}[stage], newer(outputs, inputs))
    return [_after(context, unit, ("collect",) if stage != "report" else ("feature_gaps", "collect", "correlate", "figures"))]


def run_reporting(context: Context, stage: str) -> None:
    from experiments.study import report

    written = {"correlate": report.write_correlations, "figures": report.write_figures, "report": report.write_results_md}[stage](context.layout, context.study)
    print(f"[study] {stage}: wrote {written}", flush=True)


# --- the plan and the run --------------------------------------------------------------------------

PLANS: dict[str, Callable[[Context], list[Unit]]] = {
    "extract": plan_extract,
    "f0": plan_f0,
    "transcribe": plan_transcribe,
    "probe": plan_probe,
    "asr_gap": lambda context: plan_behaviour(context, "asr_gap"),
    "mustshe": lambda context: plan_behaviour(context, "mustshe"),
    "st_quality": lambda context: plan_behaviour(context, "st_quality"),
    "acoustic": lambda context: _analyses().plan_acoustic(context),
    "lexical": lambda context: _analyses().plan_lexical(context),
    "feature_gaps": lambda context: _analyses().plan_feature_gaps(context),
    "collect": plan_collect,
    "correlate": lambda context: plan_reporting(context, "correlate"),
    "figures": lambda context: plan_reporting(context, "figures"),
    "report": lambda context: plan_reporting(context, "report"),
}


def _analyses():
    """:mod:`experiments.study.analyses`, which builds on this module."""
    from experiments.study import analyses

    return analyses


def plan(context: Context, stages: Iterable[str] = STAGES) -> dict[str, list[Unit]]:
    """The units of ``stages``. Every stage up to the last of them is planned, in order, whether asked
    for or not: a unit is up to date only when the outputs it reads are (a store whose manifest
    changed makes its probes wait for extract, a probe to do makes collect wait, ...)."""
    stages = tuple(stages)
    context.outdated, context.unfinished, context.stale = {}, set(), []
    planned = {}
    for stage in STAGES[: max(STAGES.index(stage) for stage in stages) + 1] if stages else ():
        planned[stage] = PLANS[stage](context)
        if any(not unit.done for unit in planned[stage]):
            context.unfinished.add(stage)
    refuse_stale(context)
    return {stage: planned[stage] for stage in stages}


def check_subset(planned: dict[str, list[Unit]], stages: tuple[str, ...], study_path: Path) -> None:
    """A stage run without an earlier stage (``--stages``) whose output one of its units reads and
    which is not up to date is refused, naming both: it would compute from stale inputs."""
    for stage in stages:
        for unit in planned.get(stage, []):
            if unit.waits is not None and unit.waits not in stages:
                raise StudyError(
                    f"{study_path}: --stages {','.join(stages)}: {stage} ({unit.what}) {unit.note}; add {unit.waits} to --stages "
                    f"(or leave --stages out; --redo {unit.waits} sets its outputs aside to compute them anew)"
                )


def describe(planned: dict[str, list[Unit]]) -> list[str]:
    """The plan as printed lines: per stage how many outputs are finished, then those to do."""
    lines = []
    for stage, units in planned.items():
        todo = [unit for unit in units if not unit.done]
        summary = "nothing to do here" if not units else f"{len(units) - len(todo)} of {len(units)} done" + (f", {len(todo)} to do" if todo else "")
        lines.append(f"  {stage:<11} {summary}")
        for unit in todo[:SHOWN]:
            lines.append(f"    - {unit.what}" + (f" ({unit.note})" if unit.note else ""))
        if len(todo) > SHOWN:
            lines.append(f"    ... and {len(todo) - SHOWN} more")
    return lines


def run_stage(context: Context, stage: str, executor: argparse.Namespace | None = None) -> int:
    """Computes the unfinished outputs of ``stage`` (planned anew: earlier stages may have written
    their inputs); with ``executor`` (the ``--executor`` options), extraction, transcription and the
    probe grid go to submitit as one job array. Returns 0, or 1 when a submitted task failed."""
    units = plan(context, [stage])[stage]
    todo = [unit for unit in units if not unit.done]
    if not todo:
        return 0
    started = time.time()
    status = 0
    if stage in ("extract", "transcribe") and executor is not None:
        status = _submit(executor, stage, extraction_tasks(todo) if stage == "extract" else transcription_tasks(todo, context), len(units) - len(todo))
    elif stage == "extract":
        run_extract(context, todo)
    elif stage == "f0":
        run_f0(context, todo)
    elif stage == "transcribe":
        run_transcribe(context, todo)
    elif stage == "probe":
        status = _run_probes(context, executor)
    elif stage in ("asr_gap", "mustshe", "st_quality"):
        for unit in todo:
            print(f"[study] {stage} {unit.what}: {unit.job.compute()}", flush=True)
    elif stage in ANALYSIS_STAGES:
        _analyses().run_analysis(context, stage, todo)
    elif stage == "collect":
        run_collect(context, todo[0])
    else:
        run_reporting(context, stage)
    print(f"[study] {stage}: {time.time() - started:.1f} s", flush=True)
    return status


def _run_probes(context: Context, executor: argparse.Namespace | None) -> int:
    from experiments.scheduling import submit_grid
    from probing.grid import run_all

    configs, unknown = probe_configs(context)
    if unknown:
        raise StudyError(f"the stores of {', '.join(unknown)} do not exist yet: run the extract stage first")
    if executor is None:
        run_all(configs, context.layout.probes, reclaim_stale=context.reclaim_stale)
        status = 0
    else:
        status = submit_grid(executor, configs, context.layout.probes, executor.cells_per_task, context.reclaim_stale)
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


def _submit(executor: argparse.Namespace, stage: str, tasks: list, finished: int) -> int:
    from experiments.scheduling import run_tasks

    numbered = [replace(task, number=number) for number, task in enumerate(tasks)]
    return run_tasks(executor, stage, numbered, finished, "rerun the same study: finished work is skipped, the rest resubmitted")


def _named(executor: argparse.Namespace, context: Context, stage: str) -> argparse.Namespace:
    """The executor options with the study's log folder (``OUT/logs/submitit/STAGE``) unless one was given."""
    folder = executor.log_folder or str(context.layout.logs / "submitit" / stage)
    return argparse.Namespace(**{**vars(executor), "log_folder": folder})


def run(context: Context, stages: Iterable[str], executor: argparse.Namespace | None = None) -> int:
    """Runs ``stages`` in order; stops after a stage whose submitted tasks failed (1), or that was
    submitted without waiting (``--no-wait``: rerun to go on)."""
    stages = tuple(stages)
    check_subset(plan(context, stages), stages, context.study.path)
    for stage in stages:
        options = _named(executor, context, stage) if executor is not None and stage in EXECUTOR_STAGES else None
        status = run_stage(context, stage, options)
        if status:
            return status
        if options is not None and options.no_wait and any(not unit.done for unit in plan(context, [stage])[stage]):
            print(f"[study] {stage}: submitted without waiting; rerun the same study to go on once its tasks have finished", flush=True)
            return 0
    return 0


def stage_outputs(context: Context, stage: str) -> list[Path]:
    """What ``stage`` has written for this study and ``--redo`` sets aside (each with its sidecars:
    a hypotheses file's settings and skipped-ids files, a gap report's per-utterance counts)."""
    layout = context.layout
    if stage == "probe":
        return [layout.probes.parent]
    if stage == "collect":
        return collected_tables(layout)
    if stage in ("correlate", "figures", "report"):
        from experiments.study import report

        return report.stage_files(stage, layout, context.study)[1]
    if stage == "extract":
        return [Path(job.out) for _, job, _, _ in _extraction_jobs(context)]
    if stage in ANALYSIS_STAGES:
        return _analyses().analysis_outputs(context, stage)
    if stage == "transcribe":
        outputs = [Path(job.out) for *_, job in _transcription_jobs(context)]
    else:
        units = PLANS[stage](context)
        if stage == "f0":
            return [unit.job[2] for unit in units]
        outputs = [Path(unit.job.out) for unit in units]
    return [sidecar for path in outputs for sidecar in sorted(path.parent.glob(f"{path.name}*")) if not sidecar.name.endswith(".lock")]


def redo(context: Context, stages: Iterable[str]) -> Path | None:
    """``--redo``: the outputs of ``stages`` that exist moved to ``OUT/.superseded/STAMP/`` (:mod:`extract.supersede`),
    so that the run computes them anew; returns that folder (None: nothing was there)."""
    from extract.supersede import set_aside

    paths = [path for stage in stages for path in stage_outputs(context, stage)]
    return set_aside([path for path in paths if path.exists()], context.study.out)


def print_lines(lines: list[str]) -> None:
    sys.stdout.write("".join(line + "\n" for line in lines))
    sys.stdout.flush()
