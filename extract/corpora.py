"""Adapters from native corpus formats to manifests.

Each adapter reads a corpus in the layout its distributors ship and returns an
:class:`AdapterResult`: the utterances, and the rows whose audio file is missing (reported and
counted, never dropped silently). A malformed row raises :class:`ManifestError` naming the file
and line.
"""

from __future__ import annotations

import csv
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from extract.manifest import ManifestError, Utterance, gender_label, iter_json_objects, iter_text_lines

csv.field_size_limit(sys.maxsize)


@dataclass
class MissingAudio:
    source: str
    line: int
    id: str
    audio: str


@dataclass
class AdapterResult:
    utterances: list[Utterance] = field(default_factory=list)
    missing_audio: list[MissingAudio] = field(default_factory=list)
    unknown_genders: Counter = field(default_factory=Counter)  # unrecognised raw value -> utterances kept as "unknown"

    def summary(self) -> str:
        text = f"{len(self.utterances)} utterances"
        if self.missing_audio:
            first = self.missing_audio[0]
            text += (
                f"; {len(self.missing_audio)} rows skipped because their audio is missing "
                f"(first: {first.source}:{first.line} {first.audio})"
            )
        if self.unknown_genders:
            values = ", ".join(f"{value!r} ({count})" for value, count in self.unknown_genders.most_common())
            text += f"; {sum(self.unknown_genders.values())} utterances with an unrecognised gender value, kept as unknown: {values}"
        return text


_NEEDED = ("id", "audio", "language", "speaker")


class _Collector:
    """Builds utterances row by row, turning bad values into ManifestError with the file and line.

    A duplicate id is an error naming both lines. A gender value missing from the alias table
    becomes ``unknown`` and is counted per raw value in the result.
    """

    def __init__(self, source: Path):
        self.source = source
        self.result = AdapterResult()
        self.first_line: dict[str, int] = {}

    def add(self, line: int, check_audio: bool = True, **fields) -> None:
        absent = [key for key in _NEEDED if fields.get(key) in (None, "")]
        if absent:
            raise ManifestError(self.source, line, f"no value for {', '.join(absent)}")
        raw_gender = fields.get("gender")
        unrecognised_gender = "gender" in fields and gender_label(raw_gender) is None
        try:
            utterance = Utterance(**({**fields, "gender": "unknown"} if unrecognised_gender else fields))
        except (ValueError, TypeError) as error:
            raise ManifestError(self.source, line, str(error)) from error
        if unrecognised_gender:
            utterance.extra["gender_value"] = str(raw_gender)
        if utterance.id in self.first_line:
            raise ManifestError(self.source, line, f"duplicate id {utterance.id!r}, first on {self.source}:{self.first_line[utterance.id]}")
        self.first_line[utterance.id] = line
        if check_audio and not Path(utterance.audio).is_file():
            self.result.missing_audio.append(MissingAudio(str(self.source), line, utterance.id, utterance.audio))
            return
        if unrecognised_gender:
            self.result.unknown_genders[utterance.extra["gender_value"]] += 1
        self.result.utterances.append(utterance)


def _read_tsv(path: Path, required: Iterable[str], header: bool = True) -> Iterable[tuple[int, dict]]:
    lines = iter_text_lines(path)
    if not header:
        for number, line in lines:
            if line.strip():
                yield number, line.rstrip("\r\n").split("\t")
        return
    reader = csv.DictReader((line for _, line in lines), delimiter="\t", quoting=csv.QUOTE_NONE)
    columns = reader.fieldnames or []
    absent = [name for name in required if name not in columns]
    if absent:
        raise ManifestError(path, 1, f"missing column(s) {', '.join(absent)}; header has {columns}")
    for row in reader:
        if None in row or any(value is None for value in row.values()):
            raise ManifestError(path, reader.line_num, f"expected {len(columns)} tab-separated fields")
        yield reader.line_num, row


def _read_text(path: Path) -> str:
    return "".join(line for _, line in iter_text_lines(path))


def _split_from_name(path: Path) -> str:
    stem = path.stem.lower()
    for split, names in (("train", ("train",)), ("dev", ("dev", "validation", "valid")), ("test", ("test",))):
        if any(name in stem for name in names):
            return split
    return ""


def common_voice(tsv: str | Path, language: str, clips_dir: str | Path | None = None, split: str | None = None) -> AdapterResult:
    """Common Voice ``{train,dev,test,validated}.tsv`` with ``client_id, path, sentence, gender``; clips in ``clips/``."""
    tsv = Path(tsv)
    clips = Path(clips_dir) if clips_dir else tsv.parent / "clips"
    split = _split_from_name(tsv) if split is None else split
    collector = _Collector(tsv)
    for line, row in _read_tsv(tsv, ("client_id", "path", "sentence", "gender")):
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


_FLEURS_COLUMNS = ("id", "file_name", "raw_transcription", "transcription", "phonemes", "num_samples", "gender")


