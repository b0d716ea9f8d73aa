"""The extraction loop: manifest -> batches by total seconds -> hooked forward -> part files.

Resumable: the manifest's slice for one shard is cut into parts of fixed size in manifest order;
a part whose file is complete is skipped on a rerun, a part cut short by a kill is written again
from the start. Since the order inside a part is a deterministic sort, a killed and resumed run
produces the same store as an uninterrupted one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from extract.audio import AudioError, load_audio
from extract.families.base import Extractor
from extract.manifest import Utterance
from extract.provenance import provenance
from extract.store import PartWriter, complete_parts


@dataclass
class ExtractionReport:
    written: int = 0
    resumed: int = 0  # utterances found in complete parts of an earlier run
    skipped: list[dict] = field(default_factory=list)  # bad audio: id, file, error
    parts: list[str] = field(default_factory=list)


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
    todo = []
    for number, part in enumerate(parts):
        name = part_name(shard_index, num_shards, number)
        if name in finished:
            _check_resumable(finished[name], part, config)
            report.resumed += len(part)
            report.skipped.extend(json.loads(_attribute(finished[name], "skipped")))
            report.parts.append(str(finished[name]))
        else:
            todo.append((number, part))
    with tqdm(total=sum(len(p) for _, p in todo), desc=f"extracting {extractor.family}", unit="utt", disable=not show_progress) as bar:
        for number, part in todo:
            path = out_dir / part_name(shard_index, num_shards, number)
            report.parts.append(str(_write_part(extractor, part, sites, path, attributes, storage_dtype, batch_seconds, max_seconds, report, bar)))
    return report


def _attribute(path: Path, key: str):
    import h5py

    with h5py.File(path, "r") as handle:
        return handle.attrs[key]


def _check_resumable(path: Path, part: list[Utterance], config: dict) -> None:
    import h5py

    with h5py.File(path, "r") as handle:
        stored_config = json.loads(handle.attrs["config"])
        stored_ids = set(handle["ids"].asstr()[:]) | {s["id"] for s in json.loads(handle.attrs["skipped"])}
    if stored_config != config:
        raise RuntimeError(f"{path} was written with another configuration; use a new --out folder or delete it\n  stored:  {stored_config}\n  current: {config}")
    if stored_ids != {u.id for u in part}:
        raise RuntimeError(f"{path} holds other utterances than this manifest assigns to it; use a new --out folder")


def _write_part(extractor, part, sites, path, attributes, storage_dtype, batch_seconds, max_seconds, report, bar) -> Path:
    audio, skipped = {}, []
    for utterance in part:
        try:
            audio[utterance.id] = load_audio(utterance.audio, utterance.offset, utterance.duration, max_seconds=max_seconds).samples
        except AudioError as error:
            skipped.append({"id": utterance.id, "audio": utterance.audio, "error": type(error).__name__, "message": str(error)})
            bar.update()
    kept = [u for u in part if u.id in audio]
    seconds = [len(audio[u.id]) / 16_000 for u in kept]
    writer = None
    try:
        for batch in batches_by_seconds([extractor.input_seconds(s) for s in seconds], batch_seconds, sort_by=seconds):
            chosen = [kept[i] for i in batch]
            states = extractor.extract([audio[u.id] for u in chosen], sites, ids=[u.id for u in chosen])
            if writer is None:
                dims = {site: states[0][site].shape[1] for site in sites}
                writer = PartWriter(path, dims, storage_dtype, {**attributes, "skipped": json.dumps(skipped)})
            for utterance, state in zip(chosen, states):
                writer.add(utterance.id, state, _meta(utterance, len(audio[utterance.id]) / 16_000))
            bar.update(len(chosen))
        if writer is None:  # every utterance of the part was skipped
            writer = PartWriter(path, {}, storage_dtype, {**attributes, "skipped": json.dumps(skipped)})
        written = writer.close()
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    report.written += len(kept)
    report.skipped.extend(skipped)
    return written
