"""Gender gaps in error rate, from cached per-utterance error counts (or the gaps between the
groups of any speaker attribute of the manifest: :func:`hypotheses_attribute`).

E(A, B) = 100 (φ(A) − φ(B)) / φ(B) (Attanasio et al. 2024), the absolute difference, and
Δrel = 100 (φ(F) − φ(M)) / (0.5 (φ(F) + φ(M))) (Boito et al. 2022), with φ the corpus-level error
rate (summed errors over summed reference length, percent). Two resampling procedures:

- the published one: per iteration, 40 % of the smaller group's records and as many from the
  larger, each drawn without replacement and stratified on speakers; a two-sided t-test between
  the groups' per-iteration rates; E on the mean rates (the estimate the paper reports);
- a speaker-cluster bootstrap: speakers resampled with replacement within each group, giving a
  95 % interval for E (utterances of one speaker are not independent), or for another comparison
  of :data:`experiments.scoring.group_metrics.COMPARISONS` named by ``compare``.

The t-test treats the iterations, overlapping subsets of the same speakers, as independent
samples (pseudo-replication): for any real difference, however small against the spread between
speakers, its p-value shrinks towards 0 as the iterations grow. The speaker-bootstrap interval is
the evidence to trust; the p-value is kept as the published protocol.

Groups of another attribute than gender (``attribute``: a field of the manifest's ``extra``, read
from the manifest the transcription recorded and checked by its sha256, :mod:`extract.attributes`)
are compared the same way: with two groups the report has the gender report's shape; with k > 2,
each of the first k − 1 groups is compared with the last, the reference (``comparisons``).
Utterances without the attribute are left out and counted (``unlabelled``).

Every resample is a weighted sum of the cached counts, never a new alignment. The rates per group,
the gaps and the speaker bootstrap go through the group-metrics frame
(:mod:`experiments.scoring.group_metrics`); :func:`gap_report` is ``python -m experiments.asr_gap``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from experiments.format import number
from experiments.results.records import DEFAULT_COMPARISON, GapReport
from experiments.scoring.asr_metrics import CER_SPACES, NORMALIZERS, Scoring, error_counts, metric_for, normalize
from experiments.scoring.group_metrics import COMPARISONS, GroupMetricFrame, Members, comparison, relative_gap
from extract.attributes import AttributeLabels, LabelError, read_attribute
from extract.manifest import read_keyed_rows
from extract.options import option, seed_option
from extract.provenance import hypotheses_subject, identified, read_settings, settings_damage, settings_path
from extract.records import schema_version, write_document

COMPARISON_SYMBOLS = {"relative_gap": "E", "delta_rel": "Δrel"}  # in the printed summary; others by name
GAP_SCHEMA = schema_version("asr_gap")  # the report's version (extract.records.FORMATS); reports without ``schema`` read as version 1
GAP_ESTIMATES = {"resampled": "E on the resampled means (Attanasio et al. 2024)", "full": "E on the full set"}
P_VALUE_NOTE = (
    "two-sided t-test of the published resampling (Attanasio et al. 2024): pseudo-replicated, the iterations "
    "are overlapping subsets of the same speakers, so p shrinks as the iterations grow; trust ci95, the "
    "speaker-bootstrap interval"
)


@dataclass(frozen=True)
class GapOptions:
    """How a gap report is computed: the options of ``speech-gender asr_gap`` and, those marked
    ``study``, the keys of a study's ``behaviour.gap`` (declared once: ``experiments.options``)."""

    groups: tuple[str, ...] = option(
        ("female", "male"),
        "A,B: E(A, B) = 100 (φ(A) − φ(B)) / φ(B); with --attribute, two or more of its values, each compared with the last",
        metavar="A,B",
        study=True,
    )
    attribute: str | None = option(
        None,
        "compare the groups of this attribute of the manifest's extra (e.g. age) instead of gender; needs --groups",
        metavar="NAME",
        study=True,
    )
    labels: Path | None = option(
        None,
        "with --attribute: the manifest to read it from (default: the one the transcription's settings record); "
        "refused unless it is the manifest transcribed (its sha256)",
        role="input",
        metavar="MANIFEST",
    )
    iterations: int = option(1000, "speaker-bootstrap resamples for the 95 % interval", study=True)
    seed: int = seed_option("bootstrap seed", study=True)
    gap_estimate: str = option(
        "resampled",
        "what gap_relative holds: E on the mean rates of the resampled subsets (the paper's) or on all records",
        choices=tuple(GAP_ESTIMATES),
        study=True,
    )
    interval_of: str = option(
        DEFAULT_COMPARISON,
        "what the speaker-bootstrap interval (ci95) is of: relative_gap (E, default), delta_rel (Δrel, Boito et al. 2022) "
        "or difference (φ(A) − φ(B)); the report names it in ci95_of when it is not E",
        choices=tuple(COMPARISONS),
    )
    normalizer: str = option(
        "whisper",
        "whisper: English normalizer for en, basic otherwise (every model); basic; none (NFC and spaces only). "
        "The published code normalized Whisper only: score SeamlessM4T with none to reproduce it",
        choices=NORMALIZERS,
        study=True,
    )
    cer_spaces: str = option(
        "drop",
        "CER languages: drop spaces before scoring (default) or keep them as jiwer's cer does (the published code)",
        choices=CER_SPACES,
        study=True,
    )


