"""The study's headline joins as tables (``python -m experiments.collect``).

Probe rows (``experiments.probe``) and behaviour results (``experiments.asr_gap``,
``experiments.mustshe``, ``experiments.winomt``) are joined by what they are about, as each output
records it in its ``subject`` (the model label, dataset and language), never by a path:

- ``f1_vs_gap.csv``: one row per (model, dataset, language, site, task) of a per-position probe
  (``positional``: :attr:`probing.kinds.ProbeKind.per_position`) without control, F1_S averaged over its seeds, joined to that model's gap for that dataset and
  language (Attanasio et al. 2024). A gap joins the probes of the task named by its groups
  (``--groups female,male`` -> ``female-male``: E(female, male); ``--attribute age --groups young,old``
  -> ``attribute:age:young,old``, the task of ``probe --attribute age --groups young,old``, so an
  attribute's rows never join gender's). ``gap_relative`` is the estimate
  the gap report chose, named in ``gap_estimate`` (``resampled``: the paper's; ``full``);
  ``ci95_low`` / ``ci95_high`` are its speaker-bootstrap interval, of what ``ci95_of`` names
  (``relative_gap``: E, unless ``asr_gap --interval-of`` chose another comparison).
- Beside the probe's F1, both tables carry its controls (Hewitt & Liang 2019; :mod:`probing.controls`):
  ``f1_control_shuffled`` / ``f1_control_speaker``, the control run's score at the same key (F1_S;
  the applied F1 in ``f1_vs_mustshe.csv``) averaged over its seeds, and ``selectivity_shuffled`` /
  ``selectivity_speaker``. In ``f1_vs_gap.csv`` the selectivity is the control rows' own (the real
  labels' F1_S minus the control's, on the split the control was scored on: the same split for
  ``shuffled``, a within-speaker split for ``speaker``), averaged over seeds; in
  ``f1_vs_mustshe.csv`` it is the row's applied F1 minus the control's (both predict the same
  MuST-SHE store). Empty where no such control was run.
- ``f1_vs_mustshe.csv``: one row per (model, site, tgt_lang): the macro-F1 of an attention probe
  without control on the store it was applied to (``applied_f1_macro``, averaged over seeds), and
  category-1 gender accuracy on MuST-SHE (Fucci et al. 2025). A MuST-SHE result joins the probes of
  its model applied to a store of the same manifest (the ``manifest_sha256`` its transcription and
  the applied store recorded) or, where it does not know its manifest, the model's only applied store.
- ``f1_vs_patch.csv`` (with patch summaries, ``--patch``): one row per (model, dataset, language,
  site, split) of a per-position ``female-male`` probe without control (the seeds averaged as in
  ``f1_vs_gap.csv``) and per patch summary of that model, dataset and languages with that site: its
  cross and within effects and cross minus within with its speaker-bootstrap interval
  (``experiments.patch``'s ``OUT.summary.json``; the summary, not the rows, because it is per site
  already, its interval is the run's, and it counts only the run's current pairs). The summary's
  languages are spelled as a probe row spells its store's (sorted, joined with ``+``). A joint site
  (``A+B``: sites patched together) is in ``long.csv`` only (its ``site_role`` empty): no probe reads it.
- ``site_role`` (in all the tables): what the probed site is in its model, from the family's
  site table (:meth:`extract.families.base.Family.site_role`): ``final`` (the post-adapter output
  where the model has an adapter, ``encoder.final`` otherwise), ``pre_adapter``, ``final_variant``,
  ``layer``; ``decoder`` for a decoder-state store's sites (``experiments.decoder_states``: kept
  apart from the encoder's layers); ``baseline`` for the F0 baseline; empty for a store that
  records no known family.
  ``correlate --where site_role=final`` keeps one point per model, its last encoder-side site, as
  Fucci et al. 2025's Figure 1 does.
- ``long.csv``: every score (a patch summary's: per site, pairing and measure, ``kind`` ``patch``),
  one row per (kind, model, dataset, language, tgt_lang, site, probe, control, seed, task, split,
  applied_to, metric), with the file (and line) it came from. A p-value's row (metric ``p_value``,
  e.g. a gap's speaker-bootstrap p) has ``q_value``: Benjamini-Hochberg across every row of its kind
  and metric in the table (all models, datasets, languages, sites and tasks collected together:
  :mod:`experiments.results.multiple_testing`); other rows leave it empty. ``split`` is the probe's (``fixed``,
  ``stratified``: speakers shared between train and test, Attanasio et al.'s sampling; ``loso``:
  leave one speaker out; rows written before it read ``fixed``). The joins above take the ``fixed``
  and ``stratified`` rows, one table row per split (their ``split`` column), so a probe scored both
  ways is never averaged; ``f1_vs_gap.csv`` and ``f1_vs_patch.csv`` also take a key's ``loso`` rows
  where the probe was scored by leave-one-speaker-out only (the docs recommend LOSO for small
  corpora); other ``loso`` rows are in ``long.csv`` only.
- ``collect.json``: the inputs' identities (path and sha256), the tables written, every key that
  found no partner, and the probe rows left out (written before rows recorded their subject).

Two records claiming one key (two probe runs of one setting with different options, two gap
reports of one model, dataset and language, two patch summaries of one model, dataset, language and
task) are refused, naming both: :class:`CollectError`.
"""

