"""A study's correlations, figures and ``RESULTS.md``, generated from its collected tables only.

- ``results/correlations.json``: F1_S against the gap E over the (dataset, language) rows of
  ``f1_vs_gap.csv``, one entry per (model, dataset, site, task) (Attanasio et al. 2024 correlate 19
  languages of one model, dataset and site); the probe's applied F1 against MuST-SHE category-1
  accuracy over the rows of ``f1_vs_mustshe.csv`` at each model's final site (``site_role`` final:
  post-adapter, or the encoder output of a model without adapter) over models and directions, as
  Fucci et al. 2025's Figure 1 does (9 points; a model's pre- and post-adapter rows share one
  accuracy, so pooling them would correlate a site's F1 with another site's behaviour). A group
  that cannot be correlated (fewer than 3 rows, a constant column) keeps its ``n`` and says why
  in ``note``. The statistics are :mod:`experiments.results.correlation`'s. Each F1_S-E entry has
  ``q_value``, Benjamini-Hochberg across all of them (every model, dataset, site, task and split:
  a study of 34 layers tests hundreds of correlations; :mod:`experiments.results.multiple_testing`).
  The MuST-SHE correlation is clustered by model (its 9 points are 3 models x 3 directions): it
  adds the permutation over models (p >= 1/6 with 3), the r of the model means and the r within
  models, beside the paper's pooled r.
- ``figures/`` (PNG + PDF, listed in ``figures/figures.json``): per model and dataset, F1_S against
  E at the headline site (``report.site``, else the model's last site) and F1_S per site and
  language; per model, E per language with a panel per dataset; F1 on MuST-SHE against category-1
  accuracy at the final sites. Drawn by :mod:`experiments.reports.plots`.
- ``RESULTS.md``: the study, its code and inputs, the correlations, the headline rows and the figures,
  in the way ESPnet collects a recipe's results, and (``analyses``) the acoustic and lexical features'
  contrasts and correlations with E from ``features/feature_gaps-CORPUS.json``. It is rewritten
  whenever the tables change.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from experiments.results.collect import read_csv
from experiments.results.correlation import MIN_INTERVAL_UNITS, CorrelationError, correlate, read_columns
from experiments.results.multiple_testing import q_values_by_family
from experiments.results.records import CONTROLLED, F1VsMustSheRow, GapReport, read_table
from experiments.study import report_sections as sections
from experiments.study.schema import Study
from extract.attributes import task_file_name
from extract.provenance import file_identity, file_sha256, provenance
from extract.records import read_document, read_versioned, schema_version

SCHEMA = schema_version("study_tables")  # correlations.json and figures.json (extract.records.FORMATS)
GAP_KEY = ("model", "dataset", "site", "task", "split")  # split: fixed (speaker-disjoint or the manifest's) or stratified (the paper's)
MUSTSHE_WHERE = {"site_role": "final"}  # Fucci et al. 2025, Figure 1: each model's last encoder-side site
MUSTSHE_CLUSTER = "model"  # Figure 1's 9 points are 3 models x 3 directions: the models are the independent units


def _files(layout) -> dict[str, Path]:
    results = layout.results
    return {
        "f1_vs_gap": results / "f1_vs_gap.csv",
        "f1_vs_mustshe": results / "f1_vs_mustshe.csv",
        "long": results / "long.csv",
        "collect": results / "collect.json",
        "correlations": results / "correlations.json",
        "figures": layout.figures / "figures.json",
    }


def stage_files(stage: str, layout, study: Study) -> tuple[list[Path], list[Path]]:
    """(inputs, outputs) of ``correlate``, ``figures`` or ``report``."""
    files = _files(layout)
    if stage == "correlate":
        return [files["f1_vs_gap"], files["f1_vs_mustshe"]], [files["correlations"]]
    if stage == "figures":
        return [files["long"], files["correlations"], *_gap_documents(layout), study.path], [files["figures"]]  # the study: report.site
    return [files["collect"], files["correlations"], files["figures"], study.path, *feature_gap_documents(layout, study)], [layout.results_md]


def feature_gap_documents(layout, study: Study) -> list[Path]:
    """The ``feature_gaps`` results the report shows (those of the analysed corpora)."""
    return [layout.feature_gaps(corpus) for corpus in study.analysed("feature_gaps")]


def _rows(path: Path) -> list[dict]:
    return read_csv(path) if path.exists() else []


def _number(value) -> float | None:
    """A table cell (text) or a JSON number as a float; empty, null or not a number: None."""
    if value is None or value == "":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _correlation(path: Path, x: str, y: str, label: str, where: dict[str, str], cluster_by: str | None = None) -> dict:
    """The correlation of ``x`` and ``y`` over the rows ``where`` selects; with ``cluster_by``, also
    its cluster-aware statistics (``cluster_note`` instead where the clusters cannot be permuted,
    e.g. a model missing a direction)."""
    xs, ys, _, dropped = read_columns(path, x, y, label, where)
    try:
        result = correlate(xs, ys) | {"dropped_rows": dropped}
    except CorrelationError as error:
        return {"n": len(xs), "dropped_rows": dropped, "note": str(error)}
    if cluster_by is None:
        return result
    clusters = read_columns(path, x, y, cluster_by, where)[2]
    try:
        return correlate(xs, ys, clusters=clusters) | {"dropped_rows": dropped, "cluster_by": cluster_by}
    except CorrelationError as error:
        return result | {"cluster_by": cluster_by, "cluster_note": str(error)}


def write_correlations(layout, study: Study) -> Path:
    files = _files(layout)
    gap_rows = _rows(files["f1_vs_gap"])
    groups: dict[tuple, int] = {}
    for row in gap_rows:
        key = tuple(row[name] for name in GAP_KEY)
        groups[key] = int(row["site_index"]) if row.get("site_index") else -1
    by_gap = []
    for key, site_index in sorted(groups.items(), key=lambda item: (item[0][0], item[0][1], item[0][3], item[0][4], item[1], item[0][2])):
        where = dict(zip(GAP_KEY, key))
        statistics = _correlation(files["f1_vs_gap"], "f1_s", "gap_relative", "language", where)
        by_gap.append(where | {"site_index": site_index, "x": "f1_s", "y": "gap_relative"} | statistics)
    q_values_by_family(by_gap, lambda entry: "f1_vs_gap" if "p_value" in entry else None)
    mustshe = None
    if _rows(files["f1_vs_mustshe"]):
        mustshe = {"x": "applied_f1_macro", "y": "category_1_accuracy", "where": MUSTSHE_WHERE} | _correlation(
            files["f1_vs_mustshe"], "applied_f1_macro", "category_1_accuracy", "model,site,tgt_lang", MUSTSHE_WHERE, MUSTSHE_CLUSTER
        )
    inputs = [file_identity(path) for path in (files["f1_vs_gap"], files["f1_vs_mustshe"]) if path.exists()]
    document = {"schema": SCHEMA, "inputs": inputs, "provenance": provenance(), "f1_vs_gap": by_gap, "f1_vs_mustshe": mustshe}
    files["correlations"].write_text(json.dumps(document, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    return files["correlations"]


HEATMAP_LABEL = "probe F1_S (%), mean macro-F1\nover speech positions; line: chance"
SPLIT_WORDS = {  # a figure's title, of the probe's split (probing.run.ProbeConfig.split)
    "fixed": "speaker-disjoint split",
    "loso": "leave-one-speaker-out",
    "stratified": "stratified split: speakers shared by train and test",
}


def headline_sites(gap_rows: list[dict], study: Study) -> dict[tuple[str, str], str]:
    """(model, dataset) -> the site of its headline scatter: ``report.site`` where the rows have it,
    else the last site (highest ``site_index``)."""
    sites: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
    for row in gap_rows:
        sites[(row["model"], row["dataset"])][row["site"]] = int(row["site_index"]) if row.get("site_index") else -1
    wanted = study.report.get("site")
    return {key: wanted if wanted in found else max(found, key=lambda site: (found[site], site)) for key, found in sites.items()}


def _gap_documents(layout) -> list[Path]:
    return sorted((layout.out / "behaviour").glob("*/gap-*.json"))


def write_figures(layout, study: Study) -> Path:
    from experiments.reports import plots

    files, figures = _files(layout), []
    gap_rows = _rows(files["f1_vs_gap"])
    correlations = read_versioned(files["correlations"], "study_tables")
    fits = {tuple(entry[name] for name in GAP_KEY): entry for entry in correlations["f1_vs_gap"]}
    for (model, dataset), site in sorted(headline_sites(gap_rows, study).items()):
        chosen = [row for row in gap_rows if (row["model"], row["dataset"], row["site"]) == (model, dataset, site)]
        for task, split in sorted({(row["task"], row["split"]) for row in chosen}):
            rows = [
                row
                for row in chosen
                if (row["task"], row["split"]) == (task, split) and _number(row["f1_s"]) is not None and _number(row["gap_relative"]) is not None
            ]
            fit = fits.get((model, dataset, site, task, split), {})
            name = f"f1_vs_gap-{model}-{dataset}" + ("" if task == "female-male" else f"-{task_file_name(task)}") + ("" if split == "fixed" else f"-{split}")
            stem = layout.figures / name
            paths = plots.scatter_with_fit(
                [_number(row["f1_s"]) for row in rows],
                [_number(row["gap_relative"]) for row in rows],
                [row["language"] for row in rows],
                fit if "pearson_r" in fit else None,
                plots.axis_label("f1_s"),
                plots.axis_label("gap_relative"),
                stem,
                title=f"{model} on {dataset}, site {site}\n{SPLIT_WORDS.get(split, f'{split} split')}",
                reason=fit.get("note", ""),
            )
            figures.append(
                {"kind": "f1_vs_gap", "model": model, "dataset": dataset, "site": site, "task": task, "split": split, "paths": [p.name for p in paths]}
            )
    figures += _site_heatmaps(layout, plots)
    figures += _gap_bars(layout, plots)
    mustshe_rows = read_table(files["f1_vs_mustshe"], F1VsMustSheRow) if files["f1_vs_mustshe"].exists() else []
    if mustshe_rows:
        final = [row for row in mustshe_rows if _final(row.to_dict())]
        fit = correlations.get("f1_vs_mustshe")
        xlabel, ylabel = "probe F1 on MuST-SHE speakers (%)", "category-1 gender accuracy (%)"
        paths = plots.f1_vs_mustshe(final, fit, xlabel, ylabel, layout.figures / "f1_vs_mustshe", title="final sites")
        figures.append({"kind": "f1_vs_mustshe", "paths": [p.name for p in paths]})
    files["figures"].parent.mkdir(parents=True, exist_ok=True)
    files["figures"].write_text(json.dumps({"schema": SCHEMA, "figures": figures}, indent=2) + "\n", encoding="utf-8")
    return files["figures"]


def _final(row: dict) -> bool:
    return all(row.get(column) == value for column, value in MUSTSHE_WHERE.items())


def _site_heatmaps(layout, plots) -> list[dict]:
    """F1_S per site (columns) and language (rows) of each model and dataset, per-position probes
    (``positional``) not applied elsewhere, the mean over seeds (from ``long.csv``), each control
    as a row of its own under its language's (``fr: shuffled control``): the fixed-split rows, or
    those of one other split where a model and dataset has no fixed one (never two averaged; the
    title names the split)."""
    from probing.kinds import is_per_position

    values: dict[tuple[str, str, str], dict[tuple[str, str], list[float]]] = defaultdict(lambda: defaultdict(list))
    order: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
    for row in _rows(_files(layout)["long"]):
        if row["kind"] != "probe" or not is_per_position(row["probe"]) or row["metric"] != "f1_s" or row["applied_to"]:
            continue
        condition = row["language"] if row["control"] in ("", "none") else f"{row['language']}: {row['control']} control"
        values[(row["model"], row["dataset"], row["split"] or "fixed")][(row["site"], condition)].append(float(row["value"]))
        order[(row["model"], row["dataset"])][row["site"]] = int(row["site_index"]) if row.get("site_index") else -1
    figures = []
    for (model, dataset, split), cells in sorted(values.items()):
        if split != "fixed" and (model, dataset, "fixed") in values:
            continue
        scores = {cell: sum(found) / len(found) for cell, found in cells.items()}
        sites = sorted(order[(model, dataset)], key=lambda site: (order[(model, dataset)][site], site))
        languages = sorted({language for _, language in scores})
        title = f"{model} on {dataset}\n{SPLIT_WORDS.get(split, f'{split} split')}"
        paths = plots.site_heatmap(
            scores,
            sites,
            languages,
            layout.figures / f"f1_s-{model}-{dataset}",
            label=HEATMAP_LABEL,
            title=title,
            xlabel="site",
            ylabel="language (and control)",
            chance=50.0,
        )
        figures.append({"kind": "f1_s_by_site", "model": model, "dataset": dataset, "paths": [p.name for p in paths]})
    return figures


def _gap_bars(layout, plots) -> list[dict]:
    """E per language, a panel per dataset, one figure per model (its gap reports merged per dataset)."""
    merged: dict[str, dict[str, dict]] = defaultdict(dict)
    for path in _gap_documents(layout):
        report = read_document(path, GapReport)
        model, dataset = path.parent.name, report.subject.get("dataset") or "?"
        merged[model].setdefault(dataset, {"languages": {}})["languages"].update(report.languages)
    figures = []
    for model, results in sorted(merged.items()):
        paths = plots.gap_bars(dict(sorted(results.items())), layout.figures / f"gaps-{model}", title=model)
        figures.append({"kind": "gaps", "model": model, "paths": [p.name for p in paths]})
    return figures


# --- RESULTS.md ------------------------------------------------------------------------------------


def _cell(value, digits: int = 2, sign: bool = False) -> str:
    number = _number(value)
    if number is None:
        return "n/a"
    return f"{number:+.{digits}f}" if sign else f"{number:.{digits}f}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|", *("| " + " | ".join(row) + " |" for row in rows)]


def _interval(low, high, sign: bool = True) -> str:
    return "n/a" if _number(low) is None or _number(high) is None else f"{_cell(low, sign=sign)} .. {_cell(high, sign=sign)}"


def write_results_md(layout, study: Study) -> Path:
    files = _files(layout)
    collected = read_versioned(files["collect"], "collect")
    correlations = read_versioned(files["correlations"], "study_tables")
    figures = read_versioned(files["figures"], "study_tables")["figures"]
    code = provenance()
    lines = [
        f"# {study.name}: results",
        "",
        f"Generated by `python -m experiments.study run {study.path.name}` from the study's collected tables (`results/`); "
        "a rerun rewrites it when they change. Scores are in percent.",
        "",
        f"- study file: `{study.path.name}` (sha256 `{file_sha256(study.path)[:16]}`)",
        f"- code: speech-gender-probing {code['package_version']}, git `{code['git_commit']}`",
        "- models: " + "; ".join(_model(model) for model in study.models),
        "- corpora: " + "; ".join(f"{c.name} ({c.task}: {', '.join(part.key for part in c.parts)})" for c in study.corpora),
        f"- tables: `results/f1_vs_gap.csv` ({collected['tables']['f1_vs_gap']['rows']} rows), "
        f"`results/f1_vs_mustshe.csv` ({collected['tables']['f1_vs_mustshe']['rows']} rows), `results/long.csv` "
        f"({collected['tables']['long']['rows']} scores), `results/correlations.json`",
        "",
    ]
    lines += sections.definitions()
    lines += _gap_section(files, correlations, study)
    if unjoined := sections.unjoined_gaps(_rows(files["long"]), _rows(files["f1_vs_gap"])):
        lines += ["## Gaps without a probe", "", sections.UNJOINED_GAPS_NOTE, "", *_table(sections.UNJOINED_GAPS_HEADER, unjoined), ""]
    lines += _other_gaps_section(files)
    lines += _probe_section(files)
    lines += _mustshe_section(files, correlations)
    lines += _features_section(layout, study)
    lines += ["## Figures", ""] + [f"- `{figure['kind']}`: " + ", ".join(f"[{name}](figures/{name})" for name in figure["paths"]) for figure in figures]
    unmatched = {name: items for name, items in collected["unmatched"].items() if items}
    lines += ["", "## Unmatched", ""]
    lines += [f"- {len(items)} {name.replace('_', ' ')} (listed in `results/collect.json`)" for name, items in unmatched.items()] or ["- none"]
    lines += sections.why_lines(collected, _rows(files["f1_vs_gap"]))
    layout.results_md.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return layout.results_md


def _model(model) -> str:
    return f"{model.name} ({model.family} {model.checkpoint or 'default checkpoint'}{', random init' if model.random_init else ''})"


def _gap_section(files: dict, correlations: dict, study: Study) -> list[str]:
    entries = correlations["f1_vs_gap"]
    if not entries:
        return []
    lines = [
        "## Probe F1_S against the ASR gap E (Attanasio et al. 2024)",
        "",
        "F1_S: positional probe without control, mean F1 over the speech positions and the seeds. E(A, B): relative gap of the "
        "error rates (the gap report's estimate). One correlation per model, dataset, site and split over the languages. Split "
        "`stratified`: each speaker's utterances spread over train and test (the paper's sampling, speakers shared); `fixed`: "
        "speaker-disjoint (or the manifest's splits), the stricter variant.",
        "",
    ]
    rows = []
    for entry in entries:
        stats = (
            [_cell(entry["pearson_r"], 3, True), _r_interval(entry["ci95_r"], entry.get("ci95_note")), f"{entry['p_value']:.3g}", _q(entry.get("q_value"))]
            + [f"{entry['p_permutation']:.3g}", _cell(entry["r2"], 3)]
            if "pearson_r" in entry
            else [entry["note"], "", "", "", "", ""]
        )
        task = "" if entry["task"] == "female-male" else f" ({entry['task']})"
        rows.append([entry["model"], entry["dataset"], entry["site"] + task, entry["split"], str(entry["n"]), *stats])
    lines += _table(["model", "dataset", "site", "split", "n", "Pearson r", "95 % CI of r", "p", "q", "permutation p", "R²"], rows)
    tested = sum(1 for entry in entries if entry.get("q_value") is not None)
    lines += [
        "",
        f"q: Benjamini-Hochberg across the {tested} correlations of this table (every model, dataset, site, task and split); "
        f"{SIGNIFICANT} marks q < {Q_LEVEL}: read significance from q, not p. Permutation p: the share of orders of E over the "
        "languages whose |r| reaches the observed one (every order up to 10 000 of them, at least 1/n!: 1/6 for 3 languages; else "
        f"10 000 random ones). The 95 % CI of r is a bootstrap over the languages, not meaningful with fewer than {MIN_INTERVAL_UNITS}.",
    ]
    gap_rows = _rows(files["f1_vs_gap"])
    for (model, dataset), site in sorted(headline_sites(gap_rows, study).items()):
        chosen = [row for row in gap_rows if (row["model"], row["dataset"], row["site"]) == (model, dataset, site)]
        lines += ["", f"### {model} on {dataset} at {site}", ""]
        table, notes, failing = [], [], []
        for row in chosen:
            entry = _gap_entry(row)
            first, second = entry.get("groups_compared") or ("A", "B")
            rates = entry.get("groups") or {}
            metric = (entry.get("metric") or "error rate").upper()
            note = (entry.get("bootstrap") or {}).get("ci95_note")
            if note:
                notes.append(f"{row['language']}: {note}")
            first_rate, second_rate = ((rates.get(group) or {}).get("error_rate") for group in (first, second))
            fails = all_fail(first_rate, second_rate)
            if fails:
                failing.append(row["language"])
            table.append(
                [row["language"], row["task"], row.get("split") or "fixed", _cell(row["f1_s"])]
                + [f"{metric} {first} {_cell(first_rate)}, {second} {_cell(second_rate)}"]
                + [_cell(row["gap_relative"], sign=True) + (" ‡" if fails else ""), row["gap_estimate"] or "n/a"]
                + [_interval(row["ci95_low"], row["ci95_high"]) + (" †" if note else ""), row["seeds"]]
                + [_control(row, control) for control in CONTROLLED]
            )
        controls = [f"{control} control: F1_S (selectivity)" for control in CONTROLLED]
        lines += _table(["language", "task", "split", "F1_S", "error rate per group", "E", "estimate", "95 % CI of E", "probe seeds", *controls], table)
        lines += ["", "† unreliable interval: " + "; ".join(notes) + "."] if notes else []
        lines += ["", f"‡ {', '.join(failing)}: {FAILING_NOTE}"] if failing else []
    return lines + [""]


SIGNIFICANT, Q_LEVEL = "*", 0.05


def _q(q) -> str:
    """A q-value, marked when significant."""
    return "n/a" if q is None else f"{q:.3g}" + (f" {SIGNIFICANT}" if q < Q_LEVEL else "")


def _r_interval(interval, note: str | None) -> str:
    """An interval of r, or why it means nothing (``not meaningful: 3 rows < 10``)."""
    return f"not meaningful: {note.split(':')[0]}" if note else _interval(interval[0], interval[1])


def _control(row: dict, control: str) -> str:
    """A joined row's control score with its selectivity, ``50.00 (+25.00)``; ``none run`` without."""
    score = _number(row.get(f"f1_control_{control}"))
    return "none run" if score is None else f"{_cell(score)} ({_cell(row.get(f'selectivity_{control}'), sign=True)})"