def iterations_problem(iterations: int) -> str | None:
    """Why ``iterations`` cannot run (the speaker bootstrap needs one resample at least), or None;
    shared by ``asr_gap --iterations`` and a study's ``behaviour.gap.iterations``."""
    return None if iterations >= 1 else f"iterations must be at least 1, got {iterations}"


def error_rate(errors: np.ndarray, lengths: np.ndarray) -> float:
    total = float(np.sum(lengths))
    if total <= 0:
        raise ValueError("no reference words in the group")
    return 100.0 * float(np.sum(errors)) / total


def group_error_rate(columns) -> float:
    """The group metric of ASR: corpus-level error rate of the records' ``errors`` and ``lengths``."""
    return error_rate(columns["errors"], columns["lengths"])


class Group(Members):
    """One group's cached counts: per utterance errors, reference lengths and speakers (any hashable labels)."""

    def __init__(self, errors, lengths, speakers):
        errors, lengths = np.asarray(errors, dtype=np.int64), np.asarray(lengths, dtype=np.int64)
        if not (len(errors) == len(lengths) == len(speakers)):
            raise ValueError("errors, lengths and speakers must have one entry per utterance")
        super().__init__({"errors": errors, "lengths": lengths}, speakers, group_error_rate)

    @property
    def errors(self) -> np.ndarray:
        return self.columns["errors"]

    @property
    def lengths(self) -> np.ndarray:
        return self.columns["lengths"]

    @property
    def rate(self) -> float:
        return self.value


