"""Placeholder manifests for a study file: a few valid rows in every manifest it names (and a header-only
MuST-SHE definition), so that ``study run STUDY --root DIR --dry-run`` shows a paper's plan before
its corpora are downloaded (``study run STUDY --placeholders DIR``).

The study file is read as YAML only, not checked (its manifests do not exist yet: that is the point);
``--dry-run`` checks it afterwards. A file already there is never overwritten: placeholders next to
real manifests would be mistaken for them.
"""

from __future__ import annotations

from pathlib import Path

from experiments.study.schema import StudyError
from extract.manifest import Utterance, write_manifest
from probing.grid import GridError, load_yaml

SPEAKERS_PER_GENDER = 3  # what the default split needs (probing.data): the plan checks each probe's split as the run would
LINES_PER_SPEAKER = 3  # what the stratified split needs: 20 % of three lines rounds to one test line per speaker
MUSTSHE_HEADER = "ID\tLANG\tTALK\tSRC\tREF\tWRONG-REF\tSPEAKER\tGENDER\tCATEGORY\tTEXT-CATEGORY\tGENDERTERMS\n"


def placeholder_files(study_file: Path) -> list[tuple[Path, str, str, str]]:
    """``(relative path, corpus, key, kind)`` of every input file the study names (``kind``: manifest or mustshe)."""
    try:
        document = load_yaml(study_file, "study file", "experiments/studies/")
    except GridError as error:
        raise StudyError(str(error)) from None
    corpora = document.get("corpora") if isinstance(document, dict) else None
    if not isinstance(corpora, list):
        raise StudyError(f"{study_file}: corpora: expected a list of corpora with their manifests")
    files = []
    for index, corpus in enumerate(corpora):
        if not isinstance(corpus, dict) or not isinstance(corpus.get("manifests"), dict) or not isinstance(corpus.get("name"), str):
            raise StudyError(f"{study_file}: corpora[{index}]: expected a name and manifests: {{KEY: path}}")
        for kind in ("manifests", "mustshe"):
            for key, path in (corpus.get(kind) or {}).items():
                files.append((Path(str(path)), corpus["name"], str(key), kind))
    return files


def write_placeholders(study_file: Path, root: Path) -> list[Path]:
    """Write, under ``root``, a manifest of :data:`SPEAKERS_PER_GENDER` speakers per gender
    (:data:`LINES_PER_SPEAKER` lines each, in the key's source language, of the corpus's dataset) for every manifest, and a header-only MuST-SHE definition for
    every definition; returns the files written. Refuses, before writing any, a file already there."""
    if root.exists() and not root.is_dir():
        raise StudyError(f"--placeholders {root} is a file; give a folder (new or empty) to write the placeholder manifests under")
    files = [(path if path.is_absolute() else root / path, corpus, key, kind) for path, corpus, key, kind in placeholder_files(study_file)]
    present = [path for path, *_ in files if path.exists()]
    if present:
        raise StudyError(
            f"{present[0]} exists ({len(present)} of the study's {len(files)} input files do): "
            "placeholders never overwrite a file; give --placeholders an empty folder"
        )
    for path, corpus, key, kind in files:
        if kind == "mustshe":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(MUSTSHE_HEADER, encoding="utf-8")
        else:
            language = key.split("-")[0]
            rows = [
                Utterance(
                    f"{corpus}-{key}-{gender[0]}{index}-{line}", "clip.wav", language, "text", gender, f"{gender[0]}{index}", dataset=corpus, translation="t"
                )
                for gender in ("female", "male")
                for index in range(SPEAKERS_PER_GENDER)
                for line in range(LINES_PER_SPEAKER)
            ]
            write_manifest(path, rows)
    return [path for path, *_ in files]
