"""MuST-C: ``data/{split}/txt/{split}.yaml`` segments over ``data/{split}/wav/*.wav`` talks, speaker
gender from a MuST-Speaker-style TSV."""

from __future__ import annotations

from pathlib import Path

from extract.corpora.base import AdapterResult, Collector, Recipe, argument, read_text, read_tsv_mapping, split_from_name
from extract.manifest import ManifestError


def read_must_speakers(tsv: str | Path) -> dict[str, str]:
    """A MuST-Speaker-style TSV (``TALK-ID``, ``TED-PRONOUN``) as talk id -> pronoun as written
    (mapped to a gender, and counted when unrecognised, per segment by the adapter). A talk listed
    twice is an error naming both lines."""
    return read_tsv_mapping(Path(tsv), "TALK-ID", "TED-PRONOUN")


def _parse_segment_yaml(path: Path) -> list[dict]:
    import yaml

    try:
        segments = yaml.load(read_text(path), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        raise ManifestError(path, mark.line + 1 if mark else None, f"invalid YAML: {error}") from error
    if not isinstance(segments, list):
        raise ManifestError(path, None, "expected a YAML list of segments")
    return segments


def _read_lines(path: Path, expected: int) -> list[str]:
    lines = read_text(path).splitlines()
    if len(lines) != expected:
        raise ManifestError(path, None, f"has {len(lines)} lines but the segment list has {expected} segments")
    return lines


def must_c(
    split_dir: str | Path,
    split_name: str,
    target_language: str,
    speakers_tsv: str | Path,
    source_language: str = "en",
    split: str | None = None,
) -> AdapterResult:
    """Transcripts and translations come from ``{split}.{src}`` and ``{split}.{tgt}``, line-aligned with
    the segments; speaker gender from the talk's pronoun in a MuST-Speaker-style TSV (a talk that
    is not listed gets ``unknown``).
    """
    split_dir = Path(split_dir)
    yaml_path = split_dir / "txt" / f"{split_name}.yaml"
    segments = _parse_segment_yaml(yaml_path)
    sources = _read_lines(split_dir / "txt" / f"{split_name}.{source_language}", len(segments))
    targets = _read_lines(split_dir / "txt" / f"{split_name}.{target_language}", len(segments))
    talk_pronoun = read_must_speakers(speakers_tsv)
    collector = Collector(yaml_path)
    counters: dict[str, int] = {}
    for index, segment in enumerate(segments):
        line = index + 1
        if not isinstance(segment, dict) or not {"wav", "offset", "duration"} <= set(segment):
            raise ManifestError(yaml_path, line, f"segment {index} lacks wav/offset/duration: {segment!r}")
        wav = str(segment["wav"])
        talk = Path(wav).stem.removeprefix("ted_")
        counters[talk] = counters.get(talk, -1) + 1
        collector.add(
            line,
            id=f"ted_{talk}_{counters[talk]}",
            audio=str(split_dir / "wav" / wav),
            offset=segment["offset"],
            duration=segment["duration"],
            language=source_language,
            text=sources[index],
            translation=targets[index],
            gender=talk_pronoun.get(talk, "unknown"),
            speaker=str(segment.get("speaker_id") or f"spk.{talk}"),
            split=split_from_name(Path(split_name)) if split is None else split,
            dataset="must_c",
            extra={"talk": talk, "target_language": target_language, "segment": index},
        )
    return collector.result


RECIPES = (
    Recipe(
        "must_c",
        "MuST-C split folder (txt/{split}.yaml, wav/)",
        must_c,
        (
            argument("split_dir", reads=True),
            argument("--split-name", required=True),
            argument(
                "--tgt-lang",
                keyword="target_language",
                old_spellings=("--target-language",),
                required=True,
                help="target language of the translations (txt/{split}.{tgt})",
            ),
            argument("--speakers", keyword="speakers_tsv", reads=True, required=True, help="MuST-Speaker-style TSV"),
        ),
    ),
)
