"""What every corpus recipe shares (:mod:`extract.corpora`): the result type, the row collector and the native-file readers."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from extract.manifest import ManifestError, Utterance, gender_label, iter_text_lines


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
            text += f"; {len(self.missing_audio)} rows skipped because their audio is missing (first: {first.source}:{first.line} {first.audio})"
        if self.unknown_genders:
            values = ", ".join(f"{value!r} ({count})" for value, count in self.unknown_genders.most_common())
            text += f"; {sum(self.unknown_genders.values())} utterances with an unrecognised gender value, kept as unknown: {values}"
        return text


@dataclass(frozen=True)
class Argument:
    """One command-line argument of a recipe, as ``python -m experiments.manifest RECIPE`` adds it:
    argparse's ``flags`` and keyword ``options`` (``required``, ``default``, ``help``, ``metavar``);
    ``keyword``, the reader's parameter it fills (default: the argument's name, as argparse spells
    it); ``reads``, a file or folder the recipe reads; ``old_spellings``, deprecated flags still
    accepted. Made by :func:`argument`."""

    flags: tuple[str, ...]
    keyword: str = ""
    reads: bool = False
    old_spellings: tuple[str, ...] = ()
    options: Mapping = field(default_factory=dict)

    @property
    def dest(self) -> str:
        """The attribute argparse stores the value under (its own rule: the first long flag, dashes as underscores)."""
        if "dest" in self.options:
            return self.options["dest"]
        long = next((flag for flag in self.flags if flag.startswith("--")), self.flags[0])
        return long.lstrip("-").replace("-", "_")

    @property
    def parameter(self) -> str:
        """The reader's parameter this argument fills."""
        return self.keyword or self.dest

    @property
    def positional(self) -> bool:
        return not self.flags[0].startswith("-")


def argument(*flags: str, keyword: str = "", reads: bool = False, old_spellings: tuple[str, ...] = (), **options) -> Argument:
    """An :class:`Argument` of ``flags`` and argparse ``options``."""
    return Argument(tuple(flags), keyword, reads, tuple(old_spellings), dict(options))


@dataclass(frozen=True)
class Recipe:
    """A corpus recipe as the command line offers it: its subcommand ``name`` and one-line ``help``,
    its reader (a function returning an :class:`AdapterResult`) and the arguments that fill the
    reader's parameters. The first positional argument names the source in messages."""

    name: str
    help: str
    read: Callable[..., AdapterResult]
    arguments: tuple[Argument, ...]

    def read_arguments(self, values: Mapping) -> AdapterResult:
        """The reader called with the parsed ``values`` (argparse's attributes by ``dest``); an
        argument left unset (None) is not passed, so the reader's default applies."""
        given = {arg.parameter: values[arg.dest] for arg in self.arguments if values.get(arg.dest) is not None}
        return self.read(**given)

    @property
    def source(self) -> Argument:
        return next(arg for arg in self.arguments if arg.positional)


NEEDED = ("id", "audio", "language", "speaker")


class Collector:
    """Builds utterances row by row, turning bad values into ManifestError with the file and line.

    A duplicate id is an error naming both lines. A gender value missing from the alias table
    becomes ``unknown`` and is counted per raw value in the result.
    """

    def __init__(self, source: Path):
        self.source = source
        self.result = AdapterResult()
        self.first_line: dict[str, int] = {}

    def add(self, line: int, check_audio: bool = True, **fields) -> None:
        absent = [key for key in NEEDED if fields.get(key) in (None, "")]
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


def read_tsv(path: Path, required: Iterable[str], header: bool = True) -> Iterable[tuple[int, dict]]:
    """Rows of a tab-separated file without quoting (as the corpora ship them), blank lines skipped:
    ``(line number, fields)``, a dict by header name, or a list when ``header`` is false. Split on
    tabs directly: the csv module would need its process-wide field size limit raised."""
    rows = ((number, line.rstrip("\r\n").split("\t")) for number, line in iter_text_lines(path) if line.strip())
    if not header:
        yield from rows
        return
    columns = next((fields for _, fields in rows), [])
    absent = [name for name in required if name not in columns]
    if absent:
        raise ManifestError(path, 1, f"missing column(s) {', '.join(absent)}; header has {columns}")
    for number, fields in rows:
        if len(fields) != len(columns):
            raise ManifestError(path, number, f"expected {len(columns)} tab-separated fields")
        yield number, dict(zip(columns, fields))


def read_tsv_mapping(path: Path, key: str, value: str) -> dict[str, str]:
    """A TSV's ``key`` column -> its ``value`` column, both stripped, as written; a key listed twice is
    an error naming both lines."""
    mapping, first_line = {}, {}
    for line, row in read_tsv(path, (key, value)):
        name = row[key].strip()
        if name in first_line:
            raise ManifestError(path, line, f"duplicate {key} {name!r}, first on {path}:{first_line[name]}")
        first_line[name] = line
        mapping[name] = row[value].strip()
    return mapping


def read_text(path: Path) -> str:
    return "".join(line for _, line in iter_text_lines(path))


def split_from_name(path: Path) -> str:
    stem = path.stem.lower()
    for split, names in (("train", ("train",)), ("dev", ("dev", "validation", "valid")), ("test", ("test",))):
        if any(name in stem for name in names):
            return split
    return ""
