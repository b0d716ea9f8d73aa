"""A tiny mTEDx corpus in its native layout (``{src}-{tgt}/data/{split}/txt/{split}.yaml``,
``{split}.{lang}``, ``wav/*.flac``) with a speaker gender annotation, for the ``mtedx`` recipe and
the Boito et al. study's tests. Two talks per split folder: one female speaker, one male."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import write_tone

SEGMENTS = (  # (talk and speaker id, offset, duration, French transcript, English translation)
    ("talkF", 0.0, 0.4, "bonjour à tous", "hello everyone"),
    ("talkF", 0.5, 0.3, "merci", "thank you"),
    ("talkM", 0.0, 0.5, "je suis ravi", "i am delighted"),
)
GENDERS = {"talkF": "F", "talkM": "M"}  # as annotated (the paper's M / F / B letters)


def write_mtedx(
    root: Path, direction: str = "fr-fr", split: str = "test", audio: bool = True, gender_in_yaml: bool = False, segments=SEGMENTS
) -> dict[str, Path]:
    """The split folder of ``direction`` under ``root`` (its talks' FLAC files too, with ``audio``) and
    the annotation TSV; with ``gender_in_yaml`` the segments carry the gender instead; ``segments``: a
    part of :data:`SEGMENTS`. Returns the paths."""
    source, target = direction.split("-")
    folder = root / direction / "data" / split
    (folder / "txt").mkdir(parents=True, exist_ok=True)
    lines = []
    for talk, offset, duration, _, _ in segments:
        gender = f", gender: {GENDERS[talk]}" if gender_in_yaml else ""
        lines.append(f"- {{duration: {duration}, offset: {offset}, rW: 3, uW: 0, speaker_id: {talk}, wav: {talk}.flac{gender}}}\n")
    (folder / "txt" / f"{split}.yaml").write_text("".join(lines))
    (folder / "txt" / f"{split}.{source}").write_text("".join(f"{segment[3]}\n" for segment in segments))
    if target != source:
        (folder / "txt" / f"{split}.{target}").write_text("".join(f"{segment[4]}\n" for segment in segments))
    if audio:
        for talk in GENDERS:
            write_tone(folder / "wav" / f"{talk}.flac", seconds=1.0)
    speakers = root / "mtedx-fr-genders.tsv"
    speakers.write_text("SPEAKER-ID\tGENDER\n" + "".join(f"{talk}\t{gender}\n" for talk, gender in GENDERS.items()))
    return {"split_dir": folder, "speakers": speakers, "wavs": [folder / "wav" / f"{talk}.flac" for talk in GENDERS]}