FAILING_NOTE = "both groups' error rates are 100 % or more: the model fails for everyone there, so E compares no errors and says nothing about a gap."


def all_fail(first_rate, second_rate) -> bool:
    """Whether both groups' error rates (percent) are 100 or more: an E of such a language (often 0)
    is no gap (a model that outputs nothing, or loops, for everyone)."""
    return first_rate is not None and second_rate is not None and min(first_rate, second_rate) >= 100


def _gap_entry(row: dict) -> dict:
    """The gap report's entry for a ``f1_vs_gap.csv`` row's language (its error rates per group and the
    interval's note), with ``groups_compared`` (A, B) from its settings; {} if the report is gone."""
    path = Path(row.get("gap_source") or "")
    if not path.is_file():
        return {}
    report = read_document(path, GapReport)
    entry = dict((report.body.get("languages") or {}).get(row["language"]) or {})
    groups = (report.body.get("settings") or {}).get("groups")
    return entry | ({"groups_compared": tuple(groups)} if groups else {})


PROBES_SHOWN = 40  # rows of RESULTS.md's table of probe scores without a gap (every score is in long.csv)


def _probe_section(files: dict) -> list[str]:
    """The probe scores no gap was joined to (other kinds, sites or languages without a gap, a study
    without behaviour): the headline of each kind, without control, mean over seeds, from long.csv."""
    from probing.kinds import KINDS, is_per_position

    joined = {(row["model"], row["dataset"], row["language"], row["site"], row["task"], row.get("split") or "fixed") for row in _rows(files["f1_vs_gap"])}
    scores: dict[tuple, list[float]] = defaultdict(list)
    for row in _rows(files["long"]):
        if (
            row["kind"] != "probe"
            or row["control"] != "none"
            or row["applied_to"]
            or row["probe"] not in KINDS
            or row["metric"] != KINDS[row["probe"]].headline
        ):
            continue
        key = (row["model"], row["dataset"], row["language"], row["site"], row["task"], row["split"] or "fixed", row["probe"], row["metric"])
        if is_per_position(row["probe"]) and key[:6] in joined:  # its row of f1_vs_gap.csv shows it
            continue
        scores[key].append(float(row["value"]))
    if not scores:
        return []
    controls = sections.control_cells(_rows(files["long"]))
    rows = [
        [*key[:4], key[6], key[5], "F1_S" if key[7] == "f1_s" else "F1", _cell(sum(found) / len(found)), str(len(found))]
        + [controls.get((*key[:3], key[3], key[4], key[5], key[6]), "none run")]
        for key, found in sorted(scores.items())
    ]
    lines = ["## Probe scores without a gap", "", "Each probe kind's headline without control, mean over seeds (every score: `results/long.csv`).", ""]
    lines += _table(["model", "dataset", "language", "site", "probe", "split", "score", "value", "seeds", "controls (selectivity)"], rows[:PROBES_SHOWN])
    if len(rows) > PROBES_SHOWN:
        lines += ["", f"... and {len(rows) - PROBES_SHOWN} more in `results/long.csv`."]
    return lines + [""]


