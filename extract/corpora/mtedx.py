"""Multilingual TEDx (mTEDx, OpenSLR 100): ``{src}-{tgt}/data/{split}/txt/{split}.yaml`` segments
over ``data/{split}/wav/*.flac`` talks, transcripts in ``{split}.{src}``, translations (for
``src != tgt``) in ``{split}.{tgt}``; speaker gender from an annotation keyed by the segments'
``speaker_id``.

Boito et al. 2022 annotated the speakers of the French subsets (fr-fr and the fr-* translation
directions) by gender; the annotation is part of mTEDx's later release. Its file layout could not
be checked offline, so the recipe reads it in either of two forms: a ``gender`` (or
``speaker_gender``) field in the segment YAML, or a TSV given with ``--speakers`` (columns
``SPEAKER-ID`` and ``GENDER``; it wins over the YAML field). The paper's "B" (speakers of both
genders in one talk) and any value outside ``extract.manifest.GENDER_ALIASES`` become ``unknown``,
counted per raw value in the summary; a segment whose speaker has no annotation is ``unknown`` too.
"""

from __future__ import annotations

from pathlib import Path

from extract.corpora.base import AdapterResult, Collector, Recipe, argument, read_tsv_mapping, split_from_name
from extract.corpora.must_c import _parse_segment_yaml, _read_lines
from extract.manifest import ManifestError

GENDER_FIELDS = ("gender", "speaker_gender")  # where a segment of the YAML may carry its speaker's gender


def read_mtedx_speakers(tsv: str | Path) -> dict[str, str]:
    """A ``SPEAKER-ID`` / ``GENDER`` TSV as speaker id -> gender as written; a speaker listed twice is an error naming both lines."""
    return read_tsv_mapping(Path(tsv), "SPEAKER-ID", "GENDER")


def mtedx(
    split_dir: str | Path,
    split_name: str,
    source_language: str,
    target_language: str | None = None,
    speakers_tsv: str | Path | None = None,
    split: str | None = None,
) -> AdapterResult:
    """mTEDx segments of one split folder (``.../fr-fr/data/test``) as utterances of ``source_language``,
    with translations into ``target_language`` where it is given and differs from the source."""
    split_dir = Path(split_dir)
    yaml_path = split_dir / "txt" / f"{split_name}.yaml"
    segments = _parse_segment_yaml(yaml_path)
    transcripts = _read_lines(split_dir / "txt" / f"{split_name}.{source_language}", len(segments))
    translating = target_language is not None and target_language != source_language
    translations = _read_lines(split_dir / "txt" / f"{split_name}.{target_language}", len(segments)) if translating else None
    annotated = read_mtedx_speakers(speakers_tsv) if speakers_tsv is not None else {}
    collector = Collector(yaml_path)
    counters: dict[str, int] = {}
    for index, segment in enumerate(segments):
        line = index + 1
        if not isinstance(segment, dict) or not {"wav", "offset", "duration", "speaker_id"} <= set(segment):
            raise ManifestError(yaml_path, line, f"segment {index} lacks wav/offset/duration/speaker_id: {segment!r}")
        speaker, talk = str(segment["speaker_id"]), Path(str(segment["wav"])).stem
        counters[talk] = counters.get(talk, -1) + 1
        in_yaml = next((segment[key] for key in GENDER_FIELDS if segment.get(key) not in (None, "")), "unknown")
        collector.add(
            line,
            id=f"{talk}_{counters[talk]}",
            audio=str(split_dir / "wav" / str(segment["wav"])),
            offset=segment["offset"],
            duration=segment["duration"],
            language=source_language,
            text=transcripts[index],
            translation=translations[index] if translations else None,
            gender=annotated.get(speaker, in_yaml),
            speaker=speaker,
            split=split_from_name(Path(split_name)) if split is None else split,
            dataset="mtedx",
            extra={"talk": talk, "segment": index, **({"target_language": target_language} if translating else {})},
        )
    return collector.result


RECIPES = (
    Recipe(
        "mtedx",
        "mTEDx split folder (txt/{split}.yaml, txt/{split}.{lang}, wav/*.flac) with a speaker gender annotation",
        mtedx,
        (
            argument("split_dir", reads=True),
            argument("--split-name", required=True),
            argument("--language", keyword="source_language", required=True, help="the talks' language (txt/{split}.{language}: the transcripts)"),
            argument("--tgt-lang", keyword="target_language", help="translations from txt/{split}.{tgt} (a fr-en, fr-es or fr-pt folder)"),
            argument("--speakers", keyword="speakers_tsv", reads=True, help="TSV of SPEAKER-ID and GENDER (default: the YAML's gender field)"),
        ),
    ),
)
