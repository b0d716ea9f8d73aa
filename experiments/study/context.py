"""What every study stage shares: where a study writes (:class:`Layout`; the folder is drawn in
``experiments/studies/README.md``), the study with its manifests read once (:class:`Context`), a
stage's outputs as :class:`Unit` s, the status helpers and the :class:`StudyStage` that each stage
module declares (``experiments.study.stages``). It imports no stage.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from experiments.study.schema import F0, Corpus, Model, Part, Study, StudyError
from extract.manifest import read_manifest

if TYPE_CHECKING:
    from experiments.scheduling import ExecutorOptions, Task


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
    cells_per_task: int = 1  # with --executor: probe grid cells per submitted task (--cells-per-task)
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


@dataclass(frozen=True)
class StudyStage:
    """A stage of ``study run`` (the stage table's ``study``, in its order): ``plan`` gives its units,
    each knowing whether its output is finished (its module's docstring says by which rule), ``run``
    computes the unfinished ones in this process, ``outputs`` are what it has written for this study
    (``--redo`` sets them aside), and ``submit`` (a job-array stage) sends the unfinished ones, with
    how many are finished, to submitit with the ``--executor`` options: 0, or 1 when a task failed."""

    plan: Callable[[Context], list[Unit]]
    run: Callable[[Context, list[Unit]], None]
    outputs: Callable[[Context], list[Path]]
    submit: Callable[[Context, list[Unit], int, ExecutorOptions], int] | None = None


def submit_tasks(executor: ExecutorOptions, stage: str, tasks: list[Task], finished: int) -> int:
    """``tasks`` numbered in order as one job array of ``stage`` (:func:`experiments.scheduling.run_tasks`)."""
    from experiments.scheduling import run_tasks

    numbered = [replace(task, number=number) for number, task in enumerate(tasks)]
    return run_tasks(executor, stage, numbered, finished, "rerun the same study: finished work is skipped, the rest resubmitted")


def newer(outputs: Iterable[Path], inputs: Iterable[Path]) -> bool:
    """Every output exists and none is older than any input."""
    outputs, inputs = list(outputs), [path for path in inputs if path.exists()]
    if not all(path.exists() for path in outputs):
        return False
    return not inputs or min(p.stat().st_mtime_ns for p in outputs) >= max(p.stat().st_mtime_ns for p in inputs)


class StaleOutput(StudyError):
    """An output written from a manifest since edited, or with other settings: its stage would refuse
    to add to it. The plan gathers every one (:func:`experiments.study.runner.refuse_stale`), then names them in one line."""

    def __init__(self, out: Path, manifest: Path, how: str, stage: str):
        self.stage = {"extraction": "extract", "transcription": "transcribe", "acoustic analysis": "acoustic"}[stage]
        super().__init__(f"{out} was written from {manifest} as it was before or with other settings ({how}): the {stage} would refuse to add to it")


def stale_or_status(context: Context, stage: str, status: Callable[[], tuple[bool, str]]) -> tuple[bool, str]:
    """A unit's status, where a stage given to ``--redo`` has its outputs set aside (so it is to do),
    and a stale output is noted in ``context.stale`` for :func:`~experiments.study.runner.refuse_stale` (and to do)."""
    if stage in context.redo:
        return False, "set aside by --redo"
    try:
        return status()
    except StaleOutput as stale:
        context.stale.append(stale)
        return False, "written from another manifest or with other settings"


def after(context: Context, unit: Unit, stages: tuple[str, ...]) -> Unit:
    """``unit`` is up to date only when every one of ``stages`` (the stages whose outputs it reads) is."""
    waiting = [stage for stage in stages if stage in context.unfinished]
    if waiting and unit.done:
        unit.done, unit.waits, unit.note = False, waiting[0], f"{waiting[0]} has work to do first"
    return unit


def wait_for_outdated(context: Context, unit: Unit, inputs: list[Path]) -> None:
    """``unit`` is not up to date when an input of it exists but is not (its manifest changed, other
    settings): it waits for the stage that writes that input."""
    for path in inputs:
        if path in context.outdated:
            stage, why = context.outdated[path]
            unit.done, unit.waits = False, stage
            shown = path.relative_to(context.study.out) if path.is_relative_to(context.study.out) else path
            unit.note = f"reads {shown}, not up to date ({why}): {stage} first"
            return


def run_by_model(context: Context, stage: str, units: list[Unit], load: Callable, each: Callable) -> None:
    """``each(unit, loaded)`` for every unit, grouped by model in order: each model loaded once, by
    ``load(job)`` of its first unit (a checkpoint that cannot be read is one line naming the model),
    and freed before the next loads."""
    groups: dict[str, tuple[Model, list[Unit]]] = {}
    for unit in units:
        groups.setdefault(unit.model.name, (unit.model, []))[1].append(unit)
    for model, todo in groups.values():
        print(f"[study] {stage}: loading {model.name} ({model.family} {model.checkpoint or 'default checkpoint'}) on {context.device}", flush=True)
        try:
            loaded = load(todo[0].job)
        except OSError as error:
            first = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise StudyError(f"model {model.name}: cannot load {model.checkpoint or 'its default checkpoint'}: {first}") from None
        for unit in todo:
            each(unit, loaded)
        del loaded
        gc.collect()


def with_sidecars(outputs: Iterable[Path]) -> list[Path]:
    """Each output with the files beside it that share its name (a hypotheses file's settings and
    skipped ids, a gap report's per-utterance counts), claims left out: what ``--redo`` sets aside."""
    return [sidecar for path in outputs for sidecar in sorted(path.parent.glob(f"{path.name}*")) if not sidecar.name.endswith(".lock")]
