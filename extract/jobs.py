"""One extraction or transcription run as a typed record, and the function that runs it.

``python -m experiments.extract`` / ``experiments.transcribe`` and the demo describe their runs
with these records, so that what a store's ``config`` or a transcription's ``OUT.settings.json``
records (the contract a resumed run must match) is written in one place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from extract.audio import MAX_SECONDS
from extract.families import Extractor
from extract.families.generation import GenerationError, GenerationOptions, Generator
from extract.families.whisper_ct2 import default_compute_type, engine_refusal
from extract.interventions import Intervener, InterventionError
from extract.manifest import read_manifest
from extract.provenance import file_sha256, provenance, settings_path
from extract.runner import ExtractionReport, check_settings, hypotheses_log, run_extraction, run_transcription
from extract.spec import ModelSpec, load_extractor, load_generator
from extract.stage_options import ExtractOptions, TranscribeOptions


@dataclass(frozen=True)
class ExtractionJob(ExtractOptions):
    """Hidden states of ``spec`` at ``sites`` (``"all"`` or names) for a manifest, into the store folder ``out``,
    with the options of :class:`extract.stage_options.ExtractOptions` (keywords; their defaults and checks are
    declared there). ``interventions``: intervention files (``extract.interventions``) edited into the model
    while it runs, on every utterance or only on those of ``intervene_gender``. ``label``: the model's name
    in every output built from the store (default :meth:`ModelSpec.label`)."""

    spec: ModelSpec
    manifest: Path
    out: Path

    def intervener(self) -> Intervener | None:
        """The interventions loaded (and checked as files), or None without any."""
        return load_intervener(self.interventions, self.intervene_gender)

    def store_config(self, sites: list[str], checkpoint: str, fingerprint: str | None) -> dict:
        """What determines the stored values; a resumed run must match it (``extract.store.same_configuration``).
        ``model`` is the family, ``label`` the model's name in outputs; the manifest is compared by its
        content (``manifest_sha256``), not by how its path is spelled (``manifest``, recorded as given);
        with the loaded model's ``fingerprint``, the checkpoint's spelling is recorded but not compared."""
        return (
            model_config(self.spec, checkpoint, fingerprint)
            | {"sites": sites, "storage_dtype": self.storage_dtype, "max_seconds": self.max_seconds, "keep_padding": self.keep_padding}
            | manifest_config(self.manifest, self.limit, self.num_shards, self.utterances_per_part)
            | {"label": self.label or self.spec.label()}
            | self.stored_less()
        )

    def stored_less(self) -> dict:
        """``positions`` and ``pool`` where set: recorded only then, so that a store written before
        they existed keeps the configuration it has (and resumes)."""
        return {key: value for key, value in (("positions", self.positions), ("pool", self.pool)) if value is not None}


def model_config(spec: ModelSpec, checkpoint: str, fingerprint: str | None) -> dict:
    """The keys of a store's config that say which model wrote it, shared by every store writer
    (extraction, decoder states), so that a resume compares the model the same way in each."""
    return {
        "model": spec.family,
        "checkpoint": checkpoint,
        "revision": spec.revision,
        "model_fingerprint": fingerprint,
        "dtype": spec.dtype,
        "random_init": spec.random_init,
        "seed": spec.seed if spec.random_init else None,
    }


def manifest_config(manifest: Path, limit: int | None, num_shards: int, utterances_per_part: int) -> dict:
    """The keys of a store's config that say which utterances went into which part (the manifest by its content)."""
    return {
        "limit": limit,
        "num_shards": num_shards,
        "utterances_per_part": utterances_per_part,
        "manifest": str(manifest),
        "manifest_sha256": file_sha256(manifest),
    }


def load_intervener(paths: tuple[Path, ...], gender: str | None) -> Intervener | None:
    """An :class:`Intervener` for ``paths`` (None without any); a gender without files is refused."""
    if not paths:
        if gender is not None:
            raise InterventionError(f"an intervention gender ({gender}) without intervention files")
        return None
    return Intervener(paths, gender)


def extract(
    job: ExtractionJob, show_progress: bool = True, reclaim_stale: bool = False, extractor: Extractor | None = None
) -> tuple[list[str], ExtractionReport]:
    """Runs ``job`` (resuming a store left unfinished); returns the sites extracted and the report.
    ``extractor``: ``job.spec`` already loaded (with ``job.keep_padding``), so that a caller running
    several jobs of one model loads it once; by default it is loaded here."""
    utterances = read_manifest(job.manifest)[: job.limit]
    intervener = job.intervener()
    extractor = extractor or load_extractor(job.spec, keep_padding=job.keep_padding)
    sites = extractor.resolve_sites("all" if job.sites == "all" else list(job.sites))
    config = job.store_config(sites, extractor.checkpoint, extractor.fingerprint)
    report = run_extraction(
        extractor, utterances, sites, job.out, job, config=config, show_progress=show_progress, reclaim_stale=reclaim_stale, intervener=intervener
    )
    return sites, report


