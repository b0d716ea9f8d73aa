"""Do features differ between genders, does that difference track the gap, and does gender still
predict errors once the features are held fixed (Attanasio et al. 2024, §5 and appendix B)?

- :func:`group_contrasts`, per (dataset, language) and feature, group A against group B (female
  against male by default): means, Welch's t-test (unequal variances; ``equal_var=True`` gives
  Student's), the Mann-Whitney U test (two-sided), Cohen's d (pooled standard deviation) and the
  rank-biserial correlation (2 U_A / (n_A n_B) − 1: positive when A's values tend to be larger). The
  p-values of each test are corrected over the features of one (dataset, language) with Holm's
  step-down method (``correction``: any method of ``statsmodels.stats.multitest.multipletests``, or
  ``none``).
  Records are the unit, as in the paper; ``unit="speaker"`` tests per-speaker means instead, since
  records of one speaker are not independent (a record-level p-value is then pseudo-replicated).
- :func:`setup_table`, one row per (dataset, language, model) gap: E(A, B) from ``experiments.asr_gap``
  and each feature's group means and difference (A − B) over the records that gap scored. Its CSV
  is what ``python -m experiments.correlate --table ... --x diff_<feature> --y gap_relative`` reads;
  :func:`setup_correlations` runs the same statistics over all setups and per (dataset, model).
- :func:`error_regression`, per setup and utterance: a Poisson GLM of the error count on an indicator
  of group A and the z-scored features, with log(reference length) as offset, so each coefficient is a
  log error-rate ratio (exp: the rate ratio per standard deviation, or of A against B). Standard
  errors are clustered by speaker (sandwich): valid whatever the overdispersion (Poisson
  pseudo-likelihood) and with records of one speaker correlated. The same model with the group
  indicator alone is fitted beside it, so the change of the group coefficient is what the features
  explain; ``gender_feature_correlation`` says how far gender and each feature can be told apart (near
  ±1, as F0 on some corpora, the joint coefficients are unstable). Records with a null feature are
  dropped and counted; a group that makes no error is not fitted (its ratio is 0 or infinite), and
  fewer than 5 speakers in a group is flagged (``reliability_note``): clustered errors need clusters.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from experiments.results.records import DEFAULT_COMPARISON, GapReport
from experiments.scoring.gaps import RELIABLE_SPEAKERS, counts_path
from extract.errors import UserError
from extract.manifest import ManifestError, read_keyed_rows
from extract.provenance import joined
from extract.records import RecordError, read_document, schema_version

META = ("id", "dataset", "language", "gender", "speaker")


def feature_row_identity(utterance) -> dict:
    """The columns of :data:`META` that every feature row (acoustic, lexical) starts with, from its
    manifest record, in the order the rows are written."""
    return {"id": utterance.id, "speaker": utterance.speaker, "gender": utterance.gender, "language": utterance.language, "dataset": utterance.dataset}


UNITS = ("record", "speaker")
MIN_UNITS = 2  # per group: a t-test, a standard deviation and Mann-Whitney's U need two values
RESULT_SCHEMA = schema_version("feature_gaps")  # the ``experiments.feature_gaps`` JSON's version (extract.records.FORMATS)


class ContrastError(UserError, ValueError):
    pass


def read_feature_rows(paths: Iterable[str | Path]) -> tuple[dict[str, dict], list[str]]:
    """(id -> {feature: value or None}, feature names in file order) from feature JSONL files
    (``experiments.acoustics``, ``experiments.lexical``); the files' rows are merged by id. A row
    without a ``features`` object, a value that is neither a number nor null, a NaN or infinite
    value, or a feature of one id in two files is an error naming the file and line (files of one
    kind for different records, e.g. one acoustic file per language, merge). Non-finite values are
    refused rather than dropped: JSON has none, the package's writers say null with a reason, so one
    comes from another writer, and whether it meant "undefined" or "too large" cannot be known
    (dropping an infinite value as if null would move a group's mean without a word)."""
    by_id: dict[str, dict] = {}
    names: dict[str, None] = {}
    sources: dict[tuple[str, str], str] = {}  # (id, feature) -> the file that gave it
    seen = set()
    for path in paths:
        if Path(path).resolve() in seen:
            raise ManifestError(path, None, "given twice; give each feature file once")
        seen.add(Path(path).resolve())
        for number, record in read_keyed_rows(path, required=("features",), what="feature row"):
            features = record["features"]
            if not isinstance(features, dict):
                raise ManifestError(path, number, f"features must be an object, got {type(features).__name__}")
            for name, value in features.items():
                if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
                    raise ManifestError(path, number, f"feature {name} must be a number or null, got {value!r}")
                if value is not None and not math.isfinite(value):
                    raise ManifestError(
                        path, number, f"feature {name} is {json.dumps(value)}; write null (with its reason in null_reasons) for a value that is not defined"
                    )
                if sources.setdefault((record["id"], name), str(path)) != str(path):
                    source = sources[record["id"], name]
                    raise ManifestError(path, number, f"feature {name} of {record['id']} is also in {source}; each feature of a record must come from one file")
                names[name] = None
            by_id.setdefault(record["id"], {}).update({k: (None if v is None else float(v)) for k, v in features.items()})
    return by_id, list(names)


def feature_table(utterances: Sequence, features_by_id: dict[str, dict], features: Sequence[str], every_record: bool = False) -> list[dict]:
    """One row per utterance that has feature rows (``every_record``: per utterance): its metadata and
    the features (None where null or absent). The setup table and the regression take every record,
    so that a scored record without features is counted as such rather than refused."""
    table = []
    for utterance in utterances:
        if every_record or utterance.id in features_by_id:
            values = features_by_id.get(utterance.id, {})
            table.append({name: getattr(utterance, name) for name in META} | {f: values.get(f) for f in features})
    return table


def _finite(values) -> np.ndarray:
    array = np.asarray([np.nan if v is None else v for v in values], dtype=float)
    return array[np.isfinite(array)]


def contrast(a: Sequence[float], b: Sequence[float], equal_var: bool = False) -> dict:
    """The statistics of one feature between two samples (see the module docstring); tests that cannot
    be run (fewer than 2 values in a group, no variation) are null with a ``note``."""
    from scipy import stats

    a, b = _finite(a), _finite(b)
    result = {"n_a": int(len(a)), "n_b": int(len(b))}
    result |= {"mean_a": float(a.mean()) if len(a) else None, "mean_b": float(b.mean()) if len(b) else None}
    result["difference"] = result["mean_a"] - result["mean_b"] if len(a) and len(b) else None
    empty = dict.fromkeys(("sd_a", "sd_b", "t", "df", "p_t", "cohens_d", "u", "p_u", "rank_biserial"))
    if len(a) < 2 or len(b) < 2:
        return result | empty | {"note": "fewer than 2 values in a group"}
    sd_a, sd_b = float(a.std(ddof=1)), float(b.std(ddof=1))
    result |= {"sd_a": sd_a, "sd_b": sd_b}
    pooled = math.sqrt(((len(a) - 1) * sd_a**2 + (len(b) - 1) * sd_b**2) / (len(a) + len(b) - 2))
    if pooled == 0:
        return result | {k: empty[k] for k in ("t", "df", "p_t", "cohens_d", "u", "p_u", "rank_biserial")} | {"note": "no variation in either group"}
    test = stats.ttest_ind(a, b, equal_var=equal_var)
    u = stats.mannwhitneyu(a, b, alternative="two-sided")
    return result | {
        "t": float(test.statistic),
        "df": float(test.df),
        "p_t": float(test.pvalue),
        "cohens_d": (result["mean_a"] - result["mean_b"]) / pooled,
        "u": float(u.statistic),
        "p_u": float(u.pvalue),
        "rank_biserial": 2.0 * float(u.statistic) / (len(a) * len(b)) - 1.0,
    }


def _adjust(p_values: list[float | None], method: str) -> list[float | None]:
    from statsmodels.stats.multitest import multipletests

    present = [i for i, p in enumerate(p_values) if p is not None and math.isfinite(p)]
    adjusted: list[float | None] = [None] * len(p_values)
    if method == "none":
        return [p_values[i] if i in present else None for i in range(len(p_values))]
    if present:
        corrected = multipletests([p_values[i] for i in present], method=method)[1]
        for i, p in zip(present, corrected):
            adjusted[i] = float(p)
    return adjusted


def _unit_values(rows: list[dict], feature: str, unit: str) -> list[float]:
    if unit == "record":
        return [r[feature] for r in rows]
    by_speaker: dict[str, list[float]] = {}
    for r in rows:
        if r[feature] is not None and math.isfinite(r[feature]):
            by_speaker.setdefault(r["speaker"], []).append(r[feature])
    return [float(np.mean(values)) for values in by_speaker.values()]


def check_group_sizes(scope: str, members: dict[str, list[dict]], unit: str) -> None:
    """At least 2 records (``unit="speaker"``: speakers) in each group of a (dataset, language), else a
    one-line error: with fewer, every test of that scope is null, and a run of nulls is no result."""
    counts = {group: len(rows) if unit == "record" else len({r["speaker"] for r in rows}) for group, rows in members.items()}
    if min(counts.values()) >= MIN_UNITS:
        return
    (a, count_a), (b, count_b) = counts.items()
    per = " per speaker (--unit speaker)" if unit == "speaker" else ""
    hint = " (or use --unit record)" if unit == "speaker" else ""
    raise ContrastError(
        f"{scope}: {count_a} {a} and {count_b} {b} {unit}s with features; comparing {a} with {b}{per} needs at least {MIN_UNITS} in each group{hint}"
    )


def group_contrasts(
    table: list[dict],
    features: Sequence[str],
    groups: tuple[str, str] = ("female", "male"),
    unit: str = "record",
    equal_var: bool = False,
    correction: str = "holm",
) -> list[dict]:
    """One row per (dataset, language, feature) with :func:`contrast`'s statistics and the corrected
    p-values ``p_t_adjusted``, ``p_u_adjusted`` (over the features of the (dataset, language))."""
    if unit not in UNITS:
        raise ContrastError(f"unit {unit!r}: expected one of {', '.join(UNITS)}")
    by_setup: dict[tuple[str, str], list[dict]] = {}
    for row in table:
        by_setup.setdefault((row["dataset"], row["language"]), []).append(row)
    out = []
    for (dataset, language), rows in sorted(by_setup.items()):
        members = {g: [r for r in rows if r["gender"] == g] for g in groups}
        check_group_sizes(f"{dataset}/{language}", members, unit)
        results = []
        for feature in features:
            values = [_unit_values(members[g], feature, unit) for g in groups]
            results.append({"dataset": dataset, "language": language, "feature": feature, "group_a": groups[0], "group_b": groups[1], "unit": unit})
            results[-1] |= contrast(*values, equal_var=equal_var)
        for test in ("p_t", "p_u"):
            for result, adjusted in zip(results, _adjust([r[test] for r in results], correction)):
                result[f"{test}_adjusted"] = adjusted
        out.extend(results)
    return out


def feature_gaps_subject(utterances: Iterable, models: Sequence[str]) -> dict:
    """What a feature-gaps result is about: the gap reports' model labels, the records' datasets and languages."""
    utterances = list(utterances)
    return {
        "model": joined(models),
        "dataset": joined(u.dataset for u in utterances),
        "languages": sorted({u.language for u in utterances}),
    }


def read_gap_setups(gaps: Sequence[tuple[str, Path]]) -> list[dict]:
    """``(model label, asr_gap JSON)`` pairs -> one setup per (model, language) with a gap: ``model``,
    ``language``, ``groups``, the report entry and the per-utterance counts of that language (from
    ``OUT.counts.jsonl`` beside the JSON)."""
    setups = []
    for model, path in gaps:
        path = Path(path)
        if not path.is_file():
            raise ContrastError(f"{path}: no such gap report (write it with python -m experiments.asr_gap)")
        try:
            report = read_document(path, GapReport)
        except RecordError as error:
            raise ContrastError(str(error)) from None
        try:
            languages, groups = report.languages, tuple(report.body["settings"]["groups"])
        except (KeyError, TypeError) as error:
            raise ContrastError(f"{path}: not an experiments.asr_gap report ({type(error).__name__}: {error})") from None
        counts = [row for _, row in read_keyed_rows(counts_path(path), required=("language", "errors", "length", "speaker", "gender"), what="count row")]
        for language, entry in sorted(languages.items()):
            if entry.get("gap_relative") is None:
                continue
            rows = [row for row in counts if row["language"] == language]
            setups.append({"model": model, "language": language, "groups": groups, "entry": entry, "counts": rows, "source": str(path)})
    return setups


def _setup_dataset(setup: dict, metadata: dict[str, dict]) -> str:
    missing = [row["id"] for row in setup["counts"] if row["id"] not in metadata]
    if missing:
        raise ContrastError(f"{setup['source']}: {len(missing)} scored id(s) of {setup['language']} are not in the manifest, e.g. {missing[:3]}")
    datasets = sorted({metadata[row["id"]]["dataset"] for row in setup["counts"]})
    if len(datasets) != 1:
        raise ContrastError(f"{setup['source']}: {setup['language']} mixes datasets {datasets}; score each dataset with its own asr_gap run")
    return datasets[0]


def setup_table(setups: list[dict], table: list[dict], features: Sequence[str]) -> list[dict]:
    """One row per (dataset, language, model): the gap and, per feature, the group means and their difference A − B."""
    metadata = {row["id"]: row for row in table}
    rows = []
    for setup in setups:
        dataset = _setup_dataset(setup, metadata)
        a, b = setup["groups"]
        entry = setup["entry"]
        ci = (entry.get("bootstrap") or {}).get("ci95") or [None, None]
        row = {
            "setup": f"{dataset}/{setup['language']}/{setup['model']}",
            "dataset": dataset,
            "language": setup["language"],
            "model": setup["model"],
            "group_a": a,
            "group_b": b,
            "gap_relative": entry["gap_relative"],
            "gap_estimate": entry.get("gap_estimate"),
            "gap_ci95_low": ci[0],
            "gap_ci95_high": ci[1],
            "gap_ci95_of": (entry.get("bootstrap") or {}).get("ci95_of", DEFAULT_COMPARISON),
        }
        scored = [metadata[c["id"]] for c in setup["counts"]]
        for feature in features:
            means = {}
            for group in (a, b):
                values = _finite([r[feature] for r in scored if r["gender"] == group])
                means[group] = float(values.mean()) if len(values) else None
            row[f"{a}_{feature}"], row[f"{b}_{feature}"] = means[a], means[b]
            row[f"diff_{feature}"] = means[a] - means[b] if None not in means.values() else None
        rows.append(row)
    return rows


def setup_correlations(rows: list[dict], features: Sequence[str], bootstrap: int = 10_000, seed: int = 0) -> list[dict]:
    """Pearson and Spearman (``experiments.results.correlation.correlate``) between each feature's
    difference and E, over all setups and per (dataset, model); fewer than 3 usable setups, or no
    variation, gives a ``note`` instead."""
    from experiments.results.correlation import CorrelationError, correlate

    scopes = {("all", "all"): rows}
    for row in rows:
        scopes.setdefault((row["dataset"], row["model"]), []).append(row)
    out = []
    for (dataset, model), members in scopes.items():
        for feature in features:
            pairs = [(r[f"diff_{feature}"], r["gap_relative"]) for r in members]
            pairs = [(x, y) for x, y in pairs if x is not None and y is not None and math.isfinite(x) and math.isfinite(y)]
            result = {"dataset": dataset, "model": model, "feature": f"diff_{feature}", "setups": len(pairs)}
            try:
                result |= correlate([x for x, _ in pairs], [y for _, y in pairs], bootstrap, seed)
            except CorrelationError as error:
                result["note"] = str(error)
            out.append(result)
    return out


def _standardized(values: np.ndarray) -> np.ndarray | None:
    sd = values.std(ddof=1) if len(values) > 1 else 0.0
    return None if sd == 0 else (values - values.mean()) / sd


def _coefficients(fit, names: list[str]) -> dict:
    interval = np.asarray(fit.conf_int())
    return {
        name: {
            "coef": float(fit.params[i]),
            "se": float(fit.bse[i]),
            "z": float(fit.tvalues[i]),
            "p": float(fit.pvalues[i]),
            "rate_ratio": float(np.exp(fit.params[i])),
            "ci95": [float(interval[i, 0]), float(interval[i, 1])],
        }
        for i, name in enumerate(names)
    }


def poisson_fit(errors, lengths, columns: dict[str, np.ndarray], clusters) -> dict:
    """The Poisson GLM of ``errors`` on an intercept and ``columns`` with offset log(``lengths``) and
    speaker-clustered standard errors: coefficients (log rate ratios), McFadden's pseudo-R², deviance."""
    import statsmodels.api as sm

    names = ["intercept", *columns]
    design = np.column_stack([np.ones(len(errors)), *columns.values()]) if columns else np.ones((len(errors), 1))
    codes = np.unique(np.asarray(clusters), return_inverse=True)[1]
    model = sm.GLM(np.asarray(errors, dtype=float), design, family=sm.families.Poisson(), offset=np.log(np.asarray(lengths, dtype=float)))
    fit = model.fit(cov_type="cluster", cov_kwds={"groups": codes})
    return {
        "coefficients": _coefficients(fit, names),
        "pseudo_r2_mcfadden": float(fit.pseudo_rsquared(kind="mcf")),
        "deviance": float(fit.deviance),
        "converged": bool(fit.converged),
    }


def error_regression(setup: dict, table: list[dict], features: Sequence[str]) -> dict:
    """The per-utterance regression of one setup (see the module docstring): ``group_only`` and
    ``with_features`` fits, the records used and dropped, and the features left out (constant)."""
    metadata = {row["id"]: row for row in table}
    a, b = setup["groups"]
    counts = [c for c in setup["counts"] if c["gender"] in (a, b)]
    usable, dropped = [], 0
    for c in counts:
        values = [metadata.get(c["id"], {}).get(f) for f in features]
        if any(v is None or not math.isfinite(v) for v in values):
            dropped += 1
        else:
            usable.append((c, values))
    result = {
        "dataset": _setup_dataset(setup, metadata),
        "model": setup["model"],
        "language": setup["language"],
        "group_a": a,
        "group_b": b,
        "records": len(usable),
        "dropped_null_feature": dropped,
    }
    speakers = {c["speaker"] for c, _ in usable}
    indicator = np.asarray([1.0 if c["gender"] == a else 0.0 for c, _ in usable])
    if len(usable) < 3 or len(speakers) < 2 or len(set(indicator)) < 2:
        return result | {"note": "too few records, speakers or groups to fit"}
    errors = np.asarray([c["errors"] for c, _ in usable])
    lengths = np.asarray([c["length"] for c, _ in usable])
    flawless = [group for group, value in ((a, 1.0), (b, 0.0)) if errors[indicator == value].sum() == 0]
    if flawless:
        return result | {"note": f"{' and '.join(flawless)} made no error in these records: the rate ratio is 0 or infinite, nothing to fit"}
    clusters = [c["speaker"] for c, _ in usable]
    columns, constant = {f"is_{a}": indicator}, []
    matrix = np.asarray([values for _, values in usable], dtype=float)
    for j, feature in enumerate(features):
        z = _standardized(matrix[:, j])
        if z is None:
            constant.append(feature)
        else:
            columns[f"z_{feature}"] = z
    per_group = {group: len({c["speaker"] for c, _ in usable if c["gender"] == group}) for group in (a, b)}
    result |= {"speakers": len(speakers), "speakers_per_group": per_group, "constant_features_left_out": constant}
    if min(per_group.values()) < RELIABLE_SPEAKERS:
        result["reliability_note"] = f"fewer than {RELIABLE_SPEAKERS} speakers in a group: speaker-clustered standard errors are unreliable"
    # near ±1, gender and that feature cannot be told apart: the joint coefficients are then unstable
    result["gender_feature_correlation"] = {name.removeprefix("z_"): float(np.corrcoef(indicator, z)[0, 1]) for name, z in list(columns.items())[1:]}
    for fit, fitted in (("group_only", {f"is_{a}": indicator}), ("with_features", columns)):
        try:
            result[fit] = poisson_fit(errors, lengths, fitted, clusters)
        except np.linalg.LinAlgError as error:  # e.g. a feature that is the group indicator itself (gender_feature_correlation ±1)
            result[fit] = {"note": f"not fitted: {error} (a column is a combination of others; see gender_feature_correlation)"}
    return result
