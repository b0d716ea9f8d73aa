"""How a study file's values are named and shown in its refusals: light (no pydantic), so that
``python -m experiments.study --help`` imports the study file's models only when a study is read."""

from __future__ import annotations

import re
import reprlib

from probing.grid import OPTION_KEYS

NONE = type(None)
TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false", list: "a list", dict: "a mapping", NONE: "null"}
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]*"  # model, corpus and manifest names: they become file names
PROBE_OPTIONS = tuple(key for key in OPTION_KEYS if key not in ("apply_to", "device", "language"))  # device: --device; a store holds one language
SHOWN_CHARACTERS = 200  # a value in an error line is cut here (a YAML alias can expand a short file into gigabytes)


def shown(value) -> str:
    """A value as an error line shows it: cut short, with its YAML type."""
    if value is None:
        return "nothing"
    shortened = reprlib.Repr()
    shortened.maxlist = shortened.maxdict = 6
    shortened.maxstring = shortened.maxother = SHOWN_CHARACTERS
    shortened.maxlevel = 3
    text = shortened.repr(value)
    return f"{text[:SHOWN_CHARACTERS]}{'...' if len(text) > SHOWN_CHARACTERS else ''} ({TYPE_NAMES.get(type(value), type(value).__name__)})"


def name_problem(value: str) -> str | None:
    return None if re.fullmatch(NAME_PATTERN, value) else f"{value!r}: a name is letters, digits, '.', '_' and '-' (it becomes a file name)"
