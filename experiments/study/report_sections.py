"""RESULTS.md's sections that make its numbers explain themselves (issue 45, item 3): what F1_S, E,
Δrel and selectivity are, in one line each; each probe's controls and selectivity; the female-male
gaps no probe joined, with their intervals; and why nothing joined, and what would.

Everything is read from the collected tables (``long.csv``, ``f1_vs_gap.csv``, ``collect.json``),
as the rest of :mod:`experiments.study.report`.
"""

from __future__ import annotations

from collections import defaultdict

from experiments.format import number
from experiments.study.joins import why_unjoined

DEFINITIONS = [
    "- **F1_S**: a positional probe's macro-F1 (percent, 50 = chance for two balanced classes) averaged over the speech "
    "positions, up to the test clips' mean length; **F1**: the macro-F1 of the other probe kinds.",
    "- **control** (`shuffled`, `speaker`): the same probe trained on labels that carry no gender; **selectivity** = "
    "F1(probe) − F1(control), in points: near 0 or below, the probe reads no more than its control does.",
    "- **E(A, B)** = 100 (WER(A) − WER(B)) / WER(B), percent of B's error rate: > 0, A (women, in female-male) is recognised "
    "worse; −100 when A makes no error at all. The E a table shows is the estimate its gap report chose (`gap_estimate`): "
    "`resampled`, Attanasio et al.'s, is E's mean over random subsets of 40 % of each group's utterances, which on a few clips "
    "can differ from the full-set E, even in sign (the gap JSON's `gap_relative_full`). **Δrel** = 100 (WER(A) − WER(B)) / mean of the two. "
    "**95 % CI**: the speaker bootstrap (it cannot vary one speaker per group).",
]
GENDER_TASK = "female-male"
CONTROL_KEY = ("model", "dataset", "language", "site", "task", "split", "probe")


def definitions() -> list[str]:
    return ["## What the numbers are", "", *DEFINITIONS, ""]


def control_cells(long_rows: list[dict]) -> dict[tuple, str]:
    """Per probe (:data:`CONTROL_KEY`, split ``fixed`` where empty): its controls' headline score and
    selectivity, mean over seeds, as one cell (``shuffled 47.1 (selectivity +6.2)``)."""
    from probing.kinds import KINDS

    found: dict[tuple, dict[str, dict[str, list[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for row in long_rows:
        if row["kind"] != "probe" or row["control"] in ("", "none") or row["applied_to"] or row["probe"] not in KINDS:
            continue
        if row["metric"] in (KINDS[row["probe"]].headline, "selectivity"):
            key = tuple(row[column] or ("fixed" if column == "split" else "") for column in CONTROL_KEY)
            found[key][row["control"]][row["metric"]].append(float(row["value"]))
    cells = {}
    for key, controls in found.items():
        shown = []
        for control, metrics in sorted(controls.items()):
            scores = [values for metric, values in metrics.items() if metric != "selectivity"]
            score = _mean(scores[0]) if scores else None
            selectivity = _mean(metrics.get("selectivity", []))
            shown.append(f"{control} {number(score)}" + (f" (selectivity {number(selectivity, sign=True)})" if selectivity is not None else ""))
        cells[key] = "; ".join(shown)
    return cells


UNJOINED_GAPS_NOTE = "E(female, male) of every language no probe row joined (their reports: `behaviour/`)."
UNJOINED_GAPS_HEADER = ["model", "dataset", "language", "error rate (speakers)", "E", "95 % CI of E", "Δrel"]


def unjoined_gaps(long_rows: list[dict], gap_rows: list[dict]) -> list[list[str]]:
    """The female-male gaps no probe joined (absent from ``f1_vs_gap.csv``), as rows of
    :data:`UNJOINED_GAPS_HEADER`: error rates with speakers, E with its interval, Δrel."""
    joined = {(row["model"], row["dataset"], row["language"]) for row in gap_rows if (row.get("task") or GENDER_TASK) == GENDER_TASK}
    entries: dict[tuple, dict[str, str]] = defaultdict(dict)
    for row in long_rows:
        key = (row["model"], row["dataset"], row["language"])
        if row["kind"] == "asr_gap" and (row["task"] or GENDER_TASK) == GENDER_TASK and key not in joined:
            entries[key][row["metric"]] = row["value"]
    rows = []
    for (model, dataset, language), metrics in sorted(entries.items()):
        rates = ", ".join(
            f"{group} {number(metrics.get(f'groups.{group}.error_rate'))} ({_count(metrics.get(f'groups.{group}.speakers'))} spk)"
            for group in ("female", "male")
        )
        interval = "n/a" if metrics.get("ci95_low") in (None, "") else f"{number(metrics['ci95_low'], sign=True)} .. {number(metrics['ci95_high'], sign=True)}"
        rows.append([model, dataset, language, rates, number(metrics.get("gap_relative"), sign=True), interval, number(metrics.get("delta_rel"), sign=True)])
    return rows


def why_lines(collected: dict, gap_rows: list[dict]) -> list[str]:
    """Why the unmatched probes met no gap, and what would join them (:func:`experiments.study.joins.why_unjoined`)."""
    unmatched = collected["unmatched"]
    probes = unmatched.get("probes_without_gap") or []
    gaps = [*(unmatched.get("gaps_without_probe") or []), *({k: row[k] for k in ("model", "dataset", "language", "task")} for row in gap_rows)]
    reasons = why_unjoined(probes, gaps) if probes and gaps else []
    return [f"- why: {reason}" for reason in reasons]


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _count(value) -> str:
    return "?" if value in (None, "") else str(int(float(value)))