def _other_gaps_section(files: dict) -> list[str]:
    """E of the gap comparisons other than female-male (e.g. other-male, Attanasio et al. 2024 §4.2), from
    ``long.csv``; a gap of three groups or more, each against the last, one line per comparison
    (``comparisons.A.gap_relative``), named ``attribute:NAME: A-LAST (of K groups)`` rather than by
    its task, whose K groups could fill the table."""
    rows = []
    for row in _rows(files["long"]):
        if row["kind"] != "asr_gap" or not row["task"] or row["task"] == "female-male":
            continue
        if row["metric"] == "gap_relative":
            rows.append(row | {"groups": row["task"]})
        else:
            *compared, reference = groups = _gap_groups(row["task"])
            group = next((group for group in compared if row["metric"] == f"comparisons.{group}.gap_relative"), None)
            if group is not None:
                attribute = f"attribute:{row['task'].split(':', 2)[1]}: " if row["task"].startswith("attribute:") else ""
                rows.append(row | {"groups": f"{attribute}{group}-{reference} (of {len(groups)} groups)"})
    if not rows:
        return []
    lines = ["## Other gap comparisons", "", "E(A, B) for the groups named (positive: B is recognised better), per model, dataset and language.", ""]
    ordered = sorted(rows, key=lambda row: (row["groups"], row["model"], row["dataset"], row["language"]))
    lines += _table(
        ["groups (A-B)", "model", "dataset", "language", "E"],
        [[row["groups"], row["model"], row["dataset"], row["language"], _cell(row["value"], sign=True)] for row in ordered],
    )
    return lines + [""]


