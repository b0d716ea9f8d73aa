"""Transcripts of the real voices: asterisk's ``key: text`` lists, Tux Paint's per-language description
lines and Fish Fillets NG's level dialogs.

Annotations are not speech: ``[ascending tones]``, ``(beep)``, ``at [@]``, ``(voce alternativa ...)``.
Square- and round-bracketed parts are removed; a line that was only annotation has no transcript (a
tone or a silence), and a line that lost an annotation is at best ``approximate`` (the annotation
may or may not have been read).
"""

from __future__ import annotations

import gzip
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from experiments.recipes.realvoices.sources import TEXT_QUALITIES

_ANNOTATION = re.compile(r"\[[^\]]*\]|\([^)]*\)")
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class Transcript:
    text: str
    quality: str  # one of TEXT_QUALITIES


def without_annotations(text: str) -> tuple[str, bool]:
    """``text`` single-spaced, without its bracketed annotations (and the space each left before a
    punctuation mark); whether it held any."""
    if not _ANNOTATION.search(text):
        return _SPACES.sub(" ", text).strip(), False
    cleaned = _SPACES.sub(" ", _ANNOTATION.sub(" ", text)).strip()
    return re.sub(r" ([,.;:!?])", r"\1", cleaned), True


def transcript(text: str, quality: str) -> Transcript | None:
    """The transcript of a clip from its source line, or None when nothing spoken is left."""
    if quality not in TEXT_QUALITIES:
        raise ValueError(f"unknown text quality {quality!r}; expected one of {TEXT_QUALITIES}")
    cleaned, changed = without_annotations(text)
    if not re.search(r"\w", cleaned):
        return None
    return Transcript(cleaned, "approximate" if changed and quality == "exact" else quality)


def parse_asterisk_lines(lines: Iterable[str]) -> dict[str, str]:
    """``key: text`` lines of asterisk's ``core-sounds-LANG.txt``: comments (``;``), blank lines and
    keys without text are skipped, and a key listed twice is dropped (``digits/0`` is listed twice in
    the Spanish file, once with the text of ``digits/10``: neither text can be trusted)."""
    pairs = []
    for line in lines:
        line = line.removeprefix("\ufeff").strip()
        if not line or line.startswith(";") or ":" not in line:
            continue
        key, text = (part.strip() for part in line.split(":", 1))
        if key and text:
            pairs.append((key, text))
    counts = Counter(key for key, _ in pairs)
    return {key: text for key, text in pairs if counts[key] == 1}


def read_asterisk_transcripts(path: Path) -> dict[str, str]:
    """:func:`parse_asterisk_lines` of a (gzipped) transcript file."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return parse_asterisk_lines(handle)


def tuxpaint_line(description: str, language: str) -> str | None:
    """The ``LANG.utf8=`` line of a Tux Paint stamp description (its first line is the English text), or None."""
    prefix = f"{language}.utf8="
    for line in description.splitlines():
        if line.startswith(prefix):
            return line.removeprefix(prefix).strip() or None
    return None


_DIALOG = re.compile(r'dialogId\(\s*"([^"]+)"\s*,\s*"([^"]+)"\s*,\s*"(?:[^"\\]|\\.)*"\s*\)\s*dialogStr\(\s*"((?:[^"\\]|\\.)*)"\s*\)')


def parse_fillets_dialogs(text: str) -> dict[str, tuple[str, str]]:
    """A Fish Fillets NG ``dialogs_LANG.lua``: ``dialogId("ID", "FONT", "English")`` followed by
    ``dialogStr("translation")``, as ID -> (font, translation). The font says who speaks
    (``font_big``: the big fish, ``font_small``: the small one); the sound file is ``ID.ogg``."""
    return {key: (font, line.replace('\\"', '"')) for key, font, line in _DIALOG.findall(text)}