from __future__ import annotations

import csv
import json
import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from experiments.results import inputs
from experiments.results.inputs import JOINED_SPLITS, LONG, PATCH_PROBE_TASK, CollectError, Document, PatchSite, Probe
from experiments.results.multiple_testing import q_values_by_family
from experiments.results.records import CONTROLLED, DEFAULT_COMPARISON, JOINT, F1VsGapRow, F1VsMustSheRow, F1VsPatchRow, columns
from extract.diskfull import naming_full_disk
from extract.provenance import file_identity, provenance
from extract.records import schema_version
from probing.data import DEFAULT_SPLIT
from probing.kinds import is_per_position

COLLECT_SCHEMA = schema_version("collect")  # collect.json's version (extract.records.FORMATS)
F1_VS_GAP = columns(F1VsGapRow)
F1_VS_MUSTSHE = columns(F1VsMustSheRow)
F1_VS_PATCH = columns(F1VsPatchRow)


@dataclass
class Collected:
    """The tables and the bookkeeping of :func:`collect`."""

    f1_vs_gap: list[dict] = field(default_factory=list)
    f1_vs_mustshe: list[dict] = field(default_factory=list)
    f1_vs_patch: list[dict] | None = None  # None without --patch: no table, so the outputs are those of a run before it existed
    long: list[dict] = field(default_factory=list)
    unmatched: dict[str, list[dict]] = field(default_factory=dict)
    skipped: list[dict] = field(default_factory=list)
    inputs: list[dict] = field(default_factory=list)

    def unmatched_summary(self) -> str:
        counts = [f"{len(items)} {name.replace('_', ' ')}" for name, items in self.unmatched.items() if items]
        return ", ".join(counts) or "none"


def _seed_groups(probes: Iterable[Probe], key) -> dict[tuple, list[Probe]]:
    groups: dict[tuple, list[Probe]] = defaultdict(list)
    for probe in probes:
        groups[key(probe)].append(probe)
    return groups


def _probe_site_cells(model: str, dataset, language, site: str, task: str, split: str, members) -> dict:
    """The probe side of a row joined per site (:class:`experiments.results.records.ProbeSiteCells`)."""
    return {
        "model": model,
        "dataset": dataset,
        "language": language,
        "site": site,
        "site_index": members[0].row.get("site_index"),
        "site_role": members[0].site_role,
        "task": task,
        "split": split,
        "f1_s": _mean(members, "f1_s"),
        "seeds": _seeds(members),
    }


def _site_order(row: dict) -> tuple:
    """A joined row's sites in forward order (a site without an index first), then by name."""
    return row["site_index"] if row["site_index"] is not None else -1, row["site"]


def _mean(probes: list[Probe], score: str) -> float | None:
    values = [inputs.finite_number(p.row.get(score)) for p in probes]
    return float(np.mean(values)) if values and None not in values else None


def _seeds(probes: list[Probe]) -> str:
    return " ".join(str(p.config["seed"]) for p in sorted(probes, key=lambda p: p.config["seed"]))


