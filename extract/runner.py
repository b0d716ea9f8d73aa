"""The one audio batch loop (load, group, batch by total seconds sorted by length), and the two runs
built on it: extraction (hooked forward -> part files) and transcription (generate -> JSONL rows).

Resumable: the manifest's slice for one shard is cut into parts of fixed size in manifest order;
a part whose file is complete is skipped on a rerun, a part cut short by an interruption is
written again from the start. Since the order inside a part is a deterministic sort, a killed and
resumed run produces the same store as an uninterrupted one.

Each part is written under an exclusive claim (``extract.store.PartClaim``). A part claimed by
another live writer stops this run with a ``ClaimError`` naming that writer (the run fails rather
than skipping the part, so a run that exits 0 has written or found every part of its shard); a
claim left by a killed process is reported with what to delete, and taken over only when the
caller asks (``reclaim_stale``: a requeued job after SIGKILL), with a note. Complete parts
of another configuration in the folder are refused before anything is written.

Transcription appends one row per utterance to a hypotheses file opened with :func:`hypotheses_log`
(one writer at a time, a cut last line redone, another kind of file refused: ``extract.appendlog``).
"""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import Future, wait
from contextlib import AbstractContextManager, ExitStack, nullcontext
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from extract import encoder_reuse
from extract.appendlog import AppendLog, RowKind
from extract.audio import SAMPLE_RATE, AudioError, load_audio
from extract.claims import claim_path
from extract.diskfull import naming_full_disk
from extract.errors import UserError
from extract.fingerprint import compared
from extract.manifest import Utterance
from extract.pipeline import BackgroundWriter, in_background, prefetched
from extract.provenance import provenance, settings_damage
from extract.stage_options import ExtractOptions
from extract.store import PartClaim, PartWriter, Store, StoreAttributes, comparable_config, is_complete, part_attributes, part_damage, utterance_meta
from extract.store.folder import changed_manifest

if TYPE_CHECKING:  # annotations only: the model modules load torch, which planning and --help never need
    from extract.families.base import Extractor
    from extract.families.generation import Generator
    from extract.interventions import Intervener

TRANSCRIPTION_CHUNK = 256  # utterances whose audio a transcription holds in memory at once
GPU_BATCH_LIMIT = 16  # utterances per batch on a GPU at most: 16 wrote faster than 64 on an H100 (docs/benchmarks.md)
HYPOTHESIS_ROWS = RowKind("hypothesis row", ("id", "hypothesis"), unique="id")


@dataclass
class AudioLog:
    """What loading found: the utterances skipped for bad audio, and per id what loading changed."""

    skipped: list[dict] = field(default_factory=list)  # id, audio, error, message
    notes: dict[str, dict] = field(default_factory=dict)  # id -> notes (see extract.audio)


def audio_notes_summary(notes: dict[str, dict]) -> str:
    """``3 trimmed, 1 shorter_than_header`` from per-utterance notes."""
    counts = Counter(kind for note in notes.values() for kind in note)
    return ", ".join(f"{count} {kind}" for kind, count in sorted(counts.items())) or "none"


def print_skipped(skipped: list[dict], key: str = "id") -> None:
    """One stderr line per input a run skipped (``{key: ..., "message": ...}``: bad audio)."""
    for item in skipped:
        print(f"  skipped {item[key]}: {item['message']}", file=sys.stderr)


@dataclass
class AudioBatch:
    utterances: list[Utterance]
    audios: list[np.ndarray]  # 16 kHz mono float32, one per utterance


@dataclass
class ExtractionReport:
    written: int = 0
    resumed: int = 0  # utterances found in complete parts of an earlier run
    skipped: list[dict] = field(default_factory=list)  # bad audio: id, file, error
    parts: list[str] = field(default_factory=list)
    audio_notes: dict[str, dict] = field(default_factory=dict)  # id -> what loading changed (see extract.audio)

    def add(self, written: int, log: AudioLog) -> None:
        """Counts a part this run wrote."""
        self.written += written
        self.skipped.extend(log.skipped)
        self.audio_notes.update(log.notes)


