"""A study's ``analyses`` (Attanasio et al. 2024, section 5) as three stages: ``acoustic`` and
``lexical`` features of each analysed manifest's records, and ``feature_gaps``, their contrasts
between the groups and their correlation with each model's E, per corpus. The library computes
them (:mod:`experiments.analysis.acoustic`, :mod:`experiments.analysis.lexical`,
:mod:`experiments.analysis.feature_gap_report`); the standalone commands (``experiments.acoustics``,
``experiments.lexical``, ``experiments.feature_gaps``) are the same computations.

Finished: the feature rows carry no identity of their manifest, so each has a stamp beside it,
``OUT.inputs.json``, recording the manifest's sha256, the settings and whether every record was
written (the acoustic stage writes it before the first row). Acoustic rows are appended (a killed
run resumes), so rows of another manifest or settings, or without a stamp, are refused
(``--redo acoustic``); lexical rows are written whole, so they are recomputed. The
``feature_gaps`` JSON records its inputs itself (:func:`experiments.study.stages.behaviour.behaviour_status`).
The lexical stage's plan refuses, in one line, the spaCy pipelines it would need and cannot find.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from experiments.study.context import Context, StaleOutput, StudyStage, Unit, stale_or_status
from experiments.study.schema import Corpus, Part, StudyError
from experiments.study.stages.behaviour import Behaviour, behaviour_status, gap_kind
from experiments.study.stages.behaviour import run as compute_each
from extract.provenance import file_sha256


@dataclass(frozen=True)
class FeatureJob:
    """The acoustic or lexical feature rows of one part (lexical: of one ``language``) at ``out``."""

    kind: str
    corpus: Corpus
    part: Part
    out: Path
    settings: dict
    language: str | None = None  # lexical: the records' language
    pipeline: str | None = None  # lexical: the spaCy pipeline

    @property
    def stamp(self) -> Path:
        return self.out.with_suffix(".inputs.json")

    @property
    def outputs(self) -> list[Path]:
        """The rows, their stamp and (acoustic) their pitch ranges and summary."""
        from experiments.analysis.acoustic import side_files

        return [self.out, self.stamp, *(side_files(self.out) if self.kind == "acoustic" else [])]


def write_stamp(job: FeatureJob, complete: bool, records: int = 0) -> None:
    stamp = {"manifest": str(job.part.manifest), "manifest_sha256": file_sha256(job.part.manifest), "settings": job.settings, "complete": complete}
    job.stamp.parent.mkdir(parents=True, exist_ok=True)
    job.stamp.write_text(json.dumps(stamp | ({"records": records} if complete else {}), indent=1) + "\n", encoding="utf-8")


def feature_status(job: FeatureJob) -> tuple[bool, str]:
    """Whether ``job``'s rows are finished (see the module docstring); stale acoustic rows raise
    :class:`~experiments.study.context.StaleOutput`."""
    if not job.out.exists():
        return False, ""
    try:
        stamp = json.loads(job.stamp.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        stamp = None
    before, now = str((stamp if isinstance(stamp, dict) else {}).get("manifest_sha256")), file_sha256(job.part.manifest)
    if not isinstance(stamp, dict):  # the stage writes its stamp before any row: these rows come from elsewhere
        how = f"no readable stamp {job.stamp.name} says which manifest"
    elif before != now:
        how = f"sha256 {before[:12]}… then, {now[:12]}… now"
    elif stamp.get("settings") != job.settings:
        recorded = stamp.get("settings") or {}
        how = "other settings: " + ", ".join(sorted(key for key in {*job.settings, *recorded} if recorded.get(key) != job.settings.get(key)))
    elif not stamp.get("complete"):
        return False, "unfinished: resumed" if job.kind == "acoustic" else "unfinished: recomputed"
    else:
        return True, f"{stamp.get('records')} records"
    if job.kind == "acoustic":
        raise StaleOutput(job.out, job.part.manifest, how, "acoustic analysis")
    return False, f"{how}: recomputed"


def _parts(context: Context, analysis: str) -> list[tuple[Corpus, Part]]:
    return [(corpus, part) for corpus in context.study.analysed(analysis) for part in corpus.parts]


def acoustic_jobs(context: Context) -> list[FeatureJob]:
    from experiments.analysis.acoustic import settings

    options = context.study.analyses["acoustic"] if context.study.analyses else None
    if options is None:
        return []
    wanted = settings(options["speech"], options["range_by"], options["tokenizer"])
    return [FeatureJob("acoustic", corpus, part, context.layout.features("acoustic", part), wanted) for corpus, part in _parts(context, "acoustic")]


def lexical_languages(context: Context, corpus: Corpus, part: Part) -> list[str]:
    """The languages of ``part`` whose lexical features are computed: its language, or on a pooled
    part every language of its manifest; each must be named in ``analyses.lexical.pipelines``."""
    pipelines = context.study.analyses["lexical"]["pipelines"]
    languages = [part.language] if not part.pooled else sorted({utterance.language for utterance in context.utterances(corpus, part)})
    missing = [language for language in languages if language not in pipelines]
    if missing:
        raise StudyError(
            f"{context.study.path}: analyses.lexical.pipelines: no pipeline for {', '.join(missing)} (in {part.manifest}); "
            "name a spaCy pipeline for each analysed language, or null to leave its lexical analysis out"
        )
    return [language for language in languages if pipelines[language] is not None]


def lexical_jobs(context: Context) -> list[FeatureJob]:
    options = context.study.analyses["lexical"] if context.study.analyses else None
    if options is None:
        return []
    jobs = []
    for corpus, part in _parts(context, "lexical"):
        for language in lexical_languages(context, corpus, part):
            name = options["pipelines"][language]
            out = context.layout.features("lexical", part, language if part.pooled else None)
            jobs.append(FeatureJob("lexical", corpus, part, out, {"pipeline": name, "language": language}, language, name))
    return jobs


def plan_features(context: Context, stage: str) -> list[Unit]:
    """The ``acoustic`` or ``lexical`` units; the lexical pipelines of those to do must be installed
    (see :func:`refuse_missing_pipelines`)."""
    jobs = acoustic_jobs(context) if stage == "acoustic" else lexical_jobs(context)
    units = []
    for job in jobs:
        done, note = stale_or_status(context, stage, lambda job=job: feature_status(job))
        what = f"{job.part.name}" + (f" {job.language} ({job.pipeline})" if job.kind == "lexical" else "")
        units.append(Unit(stage, what, done, note, None, job))
    if stage == "lexical":
        refuse_missing_pipelines(context, [unit.job for unit in units if not unit.done])
    return units


def refuse_missing_pipelines(context: Context, jobs: list[FeatureJob]) -> None:
    """Every pipeline of ``jobs`` that cannot be loaded, in one line with how to install it or leave it out."""
    from experiments.scoring.spacy_pipeline import pipeline_problem

    problems = {}
    for job in jobs:
        problem = pipeline_problem(job.pipeline)
        if problem is not None:
            problems.setdefault(job.pipeline, (job.language, problem))
    if not problems:
        return
    where = f"{context.study.path}: analyses.lexical.pipelines"
    leave_out = "or give its language null in analyses.lexical.pipelines (analyses.lexical: false leaves the lexical analysis out)"
    if any(problem.startswith("spaCy is not installed") for _, problem in problems.values()):
        raise StudyError(f"{where}: spaCy is not installed; `pip install spacy` and the pipelines, {leave_out}")
    named = [name for name, (_, problem) in problems.items() if "is not installed" in problem]
    other = [f"{language}: {problem}" for name, (language, problem) in problems.items() if name not in named]
    said = []
    if named:
        listed = ", ".join(f"{name} ({problems[name][0]})" for name in named)
        said.append(f"spaCy pipeline(s) not installed: {listed}; install each with `python -m spacy download NAME`")
    raise StudyError(f"{where}: {'; '.join(said + other)}; {leave_out}")


def feature_files(context: Context, corpus: Corpus) -> list[Path]:
    """The feature rows ``feature_gaps`` reads for ``corpus``: acoustic, then lexical, part by part."""
    files = [job.out for job in acoustic_jobs(context) if job.corpus == corpus]
    return files + [job.out for job in lexical_jobs(context) if job.corpus == corpus]


def gap_reports(context: Context, corpus: Corpus, groups: list[str]) -> list[tuple[str, Path]]:
    """(model label, gap report) of every model's comparison of ``groups`` on ``corpus``."""
    study, reports = context.study, []
    for model in study.models:
        for part in study.transcribed(model, corpus):
            for options in study.gaps_of(corpus, part):
                if options["attribute"] is None and options["groups"] == groups:
                    reports.append((model.name, context.layout.behaviour(gap_kind(options), model, part, None)))
    return reports


