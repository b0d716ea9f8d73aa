"""Generic TSV and JSONL files whose keys are (or map to) the manifest keys."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from extract.corpora.base import AdapterResult, Collector, Recipe, argument, read_tsv
from extract.manifest import iter_json_objects

KEYS = ("id", "audio", "language", "text", "gender", "speaker", "split", "dataset", "offset", "duration", "translation")  # the manifest keys a file may give


def generic_tsv(tsv: str | Path, columns: Mapping[str, str] | None = None, **defaults) -> AdapterResult:
    """A TSV with a header; ``columns`` maps manifest keys to column names (identity by default).

    Relative audio paths are taken relative to the TSV's folder; ``defaults`` fill keys the TSV lacks
    (e.g. ``language="en", dataset="mine"``). Unmapped columns go to ``extra``.
    """
    tsv = Path(tsv)
    columns = dict(columns or {})
    mapping = {key: columns.get(key, key) for key in KEYS}
    required = [mapping[key] for key in ("id", "audio", "text", "gender", "speaker") if key not in defaults]
    collector = Collector(tsv)
    for line, row in read_tsv(tsv, required):
        fields = dict(defaults)
        for key, column in mapping.items():
            if column in row and row[column] != "":
                fields[key] = row[column]
        if not Path(fields.get("audio", "")).is_absolute():
            fields["audio"] = str(tsv.parent / fields.get("audio", ""))
        fields["extra"] = {name: value for name, value in row.items() if name not in mapping.values()}
        collector.add(line, **fields)
    return collector.result


def generic_jsonl(path: str | Path, columns: Mapping[str, str] | None = None, **defaults) -> AdapterResult:
    """JSON lines with arbitrary key names; ``columns`` maps manifest keys to them. Unmapped keys go to ``extra``."""
    path = Path(path)
    columns = dict(columns or {})
    collector = Collector(path)
    for line, row in iter_json_objects(path):
        fields = dict(defaults)
        used = set()
        for key in KEYS:
            name = columns.get(key, key)
            if name in row:
                fields[key] = row[name]
                used.add(name)
        if "audio" in fields and not Path(str(fields["audio"])).is_absolute():
            fields["audio"] = str(path.parent / str(fields["audio"]))
        fields["extra"] = {**row.get("extra", {}), **{k: v for k, v in row.items() if k not in used and k != "extra"}}
        collector.add(line, **fields)
    return collector.result


RECIPES = (
    Recipe(
        "tsv",
        "generic TSV whose header uses the manifest keys",
        generic_tsv,
        (argument("tsv", reads=True), argument("--language"), argument("--dataset", default="")),
    ),
    Recipe(
        "jsonl",
        "generic JSONL whose keys are the manifest keys",
        generic_jsonl,
        (argument("jsonl", keyword="path", reads=True), argument("--language"), argument("--dataset", default="")),
    ),
)