def batches_by_seconds(durations: list[float], batch_seconds: float, sort_by: list[float] | None = None) -> list[list[int]]:
    """Indices sorted by (``sort_by`` or duration, position), cut into batches whose total duration
    stays under ``batch_seconds`` (a longer single item forms its own batch). ``sort_by`` lets a model
    whose inputs all cost the same (Whisper's 30 s window) still batch similar lengths together."""
    keys = durations if sort_by is None else sort_by
    order = sorted(range(len(durations)), key=lambda i: (keys[i], i))
    batches, current, total = [], [], 0.0
    for index in order:
        if current and total + durations[index] > batch_seconds:
            batches.append(current)
            current, total = [], 0.0
        current.append(index)
        total += durations[index]
    if current:
        batches.append(current)
    return batches


def audio_batches(
    utterances: list[Utterance],
    *,
    max_seconds: float,
    batch_seconds: float,
    log: AudioLog,
    input_seconds: Callable[[float], float] = float,
    by_language: bool = False,
    chunk: int | None = None,
    bar=None,
    batch_size: int | None = None,
) -> Iterator[AudioBatch]:
    """The one audio batch loop. Loads ``chunk`` utterances at a time (all when ``None``), trimmed to
    ``max_seconds``; bad audio goes to ``log.skipped`` (and ticks ``bar``), loading notes to ``log.notes``.
    Then, per source language when ``by_language`` (sorted by code), batches whose ``input_seconds``
    (what the model processes) add up to at most ``batch_seconds``, sorted by length; with
    ``batch_size``, batches of that many utterances instead (a GPU, where a batch's cost is its
    count: Whisper pads every clip to 30 s). The whole chunk is loaded before its first batch is yielded."""
    size = chunk or max(len(utterances), 1)
    for start in range(0, len(utterances), size):
        audio = load_utterance_audio(utterances[start : start + size], max_seconds, log, bar)
        kept = [u for u in utterances[start : start + size] if u.id in audio]
        groups: dict[str, list[Utterance]] = defaultdict(list)
        for utterance in kept:
            groups[utterance.language if by_language else ""].append(utterance)
        for _, group in sorted(groups.items()):
            seconds = [len(audio[u.id]) / SAMPLE_RATE for u in group]
            costs, budget = ([1.0] * len(seconds), float(batch_size)) if batch_size else ([input_seconds(s) for s in seconds], batch_seconds)
            for batch in batches_by_seconds(costs, budget, sort_by=seconds):
                chosen = [group[i] for i in batch]
                yield AudioBatch(chosen, [audio[u.id] for u in chosen])


def load_utterance_audio(utterances: list[Utterance], max_seconds: float, log: AudioLog, bar=None) -> dict[str, np.ndarray]:
    """Samples of every usable utterance by id; the rest, and what loading changed, go to ``log``."""
    audio = {}
    for utterance in utterances:
        try:
            loaded = load_audio(utterance.audio, utterance.offset, utterance.duration, max_seconds=max_seconds)
        except AudioError as error:
            log.skipped.append({"id": utterance.id, "audio": utterance.audio, "error": type(error).__name__, "message": str(error)})
            if bar is not None:
                bar.update()
            continue
        audio[utterance.id] = loaded.samples
        if loaded.notes:
            log.notes[utterance.id] = loaded.notes
    return audio


def intervened(intervener: Intervener | None, extractor: Extractor, random_init: bool = False, seed: int | None = None) -> AbstractContextManager:
    """``intervener`` installed on ``extractor`` for a whole run (nothing when None); encoder outputs are
    then neither kept nor reused (:mod:`extract.encoder_reuse`): the interventions edit them."""
    if intervener is None:
        return nullcontext()
    stack = ExitStack()
    stack.enter_context(encoder_reuse.suspended())
    stack.enter_context(intervener.installed(extractor, random_init, seed))
    return stack