def feature_gaps_behaviour(context: Context, corpus: Corpus) -> Behaviour:
    from experiments.analysis.feature_gap_report import compared_settings, feature_gaps_result, write_feature_gaps
    from extract.manifest import iter_manifest

    options = context.study.analyses["feature_gaps"]
    manifests = [part.manifest for part in corpus.parts]
    features = feature_files(context, corpus)
    if not features:
        raise StudyError(
            f"{context.study.path}: analyses.feature_gaps: {corpus.name} has no feature to contrast (every lexical pipeline null and acoustic off)"
        )
    gaps = gap_reports(context, corpus, options["groups"])
    out = context.layout.feature_gaps(corpus)
    wanted = compared_settings(options["groups"], options["unit"], options["student"], options["correction"], options["bootstrap"])

    def current(document: dict) -> bool:
        recorded = document.get("settings") or {}
        return {key: recorded.get(key) for key in wanted} == wanted

    def compute() -> str:
        utterances = list(iter_manifest(manifests))
        groups = tuple(options["groups"])
        result = feature_gaps_result(
            utterances, manifests, features, gaps, groups, options["unit"], options["student"], options["correction"], bootstrap=options["bootstrap"]
        )
        write_feature_gaps(result, out, utterances, [*manifests, *features, *(path for _, path in gaps)], [model for model, _ in gaps])
        setups = f", {len(result.setups)} setups with E" if result.setups is not None else ", no gap report"
        return f"{len(result.contrasts)} contrasts, {result.significant} with p < 0.05 after {options['correction']}{setups} -> {out}"

    return Behaviour([*manifests, *features, *(path for _, path in gaps)], out, current, compute)


