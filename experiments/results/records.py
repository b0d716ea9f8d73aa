"""The records of experiments' results: the behaviour documents (a :class:`extract.records.Document`
with its format's name, read and written by :func:`extract.records.read_document` and
:func:`extract.records.write_document`) and the rows of collect's CSV tables (``experiments.collect``:
one dataclass a table, its columns in order, and one reader; their version is ``collect.json``'s).
The versions of every format are :data:`extract.records.FORMATS`."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import ClassVar, TypeVar

from extract.records import Document, RecordError

# The formats' records: a Document with its format's name (no field of their own, so no @dataclass of
# their own) and the body keys their readers use as attributes.


def _body_key(key: str) -> property:
    """A document's ``body[key]`` as a read-only attribute (what its readers join on or show)."""
    return property(lambda self: self.body[key], doc=f"The document's ``{key}``.")


DEFAULT_COMPARISON = "relative_gap"  # what a gap report's speaker-bootstrap interval (ci95) is of, unless it names another (``ci95_of``)


def gap_task(settings: dict) -> str:
    """The task a gap report's ``settings`` compare, spelled as probe rows spell theirs so that
    ``collect`` joins the two: ``female-male`` for gender groups, ``attribute:NAME:A,B`` for an
    attribute's (k > 2 groups: all of them, which no probe task names)."""
    groups = settings.get("groups", ())
    return f"attribute:{settings['attribute']}:{','.join(groups)}" if settings.get("attribute") else "-".join(groups)


class GapReport(Document):
    """``experiments.asr_gap``'s report: ``settings`` and the per-language entries (:mod:`experiments.scoring.gaps`)."""

    FORMAT: ClassVar[str] = "asr_gap"
    languages = _body_key("languages")


class MustSheScores(Document):
    """``experiments.mustshe``'s scores (:mod:`experiments.scoring.mustshe`): ``category_1`` and the rest."""

    FORMAT: ClassVar[str] = "mustshe"
    category_1 = _body_key("category_1")


class StQualityScores(Document):
    """``experiments.st_quality``'s scores (:mod:`experiments.scoring.translation_quality`): ``groups``
    (``all`` and each gender's BLEU, chrF, COMET), ``target_language``, ``comet_model``."""

    FORMAT: ClassVar[str] = "st_quality"
    groups = _body_key("groups")


class WinoMTResult(Document):
    """``experiments.winomt``'s result (:mod:`experiments.scoring.winomt`): ``by_stereotype`` and the rest."""

    FORMAT: ClassVar[str] = "winomt"
    by_stereotype = _body_key("by_stereotype")


class FeatureGapsResult(Document):
    """``experiments.feature_gaps``'s result (:mod:`experiments.analysis.feature_gap_report`):
    ``settings``, ``contrasts`` and, with gap reports, ``setups``, ``correlations``, ``regression``."""

    FORMAT: ClassVar[str] = "feature_gaps"


JOINT = "+"  # a joint site A+B: sites A and B patched together in one pass (one row per pair, its site named A+B)


def members(site: str) -> list[str]:
    """The sites a patch row's or summary's site patches: itself, or a joint site's members (``A+B``)."""
    return site.split(JOINT)


class PatchSummary(Document):
    """``OUT.summary.json`` of ``experiments.patch``: per site, the effect of each pairing and cross minus within."""

    FORMAT: ClassVar[str] = "patch_summary"


DOCUMENTS: dict[str, type[Document]] = {cls.FORMAT: cls for cls in (GapReport, MustSheScores, StQualityScores, WinoMTResult, FeatureGapsResult, PatchSummary)}


@dataclass
class TableRow:
    """A row of one of ``experiments.collect``'s CSV tables (their version is ``collect.json``'s).

    :meth:`to_dict` gives the row's cells by column, in the table's order (None for an empty cell);
    :meth:`from_dict` takes the same, or the strings a CSV reader gives (an empty cell is None,
    the columns named in ``FLOATS`` and ``INTEGERS`` are numbers). A column with a default was added
    after the table's first version: a table written before it reads it as the default."""

    FLOATS: ClassVar[tuple[str, ...]] = ()
    INTEGERS: ClassVar[tuple[str, ...]] = ()

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, cells: dict, where: str = "a table row") -> TableRow:
        names = [f.name for f in fields(cls) if f.name in cells or (f.default is MISSING and f.default_factory is MISSING)]
        missing = [name for name in names if name not in cells]
        if missing:
            raise RecordError(f"{where}: no {', '.join(missing)} column; rerun python -m experiments.collect")
        return cls(**{name: _cell(cells[name], name, cls, where) for name in names})