def batch_rows(intervener: Intervener | None, utterances: list[Utterance], audios: list[np.ndarray]) -> AbstractContextManager:
    """Tells ``intervener`` the genders and input samples of the batch about to run (nothing when None)."""
    return nullcontext() if intervener is None else intervener.batch([u.gender for u in utterances], [len(a) for a in audios])


def run_extraction(
    extractor: Extractor,
    utterances: list[Utterance],
    sites: list[str],
    out_dir: str | Path,
    options: ExtractOptions | None = None,
    *,
    config: dict,
    show_progress: bool = True,
    reclaim_stale: bool = False,
    intervener: Intervener | None = None,
) -> ExtractionReport:
    """Extracts ``sites`` for this shard's utterances into part files under ``out_dir`` (resuming), as
    ``options`` say (an :class:`extract.jobs.ExtractionJob` is one; its ``sites``, ``label`` and
    interventions are the caller's to resolve, record in ``config`` and load).

    Batches hold ``batch_seconds`` of model input on a CPU; on a GPU ``batch_size`` utterances
    (default :func:`gpu_batch_size`, from the free memory); ``batch_size`` given on a CPU counts too.
    ``positions`` and ``pool`` store less (:meth:`Extractor.extract`); record them in ``config``
    (``ExtractionJob.store_config`` does), since probes read them there.

    With ``intervener``, its interventions edit the model's states while it runs (checked against
    the model first; random init and seed are read from ``config``), and :meth:`Intervener.records` are
    added to ``config`` as ``interventions`` (in every part's attributes: a rerun with others is refused)."""
    from tqdm.auto import tqdm

    options = options or ExtractOptions()
    if intervener is not None:
        config = {**config, "interventions": intervener.records()}
    frame_rates = {site: extractor.frame_rate(site) for site in sites}
    attributes = replace(store_attributes(extractor, extractor.site_table(), frame_rates, options.storage_dtype, config), manifest_utterances=len(utterances))
    store = Store(Path(out_dir), config, options.num_shards, options.shard_index, options.utterances_per_part, reclaim_stale)
    todo, report = parts_to_write(store, utterances)
    if options.batch_size is None and extractor.device.type == "cuda":
        options = replace(options, batch_size=gpu_batch_size(extractor, sites, options.max_seconds))
    installed = intervened(intervener, extractor, bool(config.get("random_init", False)), config.get("seed"))
    with installed, tqdm(total=sum(len(p) for _, p in todo), desc=f"extracting {extractor.family}", unit="utt", disable=not show_progress) as bar:

        def write(part: list[Utterance], path: Path, claim: PartClaim) -> Path:
            return _write_part(extractor, part, sites, path, attributes, options, report, bar, claim, intervener)

        write_parts(store, todo, report, bar, write)
    return report


def store_attributes(extractor: Extractor, table: dict, frame_rates: dict[str, float], storage_dtype: str, config: dict) -> StoreAttributes:
    """What every part of a store records of what wrote it (the keys of ``frame_rates`` are the sites
    stored). Shared by every store writer (extraction, decoder states)."""
    return StoreAttributes(
        model_id=extractor.checkpoint,
        revision=extractor.revision or "",
        family=extractor.family,
        site_modules={site: f"{table[site].module or '<model>'}:{table[site].take}" for site in frame_rates},
        frame_rates=dict(frame_rates),
        model_dtype=str(extractor.dtype).removeprefix("torch."),
        storage_dtype=storage_dtype,
        config=config,
        **provenance(),
    )