def _runs(probes: list[Probe]) -> str:
    return " ".join(p.row["run_id"] for p in sorted(probes, key=lambda p: p.config["seed"]))


def join_gaps(probes: Sequence[Probe], gaps: dict[tuple, tuple[Document, str, dict]], unmatched: dict[str, list[dict]]) -> list[dict]:
    """``f1_vs_gap.csv``'s rows (see the module docstring); the keys without a partner go to ``unmatched``."""
    groups = per_position_groups(probes)
    controls = control_groups([p for p in probes if is_per_position(p.config["probe"])], _gap_probe_key)
    rows, used = [], set()
    for (model, dataset, language, site, task, split), members in groups.items():
        gap_key = (model, dataset, language, task)
        if gap_key not in gaps:
            unmatched["probes_without_gap"].append(
                {"model": model, "dataset": dataset, "language": language, "site": site, "task": task, "split": split, "runs": _runs(members)}
            )
            continue
        used.add(gap_key)
        document, _, entry = gaps[gap_key]
        bootstrap = entry.get("bootstrap") or {}
        low, high = (bootstrap.get("ci95") or [None, None])[:2]
        rows.append(
            F1VsGapRow(
                **_probe_site_cells(model, dataset, language, site, task, split, members),
                gap_relative=entry.get("gap_relative"),
                gap_estimate=entry.get("gap_estimate"),
                ci95_low=low,
                ci95_high=high,
                ci95_of=bootstrap.get("ci95_of", DEFAULT_COMPARISON),
                probe_runs=_runs(members),
                gap_source=str(document),
                **control_cells(controls.get((model, dataset, language, site, task, split), {}), "f1_s"),
            ).to_dict()
        )
    for (model, dataset, language, task), (document, _, _) in gaps.items():
        if (model, dataset, language, task) not in used:
            unmatched["gaps_without_probe"].append({"model": model, "dataset": dataset, "language": language, "task": task, "source": str(document)})
    return sorted(rows, key=lambda r: (r["model"], str(r["dataset"]), r["language"], r["task"], r["split"], *_site_order(r)))


def per_position_groups(probes: Sequence[Probe]) -> dict[tuple, list[Probe]]:
    """The seeds of each per-position probe without control, by (model, dataset, language, site, task,
    split): the ``fixed`` and ``stratified`` rows, and a key's ``loso`` rows where it was scored by
    leave-one-speaker-out only (what ``f1_vs_gap.csv`` and ``f1_vs_patch.csv`` average)."""
    per_position = [p for p in probes if is_per_position(p.config["probe"]) and p.config["control"] == "none"]
    _refuse_two_kinds_per_key(per_position)
    groups = _seed_groups([p for p in per_position if p.split in JOINED_SPLITS], _gap_probe_key)
    scored_fixed = {key[:-1] for key in groups if key[-1] == DEFAULT_SPLIT}
    for key, members in _seed_groups([p for p in per_position if p.split == "loso"], _gap_probe_key).items():
        if key[:-1] not in scored_fixed:  # scored by leave-one-speaker-out only: those rows (a key scored both ways keeps its fixed rows)
            groups[key] = members
    return groups


def _refuse_two_kinds_per_key(probes: Sequence[Probe]) -> None:
    """``f1_vs_gap.csv`` has no probe column: rows of two per-position kinds at one of its keys would be
    averaged into one F1_S, so they are refused, naming one row of each."""
    first: dict[tuple, Probe] = {}
    for probe in probes:
        other = first.setdefault(_gap_probe_key(probe), probe)
        if other.config["probe"] != probe.config["probe"]:
            raise CollectError(
                f"{other} and {probe} are probes of two per-position kinds ({other.config['probe']}, {probe.config['probe']}) at one "
                "row of f1_vs_gap.csv; collect the rows of each kind separately"
            )


def _gap_probe_key(probe: Probe) -> tuple:
    """What a row of ``f1_vs_gap.csv`` is about: model, dataset, language, site, task and split."""
    return probe.subject["model"], probe.subject["dataset"], probe.subject["language"], probe.config["site"], probe.config["task"], probe.split