def stratified_allocation(codes: np.ndarray, n: int, iterations: int, rng: np.random.Generator) -> np.ndarray:
    """Records to draw per speaker in each of ``iterations`` samples of ``n`` records, ``[iterations, S]``.

    Speaker s with c_s of the group's N records gets floor(n c_s / N) records, plus one with
    probability equal to the fractional part of n c_s / N, drawn afresh per iteration by systematic
    sampling over the speakers in a random order (exact integer arithmetic): every row sums to ``n``,
    no speaker gets more than its records, and each speaker's expected count is exactly its share
    n c_s / N. Handing the leftover draws to the same speakers every iteration (largest remainder
    with fixed tie-breaks) would over-weight those speakers in every sample and bias the resampled
    rates: identical groups whose speakers sort differently then differ at p < 1e-17."""
    counts = np.bincount(codes).astype(np.int64)
    total = int(counts.sum())
    if not 0 < n <= total:
        raise ValueError(f"cannot draw {n} of {total} records")
    base, remainders = np.divmod(n * counts, total)  # share n c / N = base + remainder / N
    order = np.argsort(rng.random((iterations, len(counts))), axis=1)
    upper = np.cumsum(remainders[order], axis=1)
    lower = upper - remainders[order]
    start = rng.integers(1, total + 1, size=(iterations, 1))  # draws at start + m N, m = 0 .. leftovers - 1
    extra = np.zeros((iterations, len(counts)), dtype=np.int64)
    np.put_along_axis(extra, order, (upper - start) // total - (lower - start) // total, axis=1)
    return base[None, :] + extra


def _stratified_draws(group: Group, n: int, iterations: int, rng: np.random.Generator):
    """Yield ``(members [S, c], chosen [iterations, S, c])`` per class of speakers sharing a record
    count ``c``: each row of ``chosen`` marks that iteration's allocation of records, drawn without
    replacement (the smallest of fresh random keys; continuous keys do not tie). Grouping speakers
    this way keeps the work to a few array operations, not one per speaker."""
    allocation = stratified_allocation(group.codes, n, iterations, rng)
    counts = np.bincount(group.codes)
    by_speaker = np.argsort(group.codes, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    for count in np.unique(counts):
        speakers = np.flatnonzero(counts == count)
        members = by_speaker[starts[speakers][:, None] + np.arange(count)[None, :]]
        keys = rng.random((iterations, len(speakers), count))
        ordered = np.concatenate([np.sort(keys, axis=2), np.full((iterations, len(speakers), 1), np.inf)], axis=2)
        thresholds = np.take_along_axis(ordered, allocation[:, speakers][:, :, None], axis=2)
        yield members, keys < thresholds


def stratified_sample_sums(group: Group, n: int, iterations: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Summed errors and reference lengths of ``iterations`` speaker-stratified samples of ``n`` records."""
    errors, lengths = np.zeros(iterations), np.zeros(iterations)
    for members, chosen in _stratified_draws(group, n, iterations, rng):
        weights = chosen.astype(np.float64)
        errors += np.einsum("isc,sc->i", weights, group.errors[members].astype(np.float64))
        lengths += np.einsum("isc,sc->i", weights, group.lengths[members].astype(np.float64))
    return errors, lengths


@dataclass
class Resampled:
    iterations: int
    sample_size: int
    rates_a: np.ndarray
    rates_b: np.ndarray
    p_value: float

    @property
    def mean_a(self) -> float:
        return float(np.mean(self.rates_a))

    @property
    def mean_b(self) -> float:
        return float(np.mean(self.rates_b))

    @property
    def gap_relative(self) -> float:
        return relative_gap(self.mean_a, self.mean_b)


def published_resampling(a: Group, b: Group, iterations: int = 1000, fraction: float = 0.4, seed: int = 0) -> Resampled:
    rng = np.random.default_rng(seed)
    n = max(1, int(round(fraction * min(len(a), len(b)))))
    rates = []
    for group in (a, b):
        errors, lengths = stratified_sample_sums(group, n, iterations, rng)
        rates.append(100.0 * errors / np.maximum(lengths, 1))
    if np.ptp(rates[0]) == 0 and np.ptp(rates[1]) == 0:  # no variation to test (e.g. one speaker, all records drawn)
        p_value = float("nan")
    else:
        from scipy.stats import ttest_ind  # here: scipy takes a second to import, which --help and a study's plan never need

        p_value = float(ttest_ind(rates[0], rates[1]).pvalue)  # two-sided Student's t-test
    return Resampled(iterations, n, rates[0], rates[1], p_value)


REQUIRED = ("id", "reference", "hypothesis", "gender", "speaker", "language")


def read_hypotheses(path: Path) -> list[dict]:
    """``experiments.transcribe`` rows through the shared id-keyed reader: a duplicate id (both
    lines named), a missing key, a reference, hypothesis, speaker or language that is not a string
    (a numeric or null hypothesis), an unrecognised gender or an empty file is an error naming the
    file and line. The references are in the rows themselves, so no id can lack its reference."""
    strings = ("reference", "hypothesis", "speaker", "language")
    return [row for _, row in read_keyed_rows(path, required=REQUIRED, strings=strings, what="hypothesis row", genders=True)]


ERROR_THRESHOLDS = tuple(range(101))  # percent
RELIABLE_SPEAKERS = 5  # per group, for the speaker-bootstrap interval (fewer clusters: an unstable percentile interval)


def error_distribution(errors: np.ndarray, lengths: np.ndarray, thresholds=ERROR_THRESHOLDS) -> list[float]:
    """Share of records (percent) whose own error rate is at least x, for each x."""
    rates = 100.0 * errors / lengths
    return [float(100.0 * np.mean(rates >= x)) for x in thresholds]


def utterance_counts(rows: list[dict], language: str, scoring: Scoring) -> tuple[list[dict], int]:
    """Per-utterance error counts (id, gender, speaker, errors, length; and ``group``, an attribute's
    value, where the row has one) and how many records were dropped because their reference is
    empty after normalization."""
    counts, dropped = [], 0
    for row in rows:
        if not normalize(row["reference"], language, scoring.normalizer):
            dropped += 1
            continue
        c = error_counts(row["reference"], row["hypothesis"] or "", language, scoring)
        count = {"id": row["id"], "gender": row["gender"], "speaker": row["speaker"], "errors": c.errors, "length": c.reference_length}
        counts.append(count | ({"group": row["group"]} if "group" in row else {}))
    return counts, dropped


def error_rate_frame(counts: list[dict], groups: tuple[str, ...], key: str = "gender") -> GroupMetricFrame:
    """The error rate per group over cached per-utterance counts: gender groups, or the values of
    another ``key`` of the counts (``group``: an attribute's)."""
    columns = {"errors": np.asarray([c["errors"] for c in counts], dtype=np.int64), "lengths": np.asarray([c["length"] for c in counts], dtype=np.int64)}
    return GroupMetricFrame(group_error_rate, columns, [c[key] for c in counts], [c["speaker"] for c in counts], groups)


def full_set_gaps(frame: GroupMetricFrame, a: str, b: str) -> dict[str, float]:
    """The gaps of group ``a`` against ``b`` on all their records, under the names of the gap report:
    E (``gap_relative_full``; undefined, NaN or infinite, when ``b`` makes no error), the absolute
    difference (``gap_absolute``) and Δrel (``delta_rel``)."""
    names = {"gap_relative_full": "relative_gap", "gap_absolute": "difference", "delta_rel": "delta_rel"}
    return {key: frame.compare(name, a, b) for key, name in names.items()}


def score_language(
    rows: list[dict],
    language: str,
    groups: tuple[str, ...],
    iterations: int,
    seed: int,
    scoring: Scoring | None = None,
    estimate: str = "resampled",
    compare: str = DEFAULT_COMPARISON,
    key: str = "gender",
):
    """One language's rates per group, gaps (first group as A) and resampling, and its per-utterance
    counts; the speaker-bootstrap interval is of ``compare`` (:func:`speaker_interval`). Rows are
    grouped by ``key`` (``group``: an attribute's value); more than two groups are each compared
    with the last (``reference``), their gaps under ``comparisons``."""
    if estimate not in GAP_ESTIMATES:
        raise ValueError(f"gap estimate {estimate!r}: expected one of {', '.join(GAP_ESTIMATES)}")
    scoring = scoring or Scoring()
    counts, dropped = utterance_counts(rows, language, scoring)
    frame = error_rate_frame(counts, groups, key)
    result = {"metric": metric_for(language), "scoring": scoring.record(language), "groups": {}, "dropped_empty_reference": dropped}
    members = {name: frame.members(name) for name in frame.present}
    for name, group in members.items():
        result["groups"][name] = {"error_rate": group.value, "utterances": len(group), "speakers": group.speaker_count}
    result["error_distribution"] = {name: error_distribution(g.columns["errors"], g.columns["lengths"]) for name, g in members.items()}
    if frame.missing:
        result["missing_groups"] = frame.missing
        return result, counts
    if len(groups) == 2:
        return result | compared(frame, members, *groups, iterations, seed, estimate, compare), counts
    reference = groups[-1]
    result["reference"] = reference
    result["comparisons"] = {a: compared(frame, members, a, reference, iterations, seed, estimate, compare) for a in groups[:-1]}
    return result, counts


def compared(frame: GroupMetricFrame, members: dict, a: str, b: str, iterations: int, seed: int, estimate: str, compare: str) -> dict:
    """The gaps of group ``a`` against ``b``: the estimate chosen, E on the resampled means and on
    every record, the absolute difference, Δrel, and the resampling with its speaker-bootstrap interval."""
    resampled = published_resampling(*(Group(m.columns["errors"], m.columns["lengths"], m.speakers) for m in (members[a], members[b])), iterations, seed=seed)
    full = full_set_gaps(frame, a, b)
    estimates = {"resampled": resampled.gap_relative, "full": full["gap_relative_full"]}
    return {
        "gap_estimate": estimate,
        "gap_relative": estimates[estimate],
        "gap_relative_full": estimates["full"],
        "gap_relative_resampled": estimates["resampled"],
        "gap_absolute": full["gap_absolute"],
        "delta_rel": full["delta_rel"],
        "bootstrap": {
            "iterations": iterations,
            "sample_size": resampled.sample_size,
            "mean": {a: resampled.mean_a, b: resampled.mean_b},
            "gap_relative": resampled.gap_relative,
            **speaker_interval(frame, a, b, iterations, seed, compare),
            "p_value": resampled.p_value,
            "p_value_note": P_VALUE_NOTE,
        },
    }


def speaker_interval(frame: GroupMetricFrame, a: str, b: str, iterations: int, seed: int, compare: str = DEFAULT_COMPARISON) -> dict:
    """``ci95`` (the speaker-bootstrap interval of the comparison ``compare``, by default E), the
    speakers it rests on, and ``ci95_note`` when they are too few: with one speaker in a group there
    is nothing to resample (``ci95`` is null), and below :data:`RELIABLE_SPEAKERS` per group the
    interval is computed but flagged as unreliable. An interval of another comparison than E names
    it in ``ci95_of``."""
    comparison(compare)  # an unknown name is refused before any resampling
    speakers = {a: frame.speaker_count(a), b: frame.speaker_count(b)}
    named = {} if compare == DEFAULT_COMPARISON else {"ci95_of": compare}
    fewest = min(speakers.values())
    if fewest < 2:
        return {"ci95": [None, None], **named, "speakers": speakers, "ci95_note": "a group has one speaker: a speaker bootstrap has nothing to resample"}
    interval = {"ci95": list(frame.speaker_bootstrap(a, b, iterations, seed=seed, compare=compare)), **named, "speakers": speakers}
    if fewest < RELIABLE_SPEAKERS:
        interval["ci95_note"] = f"only {fewest} speakers in a group: too few for a reliable interval (and for the t-test's marks)"
    return interval


def gap_settings(
    groups: tuple[str, ...],
    iterations: int,
    seed: int,
    scoring: Scoring | None = None,
    estimate: str = "resampled",
    compare: str = DEFAULT_COMPARISON,
    attribute: str | None = None,
) -> dict:
    """What a gap report records as its ``settings``: a rerun with other settings is another report
    (``ci95_of`` only where the interval is not of E, and ``attribute`` only where the groups are
    not genders, so reports of gender gaps in E keep their settings)."""
    scoring = scoring or Scoring()
    return {
        **({"attribute": attribute} if attribute else {}),
        "groups": list(groups),
        "iterations": iterations,
        "seed": seed,
        "gap_estimate": estimate,
        "normalizer": scoring.normalizer,
        "cer_spaces": scoring.cer_spaces,
        **({} if compare == DEFAULT_COMPARISON else {"ci95_of": compare}),
    }


def hypotheses_attribute(hypotheses: Path, attribute: str, labels: Path | None = None) -> AttributeLabels:
    """``attribute``'s labels for a transcription's rows: read from ``labels``, else the manifest
    its settings file (``HYPS.settings.json``) records, and refused unless its sha256 is the one
    recorded there (:func:`extract.attributes.read_attribute`)."""
    settings = read_settings(hypotheses)
    manifest = labels or settings.get("manifest")
    damaged = settings_damage(settings_path(hypotheses)) if settings_path(hypotheses).exists() else None
    if not labels and damaged:
        raise LabelError(f"{settings_path(hypotheses)}: {damaged}; restore it, or pass --labels MANIFEST (the manifest the hypotheses were transcribed from)")
    if not manifest:
        raise LabelError(f"{hypotheses} has no settings file naming its manifest; pass --labels MANIFEST (checked against the sha256 it records)")
    return read_attribute(manifest, attribute, settings.get("manifest_sha256"), f"the transcription {hypotheses}", given=labels is not None)


def gap_report(
    rows: list[dict],
    groups: tuple[str, ...],
    iterations: int,
    seed: int,
    scoring: Scoring | None = None,
    estimate: str = "resampled",
    hypotheses: Path | None = None,
    compare: str = DEFAULT_COMPARISON,
    attribute: AttributeLabels | None = None,
) -> tuple[dict, list[dict]]:
    """Every language of ``rows`` scored (:func:`score_language`): the report (headed as
    :func:`extract.provenance.identified` heads it, ``hypotheses`` its input, then its settings) and the
    per-utterance counts, each tagged with its language.

    With ``attribute``, the rows are grouped by its values (``groups`` are values of it): rows
    without one are left out, counted per language in ``unlabelled``; the report's ``labels`` names
    the attribute and the manifest read, which is also among its ``inputs``."""
    scoring = scoring or Scoring()
    if attribute is not None:
        present = {attribute.values[row["id"]] for row in rows if row["id"] in attribute.values}
        absent = [group for group in groups if group not in present]
        if absent:
            raise LabelError(
                f"--groups {','.join(groups)}: no transcribed utterance has {attribute.attribute} {absent[0]!r} "
                f"(in {attribute.manifest}, its values are {', '.join(sorted(present)) or 'none'})"
            )
    by_language: dict[str, list[dict]] = {}
    unlabelled: dict[str, int] = {}
    for row in rows:
        if attribute is not None:
            value = attribute.values.get(row["id"])
            unlabelled[row["language"]] = unlabelled.get(row["language"], 0) + (value is None)
            if value is None:
                continue
            row = row | {"group": value}
        by_language.setdefault(row["language"], []).append(row)
    settings = gap_settings(groups, iterations, seed, scoring, estimate, compare, attribute.attribute if attribute else None)
    inputs = [hypotheses] if hypotheses else []
    body = {"settings": settings, "languages": {}}
    if attribute is not None:
        inputs.append(Path(attribute.manifest))
        body = {"settings": settings, "labels": attribute.record(sum(unlabelled.values())), "languages": {}}
    report = identified(body, GAP_SCHEMA, inputs, hypotheses_subject(rows, hypotheses), kind="asr_gap")
    all_counts = []
    key = "gender" if attribute is None else "group"
    for language in sorted(by_language):
        entry, counts = score_language(by_language[language], language, groups, iterations, seed, scoring, estimate, compare, key)
        report["languages"][language] = entry | ({"unlabelled": unlabelled[language]} if attribute is not None else {})
        all_counts.extend({"language": language, **c} for c in counts)
    return report, all_counts


def _number(value, digits: int = 2, sign: bool = False) -> str:
    return number(value, digits, sign, missing="undefined")  # E is undefined when B makes no error


def gap_summary(entry: dict, groups: tuple[str, str]) -> str:
    """The printed gap of one language: the speaker-bootstrap interval first, then E named by its
    estimate, then the published t-test labelled as pseudo-replicated. When the interval crosses 0
    and p < 0.05, the line says the interval is the one to trust."""
    if "gap_relative" not in entry:
        return "no gap: a group is missing"
    low, high = entry["bootstrap"]["ci95"]
    compared = COMPARISON_SYMBOLS.get(entry["bootstrap"].get("ci95_of", DEFAULT_COMPARISON), entry["bootstrap"].get("ci95_of"))
    bounds_known = low is not None and high is not None and not (np.isnan(low) or np.isnan(high))
    crosses_zero = bounds_known and low <= 0 <= high
    interval = f"{compared}({groups[0]}, {groups[1]}) 95 % CI {_number(low, sign=True)} .. {_number(high, sign=True)} (speaker bootstrap"
    interval += ", crosses 0: no gap shown either way)" if crosses_zero else ")"
    value = _number(entry["gap_relative"], sign=True)
    estimate = f"E {value}{'' if value == 'undefined' else ' %'} ({GAP_ESTIMATES[entry['gap_estimate']]})"
    p_value = entry["bootstrap"]["p_value"]
    test = f"p {'undefined' if p_value is None or np.isnan(p_value) else format(p_value, '.3g')} (published resampling t-test, pseudo-replicated"
    test += "; the interval crosses 0: trust the interval, not p)" if crosses_zero and p_value is not None and p_value < 0.05 else ")"
    note = f" [{entry['bootstrap']['ci95_note']}]" if entry["bootstrap"].get("ci95_note") else ""
    return f"{interval}{note}; {estimate}; {test}"


def language_gap_line(entry: dict, groups: tuple[str, ...]) -> str:
    """One language of a gap report as a console line: each group's error rate with its speakers, then
    :func:`gap_summary` (the interval, E, p) and Δrel, each named with its unit."""
    metric = str(entry.get("metric") or "error rate").upper()
    found = {group: entry["groups"].get(group) or {} for group in groups}
    speakers = {group: found[group].get("speakers", 0) for group in groups}
    rates = ", ".join(
        f"{group} {_number(found[group].get('error_rate'))} % ({speakers[group]} speaker{'' if speakers[group] == 1 else 's'})" for group in groups
    )
    if len(groups) != 2:
        return f"{metric} {rates}"
    return f"{metric} {rates}; {gap_summary(entry, groups)}{delta_rel_text(entry)}"


def delta_rel_text(entry: dict) -> str:
    """``; Δrel +x.xx % of the mean rate`` for a console line, empty where the entry has no Δrel."""
    return f"; Δrel {_number(entry['delta_rel'], sign=True)} % of the mean rate" if entry.get("delta_rel") is not None else ""


def finite_or_null(value):
    """JSON has no NaN or infinity: undefined numbers (e.g. E when B makes no error) become null."""
    if isinstance(value, dict):
        return {k: finite_or_null(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite_or_null(v) for v in value]
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def save_gap_report(report: dict, counts: list[dict], out: Path) -> Path:
    """Writes :func:`gap_report`'s report to ``out`` (JSON, undefined numbers as null) and its counts beside it (:func:`counts_path`, returned)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    write_document(GapReport.from_dict(finite_or_null(report), str(out)), out)
    counts_file = counts_path(out)
    counts_file.write_text("".join(json.dumps(c) + "\n" for c in counts))
    return counts_file


def counts_path(out: Path) -> Path:
    """``OUT.counts.jsonl``: where :func:`save_gap_report` writes the per-utterance counts of report ``out``."""
    return out.with_suffix(".counts.jsonl")
