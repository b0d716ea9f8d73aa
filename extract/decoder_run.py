"""A decoder-state store: for each utterance of a manifest, the decoder's states at each generated
token (:mod:`extract.decoder`), with the tokens, into part files as ``experiments.extract`` writes them.

The store is laid out as an encoder store is (``extract.store``), its rows being generated tokens
instead of frames: ``sites/decoder.layer.I/data`` holds one row per generated token, and the part's
``tokens`` group the token ids and surface strings aligned with those rows
(:class:`extract.store.TokenPartWriter`; :meth:`ShardReader.tokens`). Sites are untimed (frame
rate NaN). The run resumes as extraction does: the shard's utterances are cut into parts of fixed
size, a complete part is skipped, a part cut short is written again from the start, and complete
parts of another configuration (model, decoding, sites, manifest) are refused.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from extract.audio import MAX_SECONDS, SAMPLE_RATE
from extract.decoder import decoder_site_table, decoder_states, resolve_decoder_sites
from extract.families.generation import GenerationError, GenerationOptions, Generator
from extract.jobs import manifest_config, model_config
from extract.manifest import Utterance, read_manifest
from extract.runner import AudioLog, ExtractionReport, audio_batches, parts_to_write, store_attributes, write_parts
from extract.spec import ModelSpec, load_generator
from extract.stage_options import DecoderStatesOptions
from extract.store import Store, TokenPartWriter, utterance_meta

ROWS = (
    "generated tokens: row j is the decoder's state at the step that generated token j (its input the token before it), "
    "teacher-forced on the chosen output; the prompt and forced tokens left out, the end-of-sequence token kept"
)


@dataclass(frozen=True)
class DecoderStatesJob(DecoderStatesOptions):
    """Decoder states of ``spec`` for a manifest into the store folder ``out``, with the options of
    :class:`extract.stage_options.DecoderStatesOptions`."""

    spec: ModelSpec
    manifest: Path
    out: Path

    @property
    def decoding(self) -> GenerationOptions:
        return GenerationOptions(self.num_beams, self.max_new_tokens, translate_by_forcing=self.translate_by_forcing)

    @property
    def trim_seconds(self) -> float:
        return self.max_seconds or MAX_SECONDS[self.task]

    def store_config(self, sites: list[str], generator: Generator) -> dict:
        """What determines the stored rows; a resumed run must match it (as ``ExtractionJob.store_config``)."""
        extractor = generator.extractor
        return (
            {"kind": "decoder_states", "rows": ROWS}
            | model_config(self.spec, extractor.checkpoint, extractor.fingerprint)
            | {"sites": sites, "storage_dtype": self.storage_dtype, "task": self.task, "tgt_lang": self.tgt_lang if self.task == "st" else None}
            | {"decoding": generator.settings(), "max_seconds": self.trim_seconds}
            | manifest_config(self.manifest, self.limit, self.num_shards, self.utterances_per_part)
            | {"label": self.label or self.spec.label()}
        )


def run_decoder_states(job: DecoderStatesJob, show_progress: bool = True, reclaim_stale: bool = False, generator: Generator | None = None) -> ExtractionReport:
    """Runs ``job`` (resuming a store left unfinished). ``generator``: ``job.spec`` already loaded with
    ``job.decoding``; by default it is loaded here."""
    from tqdm.auto import tqdm

    utterances = read_manifest(job.manifest)[: job.limit]
    generator = generator or load_generator(job.spec, job.decoding)
    if generator.engine != "transformers":
        raise GenerationError(f"decoder states are read by hooks on the decoder, which only the transformers engine has, not {generator.engine}")
    extractor = generator.extractor
    sites = resolve_decoder_sites(extractor, "all" if job.sites == "all" else list(job.sites))
    generator.check(job.task, job.tgt_lang)
    config = job.store_config(sites, generator)
    untimed = {site: float("nan") for site in sites}  # rows are tokens, not timed frames
    attributes = replace(store_attributes(extractor, decoder_site_table(extractor), untimed, job.storage_dtype, config), manifest_utterances=len(utterances))
    remedy = "use a new --out folder, or move those parts out of it"
    store = Store(Path(job.out), config, job.num_shards, job.shard_index, job.utterances_per_part, reclaim_stale, remedy)
    todo, report = parts_to_write(store, utterances)
    with tqdm(total=sum(len(p) for _, p in todo), desc=f"decoder states of {extractor.family}", unit="utt", disable=not show_progress) as bar:

        def write(part: list[Utterance], path: Path, claim) -> Path:
            return _write_part(generator, job, sites, part, path, attributes, report, bar, claim)

        write_parts(store, todo, report, bar, write)
    return report


def _write_part(generator: Generator, job: DecoderStatesJob, sites: list[str], part: list[Utterance], path: Path, attributes, report, bar, claim) -> Path:
    """One part: its audio loaded (bad audio skipped and listed), then batch by batch generated and
    teacher-forced, each utterance added with its tokens; nothing is left under the final name unless complete."""
    log = AudioLog()
    batches = audio_batches(
        part,
        max_seconds=job.trim_seconds,
        batch_seconds=job.batch_seconds,
        batch_size=job.batch_size,
        log=log,
        input_seconds=generator.extractor.input_seconds,
        by_language=True,
        bar=bar,
    )
    writer, written = None, 0
    try:
        for batch in batches:
            decoded = decoder_states(generator, batch.audios, sites, batch.utterances[0].language, job.task, job.tgt_lang)
            if writer is None:
                recorded = replace(attributes, skipped=list(log.skipped), audio_notes=dict(log.notes))
                writer = TokenPartWriter(path, {site: decoded[0].states[site].shape[1] for site in sites}, job.storage_dtype, recorded, claim=claim)
            for utterance, samples, result in zip(batch.utterances, batch.audios, decoded):
                writer.add(utterance.id, result.states, utterance_meta(utterance, len(samples) / SAMPLE_RATE), tokens=result.tokens)
            written += len(batch.utterances)
            bar.update(len(batch.utterances))
        if writer is None:  # every utterance of the part was skipped
            writer = TokenPartWriter(path, {}, job.storage_dtype, replace(attributes, skipped=list(log.skipped), audio_notes=dict(log.notes)), claim=claim)
        closed = writer.close()
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    report.add(written, log)
    return closed
