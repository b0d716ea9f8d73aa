"""Loading the spaCy pipeline a command names with ``--spacy-model``: the one home of what may be
refused before anything is read with it (``experiments.winomt``'s gender reader and
``experiments.lexical``'s features both load through :func:`load_pipeline`).

- a name that is neither an installed pipeline nor a path: not installed, with the download command;
- a path that is no pipeline (a file, or a folder without the ``meta.json`` and ``config.cfg`` that
  ``nlp.to_disk`` writes): said as such, not as "not installed";
- a pipeline of another language than the text it will read (:func:`check_language`): French tags on
  Spanish translations or English transcripts give numbers that look like results and mean nothing.

:func:`pipeline_problem` says the first two without loading anything (a study's ``--dry-run``).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from extract.errors import UserError

PIPELINE_FILES = ("meta.json", "config.cfg")  # what spaCy reads from a pipeline folder
ANY_LANGUAGE = "xx"  # spaCy's multi-language pipelines (xx_ent_wiki_sm, xx_sent_ud_sm)


class SpacyPipelineError(UserError, ValueError):
    """A pipeline that cannot be loaded, or one for another language."""


def _not_loadable(name: str, error: OSError) -> str:
    path = Path(name)
    if path.is_file():
        return f"--spacy-model {name} is a file, not a spaCy pipeline; give an installed pipeline's name or a folder written by nlp.to_disk"
    if path.is_dir():
        missing = [file for file in PIPELINE_FILES if not (path / file).is_file()]
        if missing:
            return (
                f"--spacy-model {name} is a folder but not a spaCy pipeline (no {', '.join(missing)} in it); "
                "give an installed pipeline's name or a folder written by nlp.to_disk"
            )
        return f"cannot load the spaCy pipeline folder {name} ({str(error).splitlines()[0]})"
    return f"spaCy pipeline {name!r} is not installed; install it with `python -m spacy download {name}`"


def pipeline_problem(name: str) -> str | None:
    """Why ``spacy.load(name)`` would fail for want of spaCy or of the pipeline, found without importing
    spaCy or loading the pipeline (an installed pipeline is an importable package of that name, a
    saved one a folder with :data:`PIPELINE_FILES`); None when it looks loadable."""
    if importlib.util.find_spec("spacy") is None:
        return "spaCy is not installed; `pip install spacy` and the pipeline of your language"
    path = Path(name)
    if path.exists():
        missing = [file for file in PIPELINE_FILES if not (path / file).is_file()]
        return _not_loadable(name, OSError("")) if missing else None
    try:
        found = importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a name that is no module name
        found = False
    return None if found else _not_loadable(name, OSError(""))


def primary_language(code: str) -> str:
    """The primary subtag of a language code, lower-cased: ``fr-FR``, ``fr_fr`` and ``fr`` are ``fr``."""
    return re.split(r"[-_]", code.strip(), maxsplit=1)[0].lower()


def check_language(nlp, name: str, language: str, what: str) -> None:
    """Refuses a pipeline whose language (``nlp.lang``) is not ``language`` (``what`` names where
    that language comes from, e.g. ``--tgt-lang``); a multi-language pipeline serves any."""
    if nlp.lang != ANY_LANGUAGE and primary_language(nlp.lang) != primary_language(language):
        raise SpacyPipelineError(f"spaCy pipeline {name!r} is for language {nlp.lang!r}, not {what} {language}; give a pipeline of {language}")


def load_pipeline(name: str, language: str, what: str, exclude: tuple[str, ...] = ()):
    """``spacy.load(name, exclude=exclude)`` for text in ``language`` (see the module docstring)."""
    try:
        import spacy
    except ModuleNotFoundError:
        raise SpacyPipelineError("spaCy is not installed; `pip install spacy` and the pipeline of your language") from None
    try:
        nlp = spacy.load(name, exclude=list(exclude))
    except OSError as error:
        raise SpacyPipelineError(_not_loadable(name, error)) from None
    check_language(nlp, name, language, what)
    return nlp