@dataclass(frozen=True)
class TranscriptionJob:
    """Transcripts (``task`` asr) or translations into ``tgt_lang`` (st) of a manifest by ``spec``, appended to ``out``.
    ``name``: the model label of each row (``--label``; default :meth:`ModelSpec.label`); ``max_seconds``: default 30 (asr) or 60 (st).
    ``interventions``: intervention files edited into the encoder while it runs (see :class:`ExtractionJob`)."""

    spec: ModelSpec
    manifest: Path
    out: Path
    task: str
    tgt_lang: str | None = None
    name: str | None = None
    options: GenerationOptions = field(default_factory=GenerationOptions)
    batch_seconds: float = TranscribeOptions.batch_seconds  # the defaults are declared once, with the stage's options
    max_seconds: float | None = TranscribeOptions.max_seconds
    limit: int | None = TranscribeOptions.limit
    interventions: tuple[Path, ...] = ()
    intervene_gender: str | None = TranscribeOptions.intervene_gender

    @classmethod
    def of(cls, options: TranscribeOptions, spec: ModelSpec, manifest: Path, out: Path) -> TranscriptionJob:
        """The job ``options`` (a command line's or a study's) describe for ``spec`` on ``manifest``, into ``out``."""
        decoding = GenerationOptions(
            options.num_beams, options.max_new_tokens, options.decoder, options.translate_by_forcing, options.adapter, options.engine, options.compute_type
        )
        shared = ("tgt_lang", "batch_seconds", "max_seconds", "limit", "interventions", "intervene_gender")  # named alike in both
        return cls(spec, manifest, out, options.task, name=options.label, options=decoding, **{key: getattr(options, key) for key in shared})

    def intervener(self) -> Intervener | None:
        return load_intervener(self.interventions, self.intervene_gender)

    @property
    def trim_seconds(self) -> float:
        return self.max_seconds or MAX_SECONDS[self.task]

    @property
    def settings_path(self) -> Path:
        return settings_path(self.out)

    def model_name(self) -> str:
        """``name`` (default :meth:`ModelSpec.label`); on the ctranslate2 engine with ``-ct2-COMPUTE_TYPE``
        after it, so that its rows never share a label (and a join in ``collect``) with the transformers engine's."""
        label = self.name or self.spec.label()
        if self.options.engine == "transformers":
            return label
        suffix = f"-ct2-{self.compute_type}"
        return label if label.endswith(suffix) else label + suffix

    @property
    def compute_type(self) -> str | None:
        """The ctranslate2 engine's quantisation (the device's default unless given); None on transformers."""
        if self.options.engine == "transformers":
            return None
        return self.options.compute_type or default_compute_type(self.spec.device)

    def engine_settings(self) -> dict:
        """``engine`` and ``compute_type`` of the ctranslate2 engine; nothing on transformers, so that its
        settings files are those written before engines existed (and still resume)."""
        return {} if self.options.engine == "transformers" else {"engine": self.options.engine, "compute_type": self.compute_type}

    def settings(self, checkpoint: str, decoding: dict, interventions: list[dict] | None = None, *, fingerprint: str | None) -> dict:
        """What ``OUT.settings.json`` records; a rerun with other settings (the code version, the
        checkpoint's spelling and the manifest path's spelling aside) is refused, and so is one from a
        changed manifest (``manifest_sha256``). ``interventions``: the records of
        :meth:`Intervener.records` (the key is absent without any); ``fingerprint``: the loaded model's."""
        spec = self.spec
        return {
            "model": self.model_name(),
            "family": spec.family,
            "checkpoint": checkpoint,
            "revision": spec.revision,
            "model_fingerprint": fingerprint,
            "task": self.task,
            "tgt_lang": self.tgt_lang,
            "dtype": spec.dtype,
            "max_seconds": self.trim_seconds,
            "decoding": decoding,
            "decoder": self.options.decoder if spec.family == "zeroswot" else None,
            "manifest": str(self.manifest),
            "manifest_sha256": file_sha256(self.manifest),
            **({"interventions": interventions} if interventions else {}),
            **self.engine_settings(),
            "provenance": provenance(),
        }


@dataclass(frozen=True)
class TranscriptionReport:
    total: int  # utterances in the manifest (after ``limit``)
    todo: int  # of them not yet in the output when the run started
    written: int
    skipped: list[dict]
    audio_notes: dict[str, dict]


def transcribe(
    job: TranscriptionJob,
    show_progress: bool = True,
    generator: Generator | None = None,
    reclaim_stale: bool = False,
    load: Callable[[ModelSpec, GenerationOptions], Generator] = load_generator,
    announce: Callable[[int, int], None] | None = None,
) -> TranscriptionReport:
    """Runs ``job``: claims ``out`` (``reclaim_stale``: take over the claim of a killed run), checks
    (or writes) its settings file, skips the ids already in ``out`` and appends the rest.
    ``generator``: ``job.spec`` already loaded with ``job.options`` (see :func:`extract`); by default it
    is loaded here, once ``out`` is claimed, by ``load`` (a command line's turns load errors into one
    line). ``announce(todo, total)`` is told what is left to do before the model runs."""
    utterances = read_manifest(job.manifest)[: job.limit]
    job.out.parent.mkdir(parents=True, exist_ok=True)
    checkpoint = job.spec.resolved_checkpoint()
    interventions = job.intervener()
    refusal = engine_refusal(job.spec, job.options, interventions is not None)
    if refusal:
        raise GenerationError(refusal)
    with hypotheses_log(job.out, reclaim_stale) as hypotheses:  # claimed before the model loads
        generator = generator or load(job.spec, job.options)
        generator.check(job.task, job.tgt_lang)
        if interventions is not None:
            interventions.check(generator.extractor)
        records = interventions.records() if interventions else None
        check_settings(job.settings_path, job.settings(checkpoint, generator.settings(), records, fingerprint=generator.extractor.fingerprint), job.out)
        todo = [u for u in utterances if u.id not in hypotheses.ids]
        if announce is not None:
            announce(len(todo), len(utterances))
        written, skipped, notes = run_transcription(
            generator, todo, hypotheses, job.task, job.tgt_lang, job.model_name(), job.batch_seconds, job.trim_seconds, show_progress, interventions
        )
    return TranscriptionReport(len(utterances), len(todo), written, skipped, notes)