def _applied_key(probe: Probe) -> tuple:
    """What a row of ``f1_vs_mustshe.csv`` is about: model, site, task, the store applied to and split."""
    return probe.subject["model"], probe.config["site"], probe.config["task"], probe.applied_to, probe.split


def control_groups(probes: Iterable[Probe], key) -> dict[tuple, dict[str, list[Probe]]]:
    """The control runs among ``probes`` by ``key(probe)``, then by control (its seeds together)."""
    groups: dict[tuple, dict[str, list[Probe]]] = defaultdict(lambda: defaultdict(list))
    for probe in probes:
        if probe.config["control"] != "none":
            groups[key(probe)][probe.config["control"]].append(probe)
    return groups


def control_cells(controls: dict[str, list[Probe]], score: str, real: float | None = None) -> dict:
    """A joined row's ``f1_control_C`` and ``selectivity_C`` for each control C of :data:`CONTROLLED`
    (None where the key has no such run), as the module docstring defines them: without ``real`` the
    control rows' own selectivity, with ``real`` (the row's mean applied F1) ``real`` minus the control's."""
    cells = {}
    for control in CONTROLLED:
        members = controls.get(control) or []
        score_mean = _mean(members, score) if members else None
        if real is None:
            selectivity = _mean(members, "selectivity") if members else None
        else:
            selectivity = None if score_mean is None else real - score_mean
        cells |= {f"f1_control_{control}": score_mean, f"selectivity_{control}": selectivity}
    return cells


def join_mustshe(probes: Sequence[Probe], documents: Sequence[Document], unmatched: dict[str, list[dict]]) -> list[dict]:
    """``f1_vs_mustshe.csv``'s rows (see the module docstring); the keys without a partner go to ``unmatched``."""
    applied = [p for p in probes if p.row.get("applied_to") and "applied_f1_macro" in p.row]
    groups = _seed_groups([p for p in applied if p.config["control"] == "none"], _applied_key)
    controls = control_groups(applied, _applied_key)
    rows, used = [], set()
    for document in documents:
        subject = document.subject
        manifest = subject.get("manifest_sha256")
        candidates = {
            key: members
            for key, members in groups.items()
            if key[0] == subject["model"] and (manifest is None or (members[0].row["applied_to"].get("subject") or {}).get("manifest_sha256") == manifest)
        }
        by_site: dict[tuple, tuple] = {}
        for key, members in candidates.items():
            site = (key[1], key[2], key[4])
            if site in by_site:
                raise CollectError(
                    f"{document}: its model {subject['model']} has probes at {key[1]} applied to two stores ({by_site[site][0]} and {members[0]}) and "
                    "the MuST-SHE result records no manifest to choose between them; score transcribe's .jsonl with its settings file beside it"
                )
            by_site[site] = (members[0], members)
        if not candidates:
            unmatched["mustshe_without_probe"].append({"model": subject["model"], "tgt_lang": subject.get("tgt_lang"), "source": str(document)})
        category_1 = document.doc.get("category_1") or {}
        for key, members in candidates.items():
            used.add(key)
            rows.append(
                F1VsMustSheRow(
                    model=key[0],
                    site=key[1],
                    site_index=members[0].row.get("site_index"),
                    site_role=members[0].site_role,
                    split=key[4],
                    tgt_lang=subject.get("tgt_lang"),
                    applied_f1_macro=_mean(members, "applied_f1_macro"),
                    seeds=_seeds(members),
                    category_1_accuracy=category_1.get("accuracy"),
                    probe_runs=_runs(members),
                    mustshe_source=str(document),
                    **control_cells(controls.get(key, {}), "applied_f1_macro", _mean(members, "applied_f1_macro")),
                ).to_dict()
            )
    for key, members in groups.items():
        if key not in used:
            unmatched["applied_probes_without_mustshe"].append(
                {"model": key[0], "site": key[1], "task": key[2], "applied_to": key[3], "split": key[4], "runs": _runs(members)}
            )
    return sorted(rows, key=lambda r: (r["model"], str(r["tgt_lang"]), r["split"], *_site_order(r)))