def write_parts(store: Store, todo: list[tuple[int, list[Utterance]]], report: ExtractionReport, bar, write: Callable[..., Path | EndingPart]) -> None:
    """Each part of ``todo`` (:func:`parts_to_write`) under its claim: one that another writer finished
    since the scan is resumed, the others written by ``write(part, path, claim)``, which returns the
    part's path, or an :class:`EndingPart` whose end runs behind the next part's ``write`` (its
    claim is held until it has ended; one part at most is ending). Shared by every store writer,
    so that they claim and resume alike.

    An error stops the run after the part still ending has ended (it is kept if it ended whole) and
    every claim is released; the error raised is the first one."""
    ending: tuple[EndingPart, ExitStack] | None = None
    try:
        for number, part in todo:
            path = store.path(number)
            with ExitStack() as held:
                claim = held.enter_context(store.claim(path, on_reclaim=bar.write))
                if is_complete(path) and store.resumable(path, part) is None:  # another writer finished it since the scan above
                    previous, ending = ending, None
                    _ended(previous, report)
                    resume_part(path, part, report)
                    bar.update(len(part))
                    continue
                written = write(part, path, claim)
                if isinstance(written, EndingPart):
                    previous, ending = ending, (written, held.pop_all())
                    try:
                        _ended(previous, report)
                    except BaseException:
                        previous, ending = ending, None
                        _ended(previous, report, quiet=True)  # the later part: its error, if any, comes second
                        raise
                    continue
            previous, ending = ending, None
            _ended(previous, report)
            report.parts.append(str(written))
    except BaseException as error:
        failed = _ended(ending, report, quiet=True)
        if failed is not None and failed is not error:  # the ending part failed first: a loop in one thread stops there
            raise failed  # noqa: B904 (its own cause kept; the later error becomes its context)
        raise
    _ended(ending, report)


@dataclass
class EndingPart:
    """A part whose model loop is done and whose end (``end``: the writer thread's last batches and
    the part's close) runs on a thread; ``record`` adds what it wrote to the report once it has ended."""

    end: Future  # of the part's path
    record: Callable[[], None]


def _ended(ending: tuple[EndingPart, ExitStack] | None, report: ExtractionReport, quiet: bool = False) -> BaseException | None:
    """Waits for the part ``ending`` (if any), records it and releases its claim; ``quiet``: its
    error is returned, not raised (another is on its way)."""
    if ending is None:
        return None
    part, claim = ending
    with claim:
        try:
            path = part.end.result()
        except BaseException:
            if not part.end.done():  # the wait was interrupted (SIGTERM, Ctrl-C): the part ends before its claim goes
                wait([part.end])
            if quiet:
                return part.end.exception()
            raise
        part.record()
        report.parts.append(str(path))


