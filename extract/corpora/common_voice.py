"""Common Voice: ``{train,dev,test,validated}.tsv`` with ``client_id, path, sentence, gender``; clips in ``clips/``."""

from __future__ import annotations

from pathlib import Path

from extract.corpora.base import AdapterResult, Collector, Recipe, argument, read_tsv, split_from_name


def common_voice(tsv: str | Path, language: str, clips_dir: str | Path | None = None, split: str | None = None) -> AdapterResult:
    tsv = Path(tsv)
    clips = Path(clips_dir) if clips_dir else tsv.parent / "clips"
    split = split_from_name(tsv) if split is None else split
    collector = Collector(tsv)
    for line, row in read_tsv(tsv, ("client_id", "path", "sentence", "gender")):
        extra = {key: row[key] for key in ("age", "accents", "accent", "variant") if row.get(key)}
        collector.add(
            line,
            id=Path(row["path"]).stem,
            audio=str(clips / row["path"]),
            language=row.get("locale") or language,
            text=row["sentence"],
            gender=row["gender"],
            speaker=row["client_id"],
            split=split,
            dataset="common_voice",
            extra=extra,
        )
    return collector.result


RECIPES = (
    Recipe(
        "common_voice",
        "Common Voice TSV (client_id, path, sentence, gender)",
        common_voice,
        (argument("tsv", reads=True), argument("--language", required=True), argument("--clips-dir", reads=True)),
    ),
)
