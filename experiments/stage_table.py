"""The stage table: every stage once, with what each of its readers needs.

``speech-gender`` (:mod:`experiments.stages`: which commands exist, their module, whether they are
study stages or job arrays in ``docs/cli.md``), ``experiments.study`` (its stages, in the order it
runs them, and those it submits as job arrays), the scheduler (the commands whose ``--executor``
submits a job array) and the demo (a study run of the study's stages) read it. A record names its
options type and library entry point as ``module:name`` strings, resolved only when asked for
(:meth:`StageRecord.resolve`), so that reading the table imports nothing and ``speech-gender``
lists the stages at once.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class StageRecord:
    """One stage. ``name``: its study name (and command name, unless ``command`` differs);
    ``module``: its command line's module (None: a stage of the study only); ``options``: the type
    declaring its options (``module:Class``; None where its flags are still written by hand);
    ``entry``: the library function that does its work (``module:function``); ``outputs``: what it
    writes; ``job_array``: ``--executor`` submits its units as a submitit job array; ``study``: a
    stage of ``study run``, run in table order by the plan and run of its module under
    ``experiments.study.stages`` (a :class:`~experiments.study.context.StudyStage` named ``NAME``)."""

    name: str
    module: str | None
    entry: str
    outputs: str
    options: str | None = None
    job_array: bool = False
    study: str | None = None
    command: str | None = None

    @property
    def command_name(self) -> str | None:
        """``speech-gender COMMAND``, or None for a study-only stage."""
        return None if self.module is None else self.command or self.name

    @staticmethod
    def resolve(reference: str):
        """The object a ``module:name`` string names (imports the module)."""
        module, _, name = reference.partition(":")
        return getattr(importlib.import_module(module), name)


_E = "experiments"
TABLE: tuple[StageRecord, ...] = (
    # the study's stages, in the order a study runs them
    StageRecord(
        "extract",
        f"{_E}.extract",
        "extract.jobs:extract",
        "a store folder of HDF5 part files",
        options="extract.stage_options:ExtractOptions",
        job_array=True,
        study="extract",
    ),
    StageRecord(
        "f0",
        f"{_E}.f0_baseline",
        "experiments.analysis.f0:write_f0_store",
        "an F0-only store folder",
        study="f0",
        command="f0_baseline",
        options="experiments.analysis_options:F0Options",
    ),
    StageRecord(
        "transcribe",
        f"{_E}.transcribe",
        "extract.jobs:transcribe",
        "a hypotheses JSONL file and OUT.settings.json",
        options="extract.stage_options:TranscribeOptions",
        job_array=True,
        study="transcribe",
    ),
    StageRecord(
        "probe", f"{_E}.probe", "probing.grid:run_all", "probe rows appended to a JSONL file", options="probing.run:ProbeConfig", job_array=True, study="probe"
    ),
    StageRecord(
        "asr_gap",
        f"{_E}.asr_gap",
        "experiments.scoring.gaps:gap_report",
        "a gap report JSON and OUT.counts.jsonl",
        options="experiments.scoring.gaps:GapOptions",
        study="behaviour",
    ),
    StageRecord(
        "mustshe",
        f"{_E}.mustshe",
        "experiments.scoring.mustshe:score_hypotheses",
        "MuST-SHE scores JSON",
        study="behaviour",
        options="experiments.mustshe:MustSheOptions",
    ),
    StageRecord(
        "st_quality",
        f"{_E}.st_quality",
        "experiments.scoring.translation_quality:quality_report",
        "BLEU, chrF and COMET JSON",
        study="behaviour",
        options="experiments.st_quality:StQualityOptions",
    ),
    # Attanasio et al. 2024, section 5
    StageRecord(
        "acoustic",
        f"{_E}.acoustics",
        "experiments.analysis.acoustic:compute_acoustics",
        "acoustic features JSONL",
        study="analyses",
        command="acoustics",
        options="experiments.analysis_options:AcousticsOptions",
    ),
    StageRecord(
        "lexical",
        f"{_E}.lexical",
        "experiments.analysis.lexical:lexical_rows",
        "lexical features JSONL",
        study="analyses",
        options="experiments.analysis_options:LexicalOptions",
    ),
    StageRecord(
        "feature_gaps",
        f"{_E}.feature_gaps",
        "experiments.analysis.contrasts:group_contrasts",
        "feature contrasts JSON",
        study="analyses",
        options="experiments.analysis_options:FeatureGapOptions",
    ),
    StageRecord("collect", f"{_E}.collect", "experiments.results.collect:collect", "f1_vs_gap.csv, f1_vs_mustshe.csv, long.csv, collect.json", study="collect"),
    StageRecord(
        "correlate",
        f"{_E}.correlate",
        "experiments.results.correlation:correlate",
        "a correlation JSON (and a scatter plot)",
        study="reporting",
        options="experiments.correlate:CorrelateOptions",
    ),
    StageRecord("figures", f"{_E}.figures", "experiments.study.report:write_figures", "figures (PNG + PDF)", study="reporting"),
    StageRecord("report", None, "experiments.study.report:write_results_md", "RESULTS.md", study="reporting"),
    # commands outside the study
    StageRecord("dataset_stats", f"{_E}.dataset_stats", "experiments.scoring.dataset_stats:statistics", "a statistics table"),
    StageRecord(
        "decoder_states",
        f"{_E}.decoder_states",
        "extract.decoder_run:run_decoder_states",
        "a store folder of decoder states, one row per generated token, with the tokens",
        options="extract.stage_options:DecoderStatesOptions",
    ),
    StageRecord(
        "decoder_probe",
        f"{_E}.decoder_probe",
        "experiments.decoder.probe:decoder_probe_rows",
        "probe rows JSONL (speaker gender at MuST-SHE's gendered words and over all tokens, per decoder site)",
        options="experiments.decoder.probe:DecoderProbeOptions",
    ),
    StageRecord(
        "demo",
        f"{_E}.demo",
        "experiments.demo.pipeline:run_demo",
        "the demo's work folder, figures and report.md",
        options="experiments.demo.pipeline:DemoOptions",
    ),
    StageRecord(
        "embedding_store",
        f"{_E}.embedding_store",
        "experiments.embedding_store:write_embedding_store",
        "a store of speaker embeddings",
        options="experiments.embedding_store:EmbeddingStoreOptions",
    ),
    StageRecord("erase", f"{_E}.erase", "probing.erasure:fit", "an intervention file", options="experiments.erase:ErasureFitOptions"),
    StageRecord(
        "finetune",
        f"{_E}.finetune",
        "experiments.finetuning.run:run_finetuning",
        "a fine-tuning run folder",
        options="experiments.finetuning.run:FinetuneConfig",
    ),
    StageRecord(
        "grafn",
        f"{_E}.grafn",
        "experiments.normalisation.corpus:fit_from_manifest",
        "GRAFN filters, normalised audio",
        options="experiments.normalisation.transform:GrafnParameters",
    ),
    StageRecord("manifest", f"{_E}.manifest", "extract.corpora:RECIPES", "a manifest JSONL", options="experiments.manifest:ManifestOptions"),
    StageRecord(
        "patch",
        f"{_E}.patch",
        "experiments.patching.run:run_patching",
        "patch rows JSONL, OUT.pairs.jsonl, OUT.settings.json, OUT.summary.json and a figure",
        options="experiments.patching.run:PatchOptions",
    ),
    StageRecord(
        "probe_data",
        f"{_E}.probe_data",
        "experiments.probe_data:sample_probe_data",
        "a manifest with train, dev and test splits",
        options="experiments.probe_data:ProbeDataOptions",
    ),
    StageRecord(
        "realvoices",
        f"{_E}.recipes.realvoices",
        "experiments.recipes.realvoices.build:build_realvoices",
        "a real-voice corpus folder",
        options="experiments.recipes.realvoices.__main__:RealVoicesOptions",
    ),
    StageRecord(
        "speakers",
        f"{_E}.speakers",
        "experiments.analysis.speakers:assign_speakers",
        "a manifest with speaker ids",
        options="experiments.analysis.speakers:HdbscanSettings",
    ),
    StageRecord(
        "study",
        f"{_E}.study",
        "experiments.study.runner:run",
        "a study's folder (stores, hypotheses, results, RESULTS.md)",
        options="experiments.study.__main__:StudyRunOptions",
    ),
    StageRecord(
        "vad_filter",
        f"{_E}.vad_filter",
        "experiments.scoring.vad:filter_speech",
        "the kept manifest and OUT.dropped.jsonl",
        options="experiments.scoring.vad:VadSettings",
    ),
    StageRecord(
        "winomt", f"{_E}.winomt", "experiments.scoring.winomt:evaluate_translations", "WinoMT / WinoST scores JSON", options="experiments.winomt:WinoMTOptions"
    ),
)
BY_NAME = {record.name: record for record in TABLE}
BY_COMMAND = {record.command_name: record for record in TABLE if record.command_name is not None}
STUDY_STAGES = tuple(record.name for record in TABLE if record.study)
JOB_ARRAY_STAGES = tuple(record.name for record in TABLE if record.job_array)