def columns(record: type[TableRow]) -> tuple[str, ...]:
    """The header of ``record``'s table: its fields, in order."""
    return tuple(item.name for item in fields(record))


def _cell(value, name: str, record: type[TableRow], where: str):
    if not isinstance(value, str):
        return value
    if value == "":
        return None
    try:
        return float(value) if name in record.FLOATS else int(value) if name in record.INTEGERS else value
    except ValueError:
        raise RecordError(f"{where}: {name} is {value!r}, not a number; rerun python -m experiments.collect") from None


# beside each probe's F1 in f1_vs_gap.csv and f1_vs_mustshe.csv, per control of probing.controls.CONTROLS:
# the control's score and the selectivity (experiments.results.collect says how each is computed)
CONTROLLED = ("shuffled", "speaker")
CONTROL_COLUMNS = tuple(f"{measure}_{control}" for control in CONTROLLED for measure in ("f1_control", "selectivity"))


@dataclass
class ProbeSiteCells(TableRow):
    """The first columns of a table that joins probes per site with a behaviour (``f1_vs_gap.csv``,
    ``f1_vs_patch.csv``): the probes' model, data, site, task and split, and their mean F1_S."""

    model: str
    dataset: str | None
    language: str | None
    site: str
    site_index: int | None
    site_role: str | None
    task: str
    split: str
    f1_s: float | None
    seeds: str


@dataclass
class F1VsGapRow(ProbeSiteCells):
    """A row of ``f1_vs_gap.csv`` (:mod:`experiments.results.collect` says what each column is)."""

    FLOATS: ClassVar[tuple[str, ...]] = ("f1_s", "gap_relative", "ci95_low", "ci95_high", *CONTROL_COLUMNS)
    INTEGERS: ClassVar[tuple[str, ...]] = ("site_index",)

    gap_relative: float | None
    gap_estimate: str | None
    ci95_low: float | None
    ci95_high: float | None
    ci95_of: str | None
    probe_runs: str
    gap_source: str
    f1_control_shuffled: float | None = None
    selectivity_shuffled: float | None = None
    f1_control_speaker: float | None = None
    selectivity_speaker: float | None = None


@dataclass
class F1VsMustSheRow(TableRow):
    """A row of ``f1_vs_mustshe.csv``."""

    FLOATS: ClassVar[tuple[str, ...]] = ("applied_f1_macro", "category_1_accuracy", *CONTROL_COLUMNS)
    INTEGERS: ClassVar[tuple[str, ...]] = ("site_index",)

    model: str
    site: str
    site_index: int | None
    site_role: str | None
    split: str
    tgt_lang: str | None
    applied_f1_macro: float | None
    seeds: str
    category_1_accuracy: float | None
    probe_runs: str
    mustshe_source: str
    f1_control_shuffled: float | None = None
    selectivity_shuffled: float | None = None
    f1_control_speaker: float | None = None
    selectivity_speaker: float | None = None


@dataclass
class F1VsPatchRow(ProbeSiteCells):
    """A row of ``f1_vs_patch.csv``."""

    FLOATS: ClassVar[tuple[str, ...]] = ("f1_s", "cross_effect", "within_effect", "cross_minus_within", "ci95_low", "ci95_high")
    INTEGERS: ClassVar[tuple[str, ...]] = ("site_index",)

    patch_task: str
    frames: str | None
    cross_effect: float | None
    within_effect: float | None
    cross_minus_within: float | None
    ci95_low: float | None
    ci95_high: float | None
    probe_runs: str
    patch_source: str


@dataclass
class LongRow(TableRow):
    """A row of ``long.csv``: one score of a probe row or a behaviour result, with what it is about;
    a p-value's row also its Benjamini-Hochberg ``q_value`` across the rows of its kind and metric
    (:func:`experiments.results.collect.add_q_values`)."""

    FLOATS: ClassVar[tuple[str, ...]] = ("value", "q_value")
    INTEGERS: ClassVar[tuple[str, ...]] = ("seed", "site_index")

    kind: str
    model: str
    dataset: str | None
    language: str | None
    tgt_lang: str | None
    site: str | None
    probe: str | None
    control: str | None
    seed: int | None
    task: str | None
    split: str | None
    applied_to: str | None
    metric: str
    site_index: int | None
    site_role: str | None
    value: float
    source: str
    q_value: float | None = None


T = TypeVar("T", bound=TableRow)


def read_table(path: str | Path, record: type[T]) -> list[T]:
    """The rows of one of collect's CSV tables as ``record`` (a row that is not one names its line)."""
    import csv

    with Path(path).open(newline="", encoding="utf-8") as handle:
        return [record.from_dict(cells, f"{path}:{number}") for number, cells in enumerate(csv.DictReader(handle), start=2)]
