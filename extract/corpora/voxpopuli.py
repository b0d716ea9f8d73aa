"""VoxPopuli: ``asr_{split}.tsv`` with audio as ``{year}/{id}.ogg``."""

from __future__ import annotations

from pathlib import Path

from extract.corpora.base import AdapterResult, Collector, Recipe, argument, read_tsv, split_from_name


def voxpopuli(tsv: str | Path, language: str, audio_dir: str | Path, split: str | None = None) -> AdapterResult:
    """VoxPopuli ``asr_{split}.tsv`` (``id, raw_text, normalized_text, speaker_id, split, gender``).

    Audio is looked up as ``{audio_dir}/{year}/{id}.ogg`` (the release layout), then ``{audio_dir}/{id}.ogg``
    and ``.wav``.
    """
    tsv, audio_dir = Path(tsv), Path(audio_dir)
    collector = Collector(tsv)
    for line, row in read_tsv(tsv, ("id", "raw_text", "speaker_id", "gender")):
        candidates = [audio_dir / row["id"][:4] / f"{row['id']}.ogg", audio_dir / f"{row['id']}.ogg", audio_dir / f"{row['id']}.wav"]
        audio = next((path for path in candidates if path.is_file()), candidates[0])
        collector.add(
            line,
            id=row["id"],
            audio=str(audio),
            language=language,
            text=row["raw_text"],
            gender=row["gender"],
            speaker=row["speaker_id"],
            split=row.get("split") or (split_from_name(tsv) if split is None else split),
            dataset="voxpopuli",
            extra={"normalized_text": row.get("normalized_text", "")},
        )
    return collector.result


RECIPES = (
    Recipe(
        "voxpopuli",
        "VoxPopuli asr_{split}.tsv",
        voxpopuli,
        (argument("tsv", reads=True), argument("--language", required=True), argument("--audio-dir", reads=True, required=True)),
    ),
)