def gpu_batch_size(extractor: Extractor, sites: list[str], max_seconds: float) -> int:
    """Utterances per batch on a GPU: as many as let every site's states of the longest input (in
    the model's dtype, three copies: captured, packed, cast) fill at most half of the free memory,
    between 1 and ``GPU_BATCH_LIMIT``."""
    import torch

    free, _ = torch.cuda.mem_get_info(extractor.device)
    rates = [extractor.frame_rate(site) for site in sites]
    frames = extractor.input_seconds(max_seconds) * max([rate for rate in rates if rate == rate] or [50.0])
    config = getattr(extractor.model, "config", None)
    width = getattr(config, "d_model", None) or getattr(config, "hidden_size", None) or 1024
    per_utterance = 3 * len(sites) * frames * width * torch.finfo(extractor.dtype).bits // 8
    return int(max(1, min(GPU_BATCH_LIMIT, free // 2 // max(per_utterance, 1))))


def parts_to_write(store: Store, utterances: list[Utterance]) -> tuple[list[tuple[int, list[Utterance]]], ExtractionReport]:
    """This shard's parts of ``store`` (:meth:`Store.parts`; its folder created) still to write, as ``(part number, utterances)``,
    and the report of the run: complete parts already there are resumed (counted in it; refused when written with another
    configuration or for other utterances), a damaged one is named on stderr and written again. A
    complete part beside a claim left by a killed writer (one killed while the part ended) has that
    claim refused as any stale claim is, or, with ``reclaim_stale``, removed: readers refuse a store beside a claim.
    Shared by every store writer (extraction, decoder states), so that they resume alike."""
    store.folder.mkdir(parents=True, exist_ok=True)
    finished, todo, report = store.finished(), [], ExtractionReport()
    for number, part in enumerate(store.parts(utterances)):
        path = store.path(number)
        problem = store.resumable(path, part) if path.name in finished else part_damage(path) if path.is_file() else None
        if path.name in finished and problem is None:
            resume_part(path, part, report)
            if claim_path(path).exists():  # its writer was killed after the rename: its claim taken over and released
                with store.claim(path, on_reclaim=lambda message: print(f"[extract] {message}", file=sys.stderr)):
                    pass
            continue
        if problem is not None:
            print(f"[extract] {path}: damaged part ({problem}); re-extracting it", file=sys.stderr)
        todo.append((number, part))
    return todo, report


def resume_part(path: Path, part: list[Utterance], report: ExtractionReport) -> None:
    """Counts the complete part ``path`` (checked by :meth:`Store.resumable`) in ``report`` as already done."""
    attributes = part_attributes(path)
    skipped = attributes.skipped or []
    report.resumed += len(part) - len(skipped)
    report.skipped.extend(skipped)
    report.audio_notes.update(attributes.audio_notes or {})
    report.parts.append(str(path))


def _write_part(extractor, part, sites, path, attributes, options: ExtractOptions, report, bar, claim, intervener=None) -> EndingPart:
    """One part: audio loaded on a thread ahead of the model, states written on a thread behind it
    (:mod:`extract.pipeline`); the model runs on the calling thread, and returns when it has seen
    the part's last batch: the part's end (the last writes, the close) runs on a thread while the
    next part starts. ``options``: the batching, trimming, storage dtype, positions, pooling (:meth:`Extractor.extract`)."""
    log = AudioLog()
    writer, written_here, background = None, 0, BackgroundWriter()

    def open_writer(dims: dict[str, int]) -> PartWriter:  # after the part's audio is loaded: its log goes in the attributes
        recorded = replace(attributes, skipped=list(log.skipped), audio_notes=dict(log.notes))
        return PartWriter(path, dims, options.storage_dtype, recorded, claim=claim)

    def write(writer: PartWriter, chosen: list[Utterance], audios: list[np.ndarray], states: list[dict[str, np.ndarray]]) -> None:
        for utterance, samples, state in zip(chosen, audios, states):
            speech = {site: extractor.speech_frames(site, len(samples), array.shape[0]) for site, array in state.items()}
            writer.add(utterance.id, state, utterance_meta(utterance, len(samples) / SAMPLE_RATE), speech_frames=speech)

    stored = {"dtype": options.storage_dtype, "positions": options.positions, "pool": options.pool}
    # a part's audio all loaded first (no chunk): its skipped list is whole when it opens
    batching = {"max_seconds": options.max_seconds, "batch_seconds": options.batch_seconds, "batch_size": options.batch_size}
    batches = audio_batches(part, log=log, input_seconds=extractor.input_seconds, bar=bar, **batching)
    try:
        for batch in prefetched(batches):
            chosen = batch.utterances
            with batch_rows(intervener, chosen, batch.audios):
                states = extractor.extract(batch.audios, sites, ids=[u.id for u in chosen], **stored)
            if writer is None:
                writer = open_writer({site: states[0][site].shape[1] for site in sites})
            background.submit(partial(write, writer, chosen, batch.audios, states))
            written_here += len(chosen)
            bar.update(len(chosen))
        if writer is None:  # every utterance of the part was skipped
            writer = open_writer({})
    except BaseException:
        background.cancel()
        if writer is not None:
            writer.abort()  # a failed write was already discarded, with its message (see PartWriter)
        raise

    return EndingPart(in_background(partial(_end_part, background, writer)), partial(report.add, written_here, log))


def _end_part(background: BackgroundWriter, writer: PartWriter) -> Path:
    """The part's last writes (the writer thread's queue), then its close; a failure discards it."""
    try:
        background.finish()
        return writer.close()
    except BaseException:
        writer.abort()  # a failed write was already discarded, with its message (see PartWriter)
        raise


def transcription_batches(
    generator: Generator,
    utterances: list[Utterance],
    task: str,
    tgt_lang: str | None,
    *,
    batch_seconds: float,
    max_seconds: float,
    log: AudioLog,
    bar=None,
    intervener: Intervener | None = None,
) -> Iterator[list[tuple[Utterance, str]]]:
    """(utterance, hypothesis) pairs, one list per batch; each batch shares its source language.
    With ``intervener`` (installed by the caller), each batch's rows are announced to it."""
    batches = audio_batches(
        utterances,
        max_seconds=max_seconds,
        batch_seconds=batch_seconds,
        log=log,
        input_seconds=generator.extractor.input_seconds,
        by_language=True,
        chunk=TRANSCRIPTION_CHUNK,
        bar=bar,
    )
    for batch in batches:
        language = batch.utterances[0].language
        with batch_rows(intervener, batch.utterances, batch.audios):
            hypotheses = generator.generate(batch.audios, language, task, tgt_lang)
        yield list(zip(batch.utterances, hypotheses))


def run_transcription(
    generator: Generator,
    utterances: list[Utterance],
    out: Path | AppendLog,
    task: str,
    tgt_lang: str | None,
    model: str,
    batch_seconds: float,
    max_seconds: float,
    show_progress: bool = True,
    intervener: Intervener | None = None,
) -> tuple[int, list[dict], dict[str, dict]]:
    """Append a hypothesis row per utterance to ``out``, batch by batch (a killed run resumes from
    :func:`finished_ids`); returns (rows written, skipped records, audio notes by id). ``out`` is the
    hypotheses file, claimed for this call, or its :func:`hypotheses_log` already open (the caller
    then chose ``utterances`` from its ids under the same claim). With ``intervener``, its
    interventions edit the encoder's states (it runs once per batch in generation); the caller
    records them in the settings file."""
    from tqdm.auto import tqdm

    written, log = 0, AudioLog()
    family = generator.extractor.family
    installed = intervened(intervener, generator.extractor)
    hypotheses = nullcontext(out) if isinstance(out, AppendLog) else hypotheses_log(out)
    bar = tqdm(total=len(utterances), desc=f"{task} with {family}", unit="utt", disable=not show_progress)
    kept = "the rows written so far are kept and the rerun continues after them"
    path = out.path if isinstance(out, AppendLog) else out
    with naming_full_disk(path, kept), installed, hypotheses as output, bar:
        batches = transcription_batches(
            generator, utterances, task, tgt_lang, batch_seconds=batch_seconds, max_seconds=max_seconds, log=log, bar=bar, intervener=intervener
        )
        for pairs in batches:
            output.append(hypothesis_row(utterance, hypothesis, task, tgt_lang, model, log.notes.get(utterance.id)) for utterance, hypothesis in pairs)
            written += len(pairs)
            bar.update(len(pairs))
    return written, log.skipped, log.notes


def hypothesis_row(utterance: Utterance, hypothesis: str, task: str, tgt_lang: str | None, model: str, audio_notes: dict | None = None) -> dict:
    """One transcription row; ``model`` is the label, ``dataset`` the manifest's ("" when it has none)."""
    row = {
        "id": utterance.id,
        "reference": utterance.text if task == "asr" else utterance.translation,
        "hypothesis": hypothesis,
        "gender": utterance.gender,
        "speaker": utterance.speaker,
        "language": utterance.language,
        "model": model,
        "task": task,
        "tgt_lang": tgt_lang if task == "st" else utterance.language,
        "dataset": utterance.dataset,
    }
    if task == "st":
        row["source"] = utterance.text
    if audio_notes:
        row["audio_notes"] = audio_notes
    return row


def hypotheses_log(path: Path, reclaim_stale: bool = False) -> AppendLog:
    """A hypotheses file opened for one writer (:class:`extract.appendlog.AppendLog`)."""
    return AppendLog(path, HYPOTHESIS_ROWS, reclaim_stale)


def finished_ids(path: Path) -> set[str]:
    """Ids already in a hypotheses file (read under its claim: a cut last line is redone)."""
    if not path.exists():
        return set()
    with hypotheses_log(path) as hypotheses:
        return hypotheses.ids


def _flat(settings: dict, prefix: str = "") -> dict:
    """Nested settings as ``{"decoding.overrides.num_beams": 2, ...}``."""
    flat = {}
    for key, value in settings.items():
        if isinstance(value, dict):  # an empty one adds nothing: {} and {"num_beams": 5} differ in num_beams alone
            flat |= _flat(value, f"{prefix}{key}.")
        else:
            flat[f"{prefix}{key}"] = value
    return flat


class SettingsMismatchError(UserError, ValueError):
    """A transcription file was started with other settings than this run's."""


def check_settings(path: Path, settings: dict, output: Path, what: str = "hypotheses file") -> None:
    """Write a transcription's settings file ``path``, or refuse to mix outputs of different settings
    in the file ``output`` (:class:`SettingsMismatchError` naming each differing setting by its dotted
    path, or the manifest that changed since the ``what`` was started; the code version, how the manifest's path is spelled and the
    checkpoint's spelling may differ, see :func:`extract.store.comparable_config` and
    :func:`extract.fingerprint.compared`). Settings bind the rows they produced: while ``output``
    holds no row (a run refused at its first batch), the file is replaced."""
    if holds_rows(output):
        if not path.exists():
            raise SettingsMismatchError(
                f"{output} holds rows but not its settings file {path.name}: they cannot be checked against this run's settings, "
                "so they are not resumed; put the settings file back, or use a new --out file (study run: --redo the stage)"
            )
        problem = settings_damage(path)
        if problem is not None:
            raise SettingsMismatchError(
                f"{path}: {problem}; restore it from where {output.name} was written, or use a new --out file (study run: --redo the stage)"
            )
        recorded = json.loads(path.read_text(encoding="utf-8"))
        message = changed_manifest(recorded, settings, what, "--out file")
        if message:
            raise SettingsMismatchError(f"{path}: {message}")
        stored, current = compared(
            {key: value for key, value in comparable_config(recorded).items() if key != "provenance"},
            {key: value for key, value in comparable_config(settings).items() if key != "provenance"},
        )
        family_changed = stored.get("family") != current.get("family")
        stored, current = _flat(stored), _flat(current)
        if stored != current:
            keys = sorted(key for key in set(stored) | set(current) if stored.get(key) != current.get(key))
            decoding = [key for key in keys if key.startswith("decoding.")] if family_changed else []
            keys = [key for key in keys if key not in decoding]  # another family's generation config differs key by key: dozens that say nothing more
            differing = ", ".join(f"{key}: {stored.get(key)!r} vs {current.get(key)!r}" for key in keys)
            differing += f", and {len(decoding)} decoding settings of the other family" if decoding else ""
            raise SettingsMismatchError(f"{path} records other settings than this run ({differing}); use a new --out file")
        return
    with naming_full_disk(path, "no row was transcribed yet"):
        path.write_text(json.dumps(settings, indent=2, ensure_ascii=False) + "\n")


def holds_rows(path: Path) -> bool:
    """Whether ``path`` holds at least one complete (newline-ended) non-blank line."""
    if not path.is_file():
        return False
    data = path.read_bytes()
    return bool(data[: data.rfind(b"\n") + 1].strip())