def _gap_groups(task: str) -> list[str]:
    """The groups a gap's task names (experiments.results.records.gap_task): ``attribute:NAME:A,B,C`` or ``A-B``."""
    if task.startswith("attribute:"):
        return task.split(":", 2)[-1].split(",")
    return task.split("-")


def _mustshe_section(files: dict, correlations: dict) -> list[str]:
    rows = _rows(files["f1_vs_mustshe"])
    if not rows:
        return []
    lines = [
        "## Probe F1 on MuST-SHE speakers against category-1 gender accuracy (Fucci et al. 2025)",
        "",
        "Applied F1: the attention probe, trained elsewhere, predicting the MuST-SHE speakers (macro F1, mean over seeds). "
        "The correlation takes each model's final site (site role `final`: post-adapter, or the encoder output of a model "
        "without adapter), as the paper's Figure 1; the other sites are listed, not correlated.",
        "",
    ]
    controls = [f"{control} control: applied F1 (selectivity)" for control in CONTROLLED]
    lines += _table(
        ["model", "site", "site role", "target", "applied F1", "category-1 accuracy", *controls],
        [
            [row["model"], row["site"], row.get("site_role") or "n/a", row["tgt_lang"], _cell(row["applied_f1_macro"]), _cell(row["category_1_accuracy"])]
            + [_control(row, control) for control in CONTROLLED]
            for row in rows
        ],
    )
    fit = correlations.get("f1_vs_mustshe") or {}
    if "pearson_r" in fit:
        lines += [
            "",
            f"Final sites: Pearson r {_cell(fit['pearson_r'], 3, True)} (p {fit['p_value']:.3g}, 95 % CI "
            f"{_r_interval(fit['ci95_r'], fit.get('ci95_note'))}), R² {_cell(fit['r2'], 3)}, n = {fit['n']}: the paper's statistic, "
            "which treats the points as independent.",
        ]
        lines += ["", cluster_sentence(fit)] if "n_clusters" in fit or "cluster_note" in fit else []
    elif fit:
        lines += ["", f"No correlation at the final sites: {fit['note']} (n = {fit['n']})."]
    return lines + [""]


