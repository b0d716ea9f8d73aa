"""Fleurs: ``{train,dev,test}.tsv`` without a header, audio in ``audio/{split}/``."""

from __future__ import annotations

from pathlib import Path

from extract.corpora.base import AdapterResult, Collector, Recipe, argument, read_tsv, split_from_name
from extract.manifest import ManifestError

_FLEURS_COLUMNS = ("id", "file_name", "raw_transcription", "transcription", "phonemes", "num_samples", "gender")


def fleurs(tsv: str | Path, language: str, audio_dir: str | Path | None = None, split: str | None = None) -> AdapterResult:
    """Fleurs ``{train,dev,test}.tsv`` (no header: id, file, raw text, text, chars, samples, gender).

    Fleurs publishes no speaker ids; each record gets its own speaker id, marked in ``extra`` so
    that speaker-level statistics know they are per-recording.
    """
    tsv = Path(tsv)
    split = split_from_name(tsv) if split is None else split
    audio_root = Path(audio_dir) if audio_dir else tsv.parent / "audio" / (split or tsv.stem)
    collector = Collector(tsv)
    for line, fields in read_tsv(tsv, (), header=False):
        if len(fields) != len(_FLEURS_COLUMNS):
            raise ManifestError(tsv, line, f"expected {len(_FLEURS_COLUMNS)} tab-separated fields, got {len(fields)}")
        row = dict(zip(_FLEURS_COLUMNS, fields))
        try:
            samples = int(row["num_samples"])
        except ValueError as error:
            raise ManifestError(tsv, line, f"num_samples is not an integer: {row['num_samples']!r}") from error
        collector.add(
            line,
            id=Path(row["file_name"]).stem,
            audio=str(audio_root / row["file_name"]),
            language=language,
            text=row["raw_transcription"],
            gender=row["gender"],
            speaker=f"fleurs-recording-{Path(row['file_name']).stem}",
            split=split,
            dataset="fleurs",
            extra={"sentence_id": row["id"], "num_samples": samples, "speaker_ids_known": False},
        )
    return collector.result


RECIPES = (Recipe("fleurs", "Fleurs TSV", fleurs, (argument("tsv", reads=True), argument("--language", required=True), argument("--audio-dir", reads=True))),)