def fleurs(tsv: str | Path, language: str, audio_dir: str | Path | None = None, split: str | None = None) -> AdapterResult:
    """Fleurs ``{train,dev,test}.tsv`` (no header: id, file, raw text, text, chars, samples, gender).

    Fleurs publishes no speaker ids; each record gets its own speaker id, marked in ``extra`` so
    that speaker-level statistics know they are per-recording.
    """
    tsv = Path(tsv)
    split = _split_from_name(tsv) if split is None else split
    audio_root = Path(audio_dir) if audio_dir else tsv.parent / "audio" / (split or tsv.stem)
    collector = _Collector(tsv)
    for line, fields in _read_tsv(tsv, (), header=False):
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


def voxpopuli(tsv: str | Path, language: str, audio_dir: str | Path, split: str | None = None) -> AdapterResult:
    """VoxPopuli ``asr_{split}.tsv`` (``id, raw_text, normalized_text, speaker_id, split, gender``).

    Audio is looked up as ``{audio_dir}/{year}/{id}.ogg`` (the release layout), then ``{audio_dir}/{id}.ogg``
    and ``.wav``.
    """
    tsv, audio_dir = Path(tsv), Path(audio_dir)
    collector = _Collector(tsv)
    for line, row in _read_tsv(tsv, ("id", "raw_text", "speaker_id", "gender")):
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
            split=row.get("split") or (_split_from_name(tsv) if split is None else split),
            dataset="voxpopuli",
            extra={"normalized_text": row.get("normalized_text", "")},
        )
    return collector.result


def read_must_speakers(tsv: str | Path) -> dict[str, str]:
    """A MuST-Speaker-style TSV (``TALK-ID``, ``TED-PRONOUN``) as talk id -> pronoun as written
    (mapped to a gender, and counted when unrecognised, per segment by the adapter). A talk listed
    twice is an error naming both lines."""
    tsv = Path(tsv)
    talks, first_line = {}, {}
    for line, row in _read_tsv(tsv, ("TALK-ID", "TED-PRONOUN")):
        talk = row["TALK-ID"].strip()
        if talk in first_line:
            raise ManifestError(tsv, line, f"duplicate TALK-ID {talk!r}, first on {tsv}:{first_line[talk]}")
        first_line[talk] = line
        talks[talk] = row["TED-PRONOUN"].strip()
    return talks


def _parse_segment_yaml(path: Path) -> list[dict]:
    import yaml

    try:
        segments = yaml.load(_read_text(path), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        raise ManifestError(path, mark.line + 1 if mark else None, f"invalid YAML: {error}") from error
    if not isinstance(segments, list):
        raise ManifestError(path, None, "expected a YAML list of segments")
    return segments


def _read_lines(path: Path, expected: int) -> list[str]:
    lines = _read_text(path).splitlines()
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
    """MuST-C ``data/{split}/txt/{split}.yaml`` segments over ``data/{split}/wav/*.wav`` talks.

    Transcripts and translations come from ``{split}.{src}`` and ``{split}.{tgt}``, line-aligned with
    the segments; speaker gender from the talk's pronoun in a MuST-Speaker-style TSV (a talk that
    is not listed gets ``unknown``).
    """
    split_dir = Path(split_dir)
    yaml_path = split_dir / "txt" / f"{split_name}.yaml"
    segments = _parse_segment_yaml(yaml_path)
    sources = _read_lines(split_dir / "txt" / f"{split_name}.{source_language}", len(segments))
    targets = _read_lines(split_dir / "txt" / f"{split_name}.{target_language}", len(segments))
    talk_pronoun = read_must_speakers(speakers_tsv)
    collector = _Collector(yaml_path)
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
            split=_split_from_name(Path(split_name)) if split is None else split,
            dataset="must_c",
            extra={"talk": talk, "target_language": target_language, "segment": index},
        )
    return collector.result


_MUSTSHE_COLUMNS = ("ID", "LANG", "TALK", "SRC", "REF", "SPEAKER", "GENDER", "CATEGORY", "GENDERTERMS")


def must_she(tsv: str | Path, wav_dir: str | Path | None = None, split: str = "test") -> AdapterResult:
    """MuST-SHE's TSV (``ID, LANG, TALK, SRC, REF, WRONG-REF, SPEAKER, GENDER, CATEGORY, ..., GENDERTERMS``) + ``wav/{ID}.wav``."""
    tsv = Path(tsv)
    wavs = Path(wav_dir) if wav_dir else tsv.parent / "wav"
    collector = _Collector(tsv)
    for line, row in _read_tsv(tsv, _MUSTSHE_COLUMNS):
        pair = row["LANG"].strip()
        collector.add(
            line,
            id=row["ID"],
            audio=str(wavs / f"{row['ID']}.wav"),
            language=pair.split("-")[0] or "en",
            text=row["SRC"],
            translation=row["REF"],
            gender=row["GENDER"],
            speaker=row["SPEAKER"] or f"talk-{row['TALK']}",
            split=split,
            dataset="must_she",
            extra={
                "pair": pair,
                "talk": row["TALK"],
                "category": row["CATEGORY"],
                "genderterms": row["GENDERTERMS"],
                "wrong_reference": row.get("WRONG-REF", ""),
                "text_category": row.get("TEXT-CATEGORY", ""),
            },
        )
    return collector.result