def join_patch(probes: Sequence[Probe], sites: dict[tuple, list[PatchSite]], unmatched: dict[str, list[dict]]) -> list[dict]:
    """``f1_vs_patch.csv``'s rows (see the module docstring); the keys without a partner go to ``unmatched``."""
    rows, used = [], set()
    for (model, dataset, language, site, task, split), members in per_position_groups(probes).items():
        if task != PATCH_PROBE_TASK:
            continue
        partners = sites.get((model, dataset, language, site), [])
        if not partners:
            unmatched["probes_without_patch"].append(
                {"model": model, "dataset": dataset, "language": language, "site": site, "task": task, "split": split, "runs": _runs(members)}
            )
        for patch in partners:
            used.add((model, dataset, language, site))
            low, high = patch.interval
            rows.append(
                F1VsPatchRow(
                    **_probe_site_cells(model, dataset, language, site, task, split, members),
                    patch_task=patch.subject["task"],
                    frames=patch.document.doc.get("frames"),
                    cross_effect=patch.effect("cross"),
                    within_effect=patch.effect("within"),
                    cross_minus_within=patch.entry.get("cross_minus_within"),
                    ci95_low=low,
                    ci95_high=high,
                    probe_runs=_runs(members),
                    patch_source=str(patch.document),
                ).to_dict()
            )
    for key, partners in sites.items():
        if key not in used and JOINT not in key[3]:  # a joint site has no probe to find
            unmatched["patch_without_probe"] += [
                {"model": key[0], "dataset": key[1], "language": key[2], "site": key[3], "task": p.subject["task"], "source": str(p.document)} for p in partners
            ]
    return sorted(rows, key=lambda r: (r["model"], str(r["dataset"]), str(r["language"]), r["patch_task"], r["split"], *_site_order(r)))


def collect(
    probes: Sequence[str | Path],
    gaps: Sequence[str | Path] = (),
    mustshe: Sequence[str | Path] = (),
    winomt: Sequence[str | Path] = (),
    patch: Sequence[str | Path] = (),
) -> Collected:
    """The joins of the module docstring over these inputs (each file once, however spelled); any of
    the behaviour inputs may be empty (MuST-SHE results without gap reports, and the reverse). Patch
    summaries add ``f1_vs_patch.csv`` and their effects to ``long.csv``; without them both are as
    they were before ``--patch`` existed."""
    probe_paths, gap_paths, mustshe_paths, winomt_paths, patch_paths = (inputs.distinct(paths) for paths in (probes, gaps, mustshe, winomt, patch))
    every = [*probe_paths, *gap_paths, *mustshe_paths, *winomt_paths, *patch_paths]
    for path in every:
        if not path.is_file():
            raise CollectError(f"{path}: " + ("a folder; give the result files in it" if path.is_dir() else "no such file"))
    result = Collected(inputs=[file_identity(path) for path in every])
    result.unmatched = {name: [] for name in ("probes_without_gap", "gaps_without_probe", "applied_probes_without_mustshe", "mustshe_without_probe")}
    rows, result.skipped = inputs.read_probes(probe_paths)
    if not rows:
        raise CollectError(f"no probe row of {', '.join(map(str, probe_paths))} records its subject (rows written before it are left out); rerun the probes")
    inputs.check_probe_keys(rows)
    gap_documents = [inputs.read_document("asr_gap", path) for path in gap_paths]
    entries = inputs.gap_entries(gap_documents)
    mustshe_documents = [inputs.read_document("mustshe", path) for path in mustshe_paths]
    inputs.check_document_keys(mustshe_documents, "MuST-SHE results")
    winomt_documents = [inputs.read_document("winomt", path) for path in winomt_paths]
    inputs.check_document_keys(winomt_documents, "WinoMT results")
    sites = inputs.patch_sites([inputs.read_patch_summary(path) for path in patch_paths])
    result.f1_vs_gap = join_gaps(rows, entries, result.unmatched)
    result.f1_vs_mustshe = join_mustshe(rows, mustshe_documents, result.unmatched)
    if patch_paths:
        result.unmatched |= {"probes_without_patch": [], "patch_without_probe": []}
        result.f1_vs_patch = join_patch(rows, sites, result.unmatched)
    result.long = [line for probe in rows for line in inputs.probe_long_rows(probe)]
    result.long += [line for document, language, entry in entries.values() for line in inputs.gap_long_rows(document, language, entry)]
    result.long += [line for document in [*mustshe_documents, *winomt_documents] for line in inputs.behaviour_long_rows(document)]
    result.long += [line for partners in sites.values() for patch_site in partners for line in inputs.patch_long_rows(patch_site)]
    add_q_values(result.long)
    return result