def plan_feature_gaps(context: Context) -> list[Unit]:
    units = []
    for corpus in context.study.analysed("feature_gaps"):
        behaviour = feature_gaps_behaviour(context, corpus)
        done, note = (False, "set aside by --redo") if "feature_gaps" in context.redo else behaviour_status(behaviour)
        unit = Unit("feature_gaps", corpus.name, done, note, None, behaviour)
        waiting = [stage for stage in ("acoustic", "lexical", "asr_gap") if stage in context.unfinished]
        if waiting:
            unit.done, unit.waits, unit.note = False, waiting[0], f"{waiting[0]} has work to do first"
        units.append(unit)
    return units


def run_acoustic(context: Context, units: list[Unit]) -> None:
    from experiments.analysis.acoustic import compute_acoustics
    from experiments.scoring.dataset_stats import whisper_token_counter

    options = context.study.analyses["acoustic"]
    count_tokens = whisper_token_counter(options["tokenizer"])
    for unit in units:
        job, started = unit.job, time.time()
        write_stamp(job, complete=False)  # a killed run's rows are tied to this manifest
        settings = (options["tokenizer"], options["speech"], options["range_by"], options["workers"])
        utterances = context.utterances(job.corpus, job.part)
        summary = compute_acoustics(utterances, job.out, count_tokens, *settings, context.show_progress, context.reclaim_stale)
        write_stamp(job, complete=True, records=summary["records"])
        nulls = sum(sum(reasons.values()) for reasons in summary["nulls"].values())
        print(
            f"[study] acoustic {unit.what}: {summary['computed_now']} computed, {summary['resumed']} already there, "
            f"{nulls} null feature values (reasons in the rows) ({time.time() - started:.1f} s) -> {job.out}",
            flush=True,
        )


def run_lexical(context: Context, units: list[Unit]) -> None:
    from experiments.analysis.lexical import load_pipeline, write_lexical_rows

    batch_size, loaded = context.study.analyses["lexical"]["batch_size"], {}
    for unit in units:
        job, started = unit.job, time.time()
        if (job.pipeline, job.language) not in loaded:
            loaded[job.pipeline, job.language] = load_pipeline(job.pipeline, job.language)
        utterances = [utterance for utterance in context.utterances(job.corpus, job.part) if utterance.language == job.language]
        job.out.parent.mkdir(parents=True, exist_ok=True)
        nulls = write_lexical_rows(utterances, loaded[job.pipeline, job.language], job.pipeline, job.out, batch_size, context.show_progress)
        write_stamp(job, complete=True, records=len(utterances))
        print(
            f"[study] lexical {unit.what}: {len(utterances)} records, {sum(nulls.values())} null feature values ({time.time() - started:.1f} s) -> {job.out}",
            flush=True,
        )


def feature_outputs(context: Context, stage: str) -> list[Path]:
    """What ``--redo`` sets aside for an ``acoustic`` or ``lexical`` stage: the rows with their side files."""
    return [path for job in (acoustic_jobs(context) if stage == "acoustic" else lexical_jobs(context)) for path in job.outputs]


def feature_gaps_outputs(context: Context) -> list[Path]:
    """What ``--redo`` sets aside for ``feature_gaps``: each JSON with its tables."""
    from experiments.analysis.feature_gap_report import tables
    from experiments.study.report import feature_gap_documents

    return [path for result in feature_gap_documents(context.layout, context.study) for path in (result, *tables(result))]


ACOUSTIC = StudyStage(partial(plan_features, stage="acoustic"), run_acoustic, partial(feature_outputs, stage="acoustic"))
LEXICAL = StudyStage(partial(plan_features, stage="lexical"), run_lexical, partial(feature_outputs, stage="lexical"))
FEATURE_GAPS = StudyStage(plan_feature_gaps, compute_each, feature_gaps_outputs)