def cluster_sentence(fit: dict) -> str:
    """What the cluster-aware statistics of a correlation say (``experiments.results.correlation``)."""
    if "cluster_note" in fit:
        return f"No cluster-aware statistics by {fit['cluster_by']}: {fit['cluster_note']}."
    permutation, k, by = fit["permutation"], fit["n_clusters"], fit["cluster_by"]
    intervals = (
        f"Cluster-bootstrap intervals not meaningful: {k} clusters < {MIN_INTERVAL_UNITS}."
        if fit.get("ci95_cluster_note")
        else f"Cluster-bootstrap 95 % CIs: r {_interval(*fit['ci95_r_cluster'])}, between {_interval(*fit['ci95_r_between'])}, "
        f"within {_interval(*fit['ci95_r_within'])}."
    )
    between = "n/a" if fit["r_between"] is None else _cell(fit["r_between"], 3, True)
    within = "n/a" if fit["r_within"] is None else _cell(fit["r_within"], 3, True)
    return (
        f"The {fit['n']} points are {k} clusters by {by} ({', '.join(fit['clusters'])}), and the clusters are the independent units: "
        f"moving each {by}'s y values as a block against the others' x values ({permutation['method']}, {permutation['arrangements']} orders) "
        f"gives permutation p {fit['p_permutation']:.3g}, where the smallest p {k} clusters allow is {fit['p_permutation_floor']:.3g}"
        + (f" (no test over {k} clusters reaches p < 0.01)" if fit["p_permutation_floor"] >= 0.01 else "")
        + f". r of the {k} cluster means {between}; r within clusters (each value minus its cluster's mean) {within}. {intervals}"
    )