def is_p_value(metric: str) -> bool:
    """Whether a ``long.csv`` metric is a p-value (``p_value``, or a dotted path ending in it)."""
    return metric == "p_value" or metric.endswith(".p_value")


def add_q_values(long_rows: list[dict]) -> None:
    """Each p-value row's Benjamini-Hochberg ``q_value``, one family per (kind, metric): e.g. every
    gap report's ``p_value`` across the models, datasets, languages and tasks collected together."""
    for row in long_rows:
        row["q_value"] = None
    q_values_by_family(long_rows, lambda row: (row["kind"], row["metric"]) if is_p_value(row["metric"]) else None, p_key="value")


def write_csv(rows: Sequence[dict], columns: Sequence[str], path: Path) -> Path:
    """``rows`` under a header of ``columns`` (None as an empty cell)."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns))
        writer.writeheader()
        writer.writerows([{column: "" if row.get(column) is None else row[column] for column in columns} for row in rows])
    return path


def read_csv(path: Path) -> list[dict]:
    """A table :func:`write_csv` wrote, as rows of strings (an empty cell for None)."""
    with Path(path).open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


COLLECTED_FILES = (
    "f1_vs_gap.csv",
    "f1_vs_mustshe.csv",
    "f1_vs_patch.csv",
    "long.csv",
    "collect.json",
)  # what write_collected may write (f1_vs_patch.csv: with patch summaries)


def collected_files(out: Path) -> list[Path]:
    """The files :func:`write_collected` may write in the folder ``out`` (``f1_vs_patch.csv`` with patch summaries only)."""
    return [out / name for name in COLLECTED_FILES]


def write_collected(result: Collected, out: Path) -> dict[str, Path]:
    """The tables (three, four with patch summaries) and ``collect.json`` in the folder ``out``, all or
    none: each is written under a temporary name and all are renamed once all are whole, so a failure
    (a full disk, named in one line with the file) leaves the tables of the run before as they were."""
    out.mkdir(parents=True, exist_ok=True)
    patched = {} if result.f1_vs_patch is None else {"f1_vs_patch": out / "f1_vs_patch.csv"}
    tables = {
        "f1_vs_gap": out / "f1_vs_gap.csv",
        "f1_vs_mustshe": out / "f1_vs_mustshe.csv",
        **patched,
        "long": out / "long.csv",
        "collect": out / "collect.json",
    }
    summary = {
        "schema": COLLECT_SCHEMA,
        "inputs": result.inputs,
        "tables": {name: {"path": str(path), "rows": len(getattr(result, name))} for name, path in tables.items() if name != "collect"},
        "unmatched": result.unmatched,
        "skipped_probe_rows": result.skipped,
        "provenance": provenance(),
    }
    writes = {
        "f1_vs_gap": lambda path: write_csv(result.f1_vs_gap, F1_VS_GAP, path),
        "f1_vs_mustshe": lambda path: write_csv(result.f1_vs_mustshe, F1_VS_MUSTSHE, path),
        "f1_vs_patch": lambda path: write_csv(result.f1_vs_patch, F1_VS_PATCH, path),
        "long": lambda path: write_csv(result.long, LONG, path),
        "collect": lambda path: path.write_text(json.dumps(summary, indent=2, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8"),
    }
    temporary = {name: path.with_name(f".{path.name}.tmp") for name, path in tables.items()}
    try:
        for name in tables:
            with naming_full_disk(tables[name], "no table of this run was written; the folder keeps the tables it had"):
                writes[name](temporary[name])
    except BaseException:
        for path in temporary.values():
            path.unlink(missing_ok=True)
        raise
    for name, path in tables.items():
        os.replace(temporary[name], path)
    return tables
