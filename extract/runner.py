"""The extraction loop: manifest -> batches by total seconds -> hooked forward -> part files.

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
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from extract.audio import AudioError, load_audio
from extract.families.base import Extractor
from extract.manifest import Utterance
from extract.provenance import provenance
from extract.store import PartClaim, PartWriter, StoreError, complete_parts, differing_keys, is_complete, is_disk_full


@dataclass
class ExtractionReport:
    written: int = 0
    resumed: int = 0  # utterances found in complete parts of an earlier run
    skipped: list[dict] = field(default_factory=list)  # bad audio: id, file, error
    parts: list[str] = field(default_factory=list)
    audio_notes: dict[str, dict] = field(default_factory=dict)  # id -> what loading changed (see extract.audio)


def shard_slice(utterances: list[Utterance], num_shards: int, shard_index: int) -> list[Utterance]:
    """Deterministic partition: utterance i of the manifest goes to shard i mod N."""
    if num_shards < 1 or not 0 <= shard_index < num_shards:
        raise ValueError(f"need 0 <= shard index < number of shards, got {shard_index} of {num_shards}")
    return utterances[shard_index::num_shards]


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


def part_name(shard_index: int, num_shards: int, part: int) -> str:
    return f"shard{shard_index:04d}of{num_shards:04d}-part{part:05d}.h5"


def _meta(utterance: Utterance, seconds: float) -> dict:
    return {"gender": utterance.gender, "speaker": utterance.speaker, "language": utterance.language, "split": utterance.split, "dataset": utterance.dataset, "duration": seconds}


def run_extraction(
    extractor: Extractor,
    utterances: list[Utterance],
    sites: list[str],
    out_dir: str | Path,
    *,
    config: dict,
    storage_dtype: str = "float16",
    batch_seconds: float = 120.0,
    max_seconds: float = 30.0,
    num_shards: int = 1,
    shard_index: int = 0,
    utterances_per_part: int = 256,
    show_progress: bool = True,
    reclaim_stale: bool = False,
) -> ExtractionReport:
    from tqdm.auto import tqdm

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    mine = shard_slice(utterances, num_shards, shard_index)
    parts = [mine[start : start + utterances_per_part] for start in range(0, len(mine), utterances_per_part)]
    table = extractor.site_table()
    attributes = {
        "model_id": extractor.checkpoint,
        "revision": extractor.revision or "",
        "family": extractor.family,
        "site_modules": {site: f"{table[site].module or '<model>'}:{table[site].take}" for site in sites},
        "frame_rates": {site: extractor.frame_rate(site) for site in sites},
        "model_dtype": str(extractor.dtype).removeprefix("torch."),
        "storage_dtype": storage_dtype,
        "config": config,
        **provenance(),
    }
    report = ExtractionReport()
    finished = {path.name: path for path in complete_parts(out_dir)}
    refuse_other_configurations(out_dir, list(finished.values()), config)
    todo = []
    for number, part in enumerate(parts):
        name = part_name(shard_index, num_shards, number)
        if name in finished:
            _resume(finished[name], part, report)
        else:
            todo.append((number, part))
    with tqdm(total=sum(len(p) for _, p in todo), desc=f"extracting {extractor.family}", unit="utt", disable=not show_progress) as bar:
        for number, part in todo:
            path = out_dir / part_name(shard_index, num_shards, number)
            with PartClaim(path, reclaim_stale=reclaim_stale, on_reclaim=bar.write) as claim:
                if is_complete(path):  # another writer finished it since the scan above
                    _resume(path, part, report)
                    bar.update(len(part))
                    continue
                written = _write_part(extractor, part, sites, path, attributes, storage_dtype, batch_seconds, max_seconds, report, bar, claim)
            report.parts.append(str(written))
    return report


def _resume(path: Path, part: list[Utterance], report: ExtractionReport) -> None:
    _check_resumable(path, part)
    report.resumed += len(part) - len(json.loads(_attribute(path, "skipped")))
    report.skipped.extend(json.loads(_attribute(path, "skipped")))
    report.audio_notes.update(json.loads(_attribute(path, "audio_notes", "{}")))
    report.parts.append(str(path))


def _attribute(path: Path, key: str, default=None):
    import h5py

    with h5py.File(path, "r") as handle:
        return handle.attrs[key] if default is None else handle.attrs.get(key, default)


def refuse_other_configurations(out_dir: Path, parts: list[Path], config: dict) -> None:
    """Every complete part already in ``out_dir`` must come from this configuration."""
    import h5py

    others: dict[str, list[Path]] = {}
    for path in parts:
        with h5py.File(path, "r") as handle:
            stored = str(handle.attrs.get("config", ""))
        try:
            same = json.loads(stored) == config
        except ValueError:
            same = False
        if not same:
            others.setdefault(stored, []).append(path)
    if others:
        names = [p.name for group in others.values() for p in group]
        differences = "; ".join(differing_keys(stored, json.dumps(config)) for stored in others)
        raise StoreError(f"{out_dir}: {', '.join(names[:3])}{' ...' if len(names) > 3 else ''} ({len(names)} part(s)) were written with "
                         f"another configuration (stored vs this run: {differences}); use a new --out folder or delete them")


def _check_resumable(path: Path, part: list[Utterance]) -> None:
    import h5py

    with h5py.File(path, "r") as handle:
        stored_ids = set(handle["ids"].asstr()[:]) | {s["id"] for s in json.loads(handle.attrs["skipped"])}
    if stored_ids != {u.id for u in part}:
        raise StoreError(f"{path} holds other utterances than this manifest assigns to it; use a new --out folder")


def _load_part_audio(part: list[Utterance], max_seconds: float, bar) -> tuple[dict, list[dict], dict]:
    """Audio of every usable utterance, the skipped ones, and the notes on what loading changed."""
    audio, skipped, notes = {}, [], {}
    for utterance in part:
        try:
            loaded = load_audio(utterance.audio, utterance.offset, utterance.duration, max_seconds=max_seconds)
        except AudioError as error:
            skipped.append({"id": utterance.id, "audio": utterance.audio, "error": type(error).__name__, "message": str(error)})
            bar.update()
            continue
        audio[utterance.id] = loaded.samples
        if loaded.notes:
            notes[utterance.id] = loaded.notes
    return audio, skipped, notes


def _write_part(extractor, part, sites, path, attributes, storage_dtype, batch_seconds, max_seconds, report, bar, claim) -> Path:
    audio, skipped, notes = _load_part_audio(part, max_seconds, bar)
    kept = [u for u in part if u.id in audio]
    seconds = [len(audio[u.id]) / 16_000 for u in kept]
    part_attributes = {**attributes, "skipped": json.dumps(skipped), "audio_notes": json.dumps(notes)}
    writer = None
    try:
        for batch in batches_by_seconds([extractor.input_seconds(s) for s in seconds], batch_seconds, sort_by=seconds):
            chosen = [kept[i] for i in batch]
            states = extractor.extract([audio[u.id] for u in chosen], sites, ids=[u.id for u in chosen])
            if writer is None:
                dims = {site: states[0][site].shape[1] for site in sites}
                writer = PartWriter(path, dims, storage_dtype, part_attributes, claim=claim)
            for utterance, state in zip(chosen, states):
                samples = len(audio[utterance.id])
                speech = {site: extractor.speech_frames(site, samples, array.shape[0]) for site, array in state.items()}
                writer.add(utterance.id, state, _meta(utterance, samples / 16_000), valid_frames=speech)
            bar.update(len(chosen))
        if writer is None:  # every utterance of the part was skipped
            writer = PartWriter(path, {}, storage_dtype, part_attributes, claim=claim)
        written = writer.close()
    except BaseException as error:
        if writer is not None:
            writer.abort()
        if is_disk_full(error):
            raise StoreError(f"disk full while writing {path.name} in {path.parent}: the part was discarded and no part was "
                             "marked complete by it; free space and rerun (complete parts are kept and skipped)") from error
        raise
    report.written += len(kept)
    report.skipped.extend(skipped)
    report.audio_notes.update(notes)
    return written