HEADLINE_FEATURES = ("f0_mean_hz", "intensity_mean_db", "rate_tokens_per_second", "rate_nuclei_per_second", "lexical_density", "entities")


def _features_section(layout, study: Study) -> list[str]:
    """Attanasio et al. 2024, section 5: per corpus, how many languages' groups differ in each headline
    feature (after the correction), and each feature's group difference correlated with E over the
    languages, per model. Every feature and statistic: the ``feature_gaps`` JSON and its tables."""
    documents = [(path, json.loads(path.read_text(encoding="utf-8"))) for path in feature_gap_documents(layout, study) if path.exists()]
    if not documents:
        return []
    settings = documents[0][1]["settings"]
    a, b = settings["groups"]
    lines = [
        "## Acoustic and lexical features against the gap (Attanasio et al. 2024, section 5)",
        "",
        f"Features of each record (acoustic: Praat's mean F0 and intensity, tokens and syllable nuclei per second of speech; "
        f"lexical: the reference text's POS counts, named entities, lexical density), contrasted between {a} and {b} per "
        f"dataset and language ({settings['t_test']}'s t-test, Mann-Whitney U; {settings['correction']}; unit: {settings['unit']}), "
        f"and each feature's group difference ({a} − {b}) correlated with E({a}, {b}) over the languages of a dataset and model. "
        "Every feature and statistic: `features/feature_gaps-CORPUS.json`, `.contrasts.csv`, `.setups.csv`.",
        "",
    ]
    contrast_rows, correlation_rows, unanalysed = [], [], []
    for path, document in documents:
        contrasts = document["contrasts"]
        dataset = contrasts[0]["dataset"] if contrasts else path.stem.removeprefix("feature_gaps-")
        for feature in (name for name in HEADLINE_FEATURES if name in document["settings"]["features"]):
            rows = [row for row in contrasts if row["feature"] == feature and row["p_t"] is not None]  # tested: values in both groups
            differing = [row for row in rows if row["p_t_adjusted"] is not None and row["p_t_adjusted"] < 0.05]
            higher = sum(1 for row in differing if (row["difference"] or 0) > 0)
            contrast_rows.append([dataset, feature, f"{len(differing)} of {len(rows)}", f"{higher} of {len(differing)}"])
        for entry in document.get("correlations") or []:
            feature = entry["feature"].removeprefix("diff_")
            if entry["dataset"] == "all" or feature not in HEADLINE_FEATURES:
                continue
            stats = [_cell(entry["pearson_r"], 3, True), f"{entry['p_value']:.3g}"] if "pearson_r" in entry else [entry.get("note", "n/a"), ""]
            correlation_rows.append([entry["dataset"], entry["model"], feature, str(entry["setups"]), *stats])
        without = sorted(row["language"] for row in contrasts if row["feature"] == "lexical_density" and row["n_a"] + row["n_b"] == 0)
        unanalysed += [f"{dataset}: {', '.join(without)}"] if without else []
    lines += _table(["dataset", "feature", f"languages where {a} and {b} differ (t-test p < 0.05, corrected), of those tested", f"{a} higher"], contrast_rows)
    if correlation_rows:
        lines += ["", f"Group difference against E({a}, {b}) over languages (Pearson):", ""]
        lines += _table(["dataset", "model", "feature", "languages", "Pearson r", "p"], correlation_rows)
    else:
        lines += ["", "No gap report of these groups on the analysed corpora: no correlation with E."]
    lines += ["", "Languages without lexical features (their pipeline is null): " + "; ".join(unanalysed) + "."] if unanalysed else []
    return lines + [""]