def generic_tsv(tsv: str | Path, columns: Mapping[str, str] | None = None, **defaults) -> AdapterResult:
    """A TSV with a header; ``columns`` maps manifest keys to column names (identity by default).

    Relative audio paths are taken relative to the TSV's folder; ``defaults`` fill keys the TSV lacks
    (e.g. ``language="en", dataset="mine"``). Unmapped columns go to ``extra``.
    """
    tsv = Path(tsv)
    columns = dict(columns or {})
    mapping = {key: columns.get(key, key) for key in ("id", "audio", "language", "text", "gender", "speaker", "split", "dataset", "offset", "duration", "translation")}
    required = [mapping[key] for key in ("id", "audio", "text", "gender", "speaker") if key not in defaults]
    collector = _Collector(tsv)
    for line, row in _read_tsv(tsv, required):
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
    collector = _Collector(path)
    for line, row in iter_json_objects(path):
        fields = dict(defaults)
        used = set()
        for key in ("id", "audio", "language", "text", "gender", "speaker", "split", "dataset", "offset", "duration", "translation"):
            name = columns.get(key, key)
            if name in row:
                fields[key] = row[name]
                used.add(name)
        if "audio" in fields and not Path(str(fields["audio"])).is_absolute():
            fields["audio"] = str(path.parent / str(fields["audio"]))
        fields["extra"] = {**row.get("extra", {}), **{k: v for k, v in row.items() if k not in used and k != "extra"}}
        collector.add(line, **fields)
    return collector.result


def hf_dataset(
    dataset: Iterable[Mapping],
    audio_dir: str | Path,
    dataset_name: str,
    columns: Mapping[str, str] | None = None,
    write_audio: Callable[[Path, np.ndarray, int], None] | None = None,
    **defaults,
) -> AdapterResult:
    """A Hugging Face ``datasets`` object (or any iterable of row dicts).

    The audio column may hold ``{"path", "array", "sampling_rate"}``: a row whose array is present
    is written to ``audio_dir/{id}.wav`` (16-bit PCM) so that the manifest points at a file;
    otherwise its ``path`` is used as is. A gender column stored as a ``ClassLabel`` (Fleurs keeps
    0/1/2) is decoded with the dataset's own label names, never guessed from the integers.
    """
    import soundfile

    audio_dir = Path(audio_dir)
    columns = {"id": "id", "audio": "audio", "text": "sentence", "gender": "gender", "speaker": "client_id", **(columns or {})}
    gender_names = _class_label_names(dataset, columns["gender"])
    collector = _Collector(Path(f"<{dataset_name}>"))
    write = write_audio or (lambda path, array, rate: soundfile.write(path, array, rate, subtype="PCM_16"))
    for index, row in enumerate(dataset):
        line = index + 1
        fields = dict(defaults)
        for key, name in columns.items():
            if name in row:
                fields[key] = row[name]
        audio = fields.get("audio")
        if "id" not in fields:
            fields["id"] = f"{dataset_name}-{index}"
        if isinstance(audio, Mapping):
            if audio.get("array") is not None:
                audio_dir.mkdir(parents=True, exist_ok=True)
                target = audio_dir / f"{fields['id']}.wav"
                if not target.exists():
                    write(target, np.asarray(audio["array"], dtype=np.float32), int(audio["sampling_rate"]))
                fields["audio"] = str(target)
            else:
                fields["audio"] = str(audio.get("path") or "")
        if gender_names is not None and isinstance(fields.get("gender"), int):
            fields["gender"] = gender_names[fields["gender"]] if 0 <= fields["gender"] < len(gender_names) else str(fields["gender"])
        fields["dataset"] = dataset_name
        fields["extra"] = {name: row[name] for name in row if name not in columns.values() and _is_json_scalar(row[name])}
        collector.add(line, **fields)
    return collector.result


def _class_label_names(dataset, column: str) -> list[str] | None:
    """The label names of a ``datasets.ClassLabel`` column, or None for a plain column."""
    feature = (getattr(dataset, "features", None) or {}).get(column)
    names = getattr(feature, "names", None)
    return list(names) if names else None


def _is_json_scalar(value) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


ADAPTERS = {
    "common_voice": common_voice,
    "fleurs": fleurs,
    "voxpopuli": voxpopuli,
    "must_c": must_c,
    "must_she": must_she,
    "tsv": generic_tsv,
    "jsonl": generic_jsonl,
}
