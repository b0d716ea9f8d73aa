"""The ``feature_gaps`` result, computed and written: one home for ``python -m experiments.feature_gaps``
and the study's ``feature_gaps`` stage (Attanasio et al. 2024, §5; the statistics are
:mod:`experiments.analysis.contrasts`'s).

:func:`feature_gaps_result` reads the feature files, contrasts the groups per (dataset, language)
and, given gap reports, builds the setup table, its correlations with E and the error regression;
:func:`write_feature_gaps` writes ``OUT.json`` (headed by its ``schema``, ``subject``, ``inputs``
and ``provenance``) with ``OUT.contrasts.csv`` and, with gaps, ``OUT.setups.csv`` beside it.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from experiments.analysis.contrasts import (
    RESULT_SCHEMA,
    ContrastError,
    error_regression,
    feature_gaps_subject,
    feature_table,
    group_contrasts,
    read_feature_rows,
    read_gap_setups,
    setup_correlations,
    setup_table,
)
from experiments.results.records import FeatureGapsResult
from experiments.scoring.gaps import finite_or_null
from extract.provenance import identified
from extract.records import write_document

DEFAULT_REGRESSION = ("f0_mean_hz", "intensity_mean_db", "rate_tokens_per_second", "lexical_density", "entities")
CORRECTIONS = ("holm", "fdr_bh", "bonferroni", "none")
SIGNIFICANCE = 0.05  # the count of contrasts printed and shown in the study's RESULTS.md


@dataclass
class FeatureGaps:
    """A computed result: the JSON ``document`` (without its identity header), its ``contrasts`` rows,
    its ``setups`` rows (None without gap reports), and counts for the command's lines."""

    document: dict
    contrasts: list[dict]
    setups: list[dict] | None
    records: int
    unmatched_feature_rows: int
    features: list[str]
    regression_features: list[str]

    @property
    def significant(self) -> int:
        return sum(1 for row in self.contrasts if row["p_t_adjusted"] is not None and row["p_t_adjusted"] < SIGNIFICANCE)


def tables(out: Path) -> list[Path]:
    """``OUT.contrasts.csv`` and ``OUT.setups.csv`` (``OUT``'s suffix replaced), written beside the JSON ``out``."""
    out = Path(out)
    return [out.with_suffix(".contrasts.csv"), out.with_suffix(".setups.csv")]


def compared_settings(groups: Sequence[str], unit: str, student: bool, correction: str, bootstrap: int) -> dict:
    """The options a result records under ``settings`` (beside the features it found): a study's
    ``feature_gaps`` output is current only while they are its options."""
    return {
        "groups": list(groups),
        "unit": unit,
        "t_test": "Student" if student else "Welch",
        "correction": f"{correction} over the features of each dataset and language, per test",
        "bootstrap": bootstrap,
    }


def feature_gaps_result(
    utterances: list,
    manifests: Sequence[Path],
    feature_files: Sequence[Path],
    gaps: Sequence[tuple[str, Path]] = (),
    groups: tuple[str, str] = ("female", "male"),
    unit: str = "record",
    student: bool = False,
    correction: str = "holm",
    only: Sequence[str] | None = None,
    regression_features: Sequence[str] | None = None,
    bootstrap: int = 10_000,
) -> FeatureGaps:
    """Contrasts of every feature (``only``: of these) between ``groups`` over ``utterances`` (read from
    ``manifests``, named in errors); with ``gaps`` (model label,
    ``experiments.asr_gap`` report) the setup table, the correlations and the regression too."""
    features_by_id, names = read_feature_rows(feature_files)
    unknown = [name for name in [*(only or []), *(regression_features or [])] if name not in names]
    if unknown:
        raise ContrastError(f"no feature(s) {', '.join(unknown)} in {', '.join(map(str, feature_files))}; they hold {', '.join(names)}")
    features = list(only or names)
    table = feature_table(utterances, features_by_id, features)
    if not table:
        raise ContrastError(f"no id of {', '.join(map(str, feature_files))} is in {', '.join(map(str, manifests))}")
    contrasts = group_contrasts(table, features, groups, unit, not student, correction)
    settings = compared_settings(groups, unit, student, correction, bootstrap)
    settings |= {"nonparametric": "Mann-Whitney U, two-sided", "features": features, "feature_files": [str(path) for path in feature_files]}
    document = {"settings": settings, "contrasts": contrasts}
    setups, chosen = None, []
    if gaps:
        found = read_gap_setups(gaps)
        every_record = feature_table(utterances, features_by_id, features, every_record=True)
        setups = setup_table(found, every_record, features)
        chosen = list(regression_features or [name for name in DEFAULT_REGRESSION if name in names])
        document["setups"] = setups
        document["correlations"] = setup_correlations(setups, features, bootstrap)
        document["regression"] = {
            "model": "Poisson GLM, errors ~ is_A + z(features), offset log(reference length), speaker-clustered standard errors",
            "features": chosen,
            "setups": [error_regression(setup, every_record, chosen) for setup in found],
        }
    return FeatureGaps(document, contrasts, setups, len(table), len(features_by_id) - len(table), features, chosen)


def _write_csv(rows: list[dict], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(dict.fromkeys(key for row in rows for key in row)))
        writer.writeheader()
        writer.writerows([{k: ("" if v is None else v) for k, v in row.items()} for row in rows])


def write_feature_gaps(result: FeatureGaps, out: Path, utterances: list, inputs: Sequence[Path], models: Sequence[str]) -> list[Path]:
    """``out`` (the JSON, identified by ``inputs``: manifests, feature files, gap reports, in that
    order) and its tables; returns the tables written."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    contrasts_csv, setups_csv = tables(out)
    _write_csv(result.contrasts, contrasts_csv)
    written = [contrasts_csv]
    if result.setups is not None:
        _write_csv(result.setups, setups_csv)
        written.append(setups_csv)
    document = identified(result.document, RESULT_SCHEMA, inputs, feature_gaps_subject(utterances, models), kind="feature_gaps")
    write_document(FeatureGapsResult.from_dict(finite_or_null(document), str(out)), out)
    return written
