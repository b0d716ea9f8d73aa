"""Demo stage ``interventions``: erase or steer gender inside Whisper base's encoder and measure what follows.

On the demo corpus (synthetic voices), with the bundled Whisper base and the main demo's stores:

- files: LEACE at ``encoder.layer.2`` (a middle layer of six) and at ``encoder.final``, the
  random-concept control of equal rank at ``encoder.layer.2``, and mean-difference steering vectors
  toward each gender at ``encoder.layer.2`` (alpha 1: one gender's frame mean onto the other's), all
  fitted on the training split of the main ``whisper-base`` store (``experiments.erase fit``);
- (a) extraction again with the layer-2 eraser, at that layer and every later site, and per-position
  linear probes there (``--positions 250``, the demo's default) and mean-pooled linear probes; the
  random-concept store at layer 2; the attention probe on ``encoder.final`` of the erased store.
  "Before" rows of the per-position and attention probes are the main demo's.
- (b) ASR of the held-out speakers (the manifest's dev and test splits, never fitted on) without an
  edit, with the layer-2 eraser and with its random-concept control, all in the same batches: WER per
  language, per gender and E(F, M) with the speaker-bootstrap interval (1000 iterations, seed 0, as
  the main demo);
- (c) MuST-SHE en->es (Whisper base with Spanish forced, as the main demo): unedited, erased at layer 2, the
  random control, erased at ``encoder.final``, and steered toward the other gender (male speakers
  toward female, female toward male; two runs with ``intervene_gender``, in the main demo's batches):
  category-1 accuracy and the gender of each category-1 translation per speaker gender.

Everything goes under ``WORK/interventions``; a rerun skips finished files, stores, hypotheses,
probe rows and scores (a fitted file is refitted only when the store it was fitted on changed).
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import partial
from pathlib import Path

from experiments.demo.report import e_header, number_or_dash, render_lines
from experiments.demo.work import ATTENTION, extraction_jobs, find_config, held_out_manifest, probe_configs, transcription_jobs
from experiments.demo.work import log as demo_log
from experiments.reports import plots
from experiments.reports.plots import TRANSLATION_GENDERS
from experiments.results.records import GapReport, MustSheScores
from experiments.scoring.gaps import counts_path, gap_report, read_hypotheses, save_gap_report
from experiments.scoring.mustshe import save_scores, score_hypotheses, sentences_path
from extract.corpora.must_she import read_definition
from extract.interventions import InterventionError, load_intervention, store_content_hash
from extract.jobs import extract, transcribe
from extract.records import read_document, read_side_rows
from extract.store import ShardReader
from probing.erasure import fit
from probing.grid import run_all
from probing.results import load_rows
from probing.run import ProbeConfig

ERASED_SITE = "encoder.layer.2"
FINAL_SITE = "encoder.final"
POSITIONS = 250  # the demo's --positions default: its clips are under 5 s = 250 frames
GAP_SETTINGS = {"iterations": 1000, "seed": 0}  # as the main demo's gap reports
# name -> (site, method, steering target)
FILES = {
    "erase-layer2": (ERASED_SITE, "leace", None),
    "random-layer2": (ERASED_SITE, "random", None),
    "erase-final": (FINAL_SITE, "leace", None),
    "steer-to-female-layer2": (ERASED_SITE, "mean-diff", "female"),
    "steer-to-male-layer2": (ERASED_SITE, "mean-diff", "male"),
}
_log = partial(demo_log, stage="interventions")


def fitted_files(root: Path, store: Path) -> dict[str, Path]:
    """Every intervention file of the stage, fitted on ``store`` (kept when fitted on the store as it is)."""
    current = store_content_hash(store)
    paths = {}
    for name, (site, method, target) in FILES.items():
        path = root / "files" / f"{name}.safetensors"
        try:
            fresh = path.exists() and load_intervention(path).store.get("content_sha256") == current
        except InterventionError:
            fresh = False
        if not fresh:
            intervention = fit(store, site, method, target=target)
            intervention.save(path)
            summary = f"variance removed {100 * intervention.fit['variance_removed']:.2f} %" if "variance_removed" in intervention.fit else "steering"
            _log(f"fitted {name} ({summary})")
        paths[name] = path
    return paths


def probe_experiment(work, root: Path, files: dict[str, Path]) -> dict:
    """(a): stores extracted with the eraser and its control, probed; the main demo's rows as "before"."""
    base = extraction_jobs(work)["whisper-base"]
    all_sites = list(ShardReader(base.out).info.site_modules)
    later = all_sites[all_sites.index(ERASED_SITE) :]
    erased = replace(base, out=root / "stores" / "whisper-base-erased-layer2", sites=tuple(later), interventions=(files["erase-layer2"],))
    control = replace(base, out=root / "stores" / "whisper-base-random-layer2", sites=(ERASED_SITE,), interventions=(files["random-layer2"],))
    for job in (erased, control):
        _, report = extract(job, show_progress=False)
        _log(f"{job.out.name}: {report.written} extracted, {report.resumed} already done")
    demo_configs = probe_configs(work)
    before = {site: find_config(demo_configs, base.out, site) for site in later}
    before_attention = find_config(demo_configs, base.out, FINAL_SITE, "attention")
    after = {site: ProbeConfig(str(erased.out), site, "positional", positions=POSITIONS) for site in later}
    random_after = ProbeConfig(str(control.out), ERASED_SITE, "positional", positions=POSITIONS)
    attention_after = ProbeConfig(str(erased.out), FINAL_SITE, "attention", **ATTENTION)
    pooled = {
        condition: {site: ProbeConfig(str(store), site, "mean") for site in sites}
        for condition, store, sites in (("before", base.out, later), ("after", erased.out, later), ("random", control.out, [ERASED_SITE]))
    }
    demo_rows = load_rows(work.layout.probes) if work.layout.probes.exists() else {}
    missing = [c for c in [*before.values(), before_attention] if c.run_id() not in demo_rows]
    results = root / "probes.jsonl"
    run_all([*after.values(), random_after, attention_after, *missing, *(c for configs in pooled.values() for c in configs.values())], results)
    rows = demo_rows | load_rows(results)
    return {
        "sites": later,
        "before": {site: rows[c.run_id()]["f1_s"] for site, c in before.items()},
        "after": {site: rows[c.run_id()]["f1_s"] for site, c in after.items()},
        "random": rows[random_after.run_id()]["f1_s"],
        "pooled": {condition: {site: rows[c.run_id()]["f1_macro"] for site, c in configs.items()} for condition, configs in pooled.items()},
        "attention_before": rows[before_attention.run_id()]["f1_macro"],
        "attention_after": rows[attention_after.run_id()]["f1_macro"],
    }


def _gap(hypotheses: Path, out: Path) -> dict:
    """The gap report of a finished hypotheses file (computed once) and the per-language overall error rate."""
    if not out.exists():
        report, counts = gap_report(read_hypotheses(hypotheses), ("female", "male"), **GAP_SETTINGS)
        save_gap_report(report, counts, out)
    report = read_document(out, GapReport).to_dict()
    counts = read_side_rows(counts_path(out), GapReport)
    for language, entry in report["languages"].items():
        mine = [c for c in counts if c["language"] == language]
        entry["error_rate_all"] = 100.0 * sum(c["errors"] for c in mine) / max(1, sum(c["length"] for c in mine))
    return report


def asr_experiment(work, root: Path, files: dict[str, Path]) -> dict[str, dict]:
    """(b): transcripts of the held-out speakers (no file was fitted on them, and fewer clips take less
    time) without an intervention, with the layer-2 eraser and with its control, in the same batches
    (the main demo's transcripts batch other utterances together, and in bfloat16 a batch's
    composition alone can change a hypothesis); their gap reports."""
    base = transcription_jobs(work)["whisper-base"]
    manifest = held_out_manifest(base.manifest, root / "manifests" / "asr-held-out.jsonl")
    reports = {}
    for condition, name, files_used in (
        ("before", "held-out", ()),
        ("erased at layer 2", "erase-layer2", (files["erase-layer2"],)),
        ("random concept at layer 2", "random-layer2", (files["random-layer2"],)),
    ):
        job = replace(base, manifest=manifest, out=root / "hyps" / f"whisper-base-{name}.jsonl", interventions=files_used)
        report = transcribe(job, show_progress=False)
        _log(f"ASR {name}: wrote {report.written}, {report.total - report.todo} already done")
        reports[condition] = _gap(job.out, root / "results" / f"gap-whisper-base-{name}.json")
    return reports


def mustshe_experiment(work, root: Path, files: dict[str, Path]) -> dict[str, dict]:
    """(c): MuST-SHE translations without an edit and under each intervention (the main demo's job and
    batches, written here: "before" is never borrowed from a run of other code or weights), scored."""
    base = transcription_jobs(work)["whisper-base-mustshe-es"]
    hyps = {}
    for condition, name, used in (
        ("before", "none", ()),
        ("erased at layer 2", "erase-layer2", (files["erase-layer2"],)),
        ("random concept at layer 2", "random-layer2", (files["random-layer2"],)),
        ("erased at encoder.final", "erase-final", (files["erase-final"],)),
    ):
        job = replace(base, out=root / "hyps" / f"whisper-base-mustshe-es-{name}.jsonl", interventions=used)
        transcribe(job, show_progress=False)
        hyps[condition] = job.out
    steered = root / "hyps" / "whisper-base-mustshe-es-steered-layer2.jsonl"
    if not steered.exists():  # each speaker gender's rows from the run that steered them (in the main demo's batches)
        rows = []
        for speaker, name in (("male", "steer-to-female-layer2"), ("female", "steer-to-male-layer2")):
            job = replace(base, out=root / "hyps" / f"whisper-base-mustshe-es-{name}.jsonl", interventions=(files[name],), intervene_gender=speaker)
            transcribe(job, show_progress=False)
            rows += [line for line in job.out.read_text().splitlines() if json.loads(line)["gender"] == speaker]
        steered.write_text("".join(line + "\n" for line in rows))
    hyps["steered toward the other gender at layer 2"] = steered
    entries = read_definition(work.corpus.mustshe_tsv)
    scores = {}
    for condition, path in hyps.items():
        out = root / "results" / f"mustshe-{path.stem}.json"
        if not out.exists():
            result, rows = score_hypotheses(entries, path, "es")
            save_scores(result, rows, out)
        sentences = read_side_rows(sentences_path(out), MustSheScores)
        scores[condition] = {"result": read_document(out, MustSheScores).to_dict(), "shares": translation_shares(sentences)}
    return scores


def translation_shares(sentences: list[dict]) -> dict[str, dict]:
    """Per speaker gender (She, He): the share (%) of category-1 sentences whose translation is
    feminine, masculine, mixed or has no annotated term, and their count."""
    shares = {}
    for gender in ("She", "He"):
        mine = [s["translation_gender"] for s in sentences if s["gender"] == gender and s["category"].startswith("1")]
        shares[gender] = {kind: 100.0 * mine.count(kind) / len(mine) if mine else float("nan") for kind in TRANSLATION_GENDERS} | {"sentences": len(mine)}
    return shares


def probe_table(probes: dict) -> list[str]:
    pooled = probes["pooled"]
    lines = [
        "| site | per-position F1_S before | after LEACE at layer 2 | after the random concept at layer 2 "
        "| mean-pooled F1 before | after LEACE | after the random concept |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for site in probes["sites"]:
        control = number_or_dash(probes["random"]) if site == ERASED_SITE else ""
        pooled_control = number_or_dash(pooled["random"][site]) if site in pooled["random"] else ""
        lines.append(
            f"| {site} | {number_or_dash(probes['before'][site])} | {number_or_dash(probes['after'][site])} | {control} "
            f"| {number_or_dash(pooled['before'][site])} | {number_or_dash(pooled['after'][site])} | {pooled_control} |"
        )
    lines.append(f"| {FINAL_SITE}, attention probe (F1) | {number_or_dash(probes['attention_before'])} | {number_or_dash(probes['attention_after'])} | | | | |")
    return lines


def asr_table(reports: dict[str, dict]) -> list[str]:
    header = e_header((entry for report in reports.values() for entry in report["languages"].values()), "%")
    lines = [
        f"| condition | language | error rate, all (%) | female (%) | male (%) | {header} | 95 % CI (speaker bootstrap) |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    notes = set()
    for condition, report in reports.items():
        for language, entry in sorted(report["languages"].items()):
            groups = entry["groups"]
            low, high = entry.get("bootstrap", {}).get("ci95", [None, None])
            notes.add(entry.get("bootstrap", {}).get("ci95_note"))
            lines.append(
                f"| {condition} | {language} ({entry['metric'].upper()}) | {number_or_dash(entry['error_rate_all'], 2)} | "
                f"{number_or_dash(groups.get('female', {}).get('error_rate'), 2)} | {number_or_dash(groups.get('male', {}).get('error_rate'), 2)} | "
                f"{number_or_dash(entry.get('gap_relative'), sign=True)} | {number_or_dash(low, sign=True)} .. {number_or_dash(high, sign=True)} |"
            )
    return lines + ["", *(f"Interval note: {note}." for note in sorted(notes - {None}))]


def mustshe_table(scores: dict[str, dict]) -> list[str]:
    """Category-1 accuracy and, per speaker gender, the share of translations of each gender, "none"
    (no annotated gendered word) included, so each speaker gender's shares sum to 100."""
    header = " | ".join(f"{g} {k} (%)" for g in ("She", "He") for k in TRANSLATION_GENDERS)
    lines = [f"| condition | category-1 accuracy (%) | {header} |", "|---|---:|" + "---:|" * 2 * len(TRANSLATION_GENDERS)]
    for condition, score in scores.items():
        category = score["result"].get("category_1") or {}
        shares = " | ".join(number_or_dash(score["shares"][g][k]) for g in ("She", "He") for k in TRANSLATION_GENDERS)
        lines.append(f"| {condition} | {number_or_dash(category.get('accuracy'))} | {shares} |")
    return lines


def _figure(work, probes: dict) -> Path:
    conditions = ["before", "LEACE at layer 2", "random concept at layer 2"]
    scores = {(site, "before"): probes["before"][site] for site in probes["sites"]}
    scores |= {(site, "LEACE at layer 2"): probes["after"][site] for site in probes["sites"]}
    scores[(ERASED_SITE, "random concept at layer 2")] = probes["random"]
    title = "whisper-base: F1_S after erasure (synthetic voices)"
    return plots.site_heatmap(scores, probes["sites"], conditions, work.out / "interventions_probes", title=title)[0]


def run(work) -> list[str]:
    root = work.root / "interventions"
    store = extraction_jobs(work)["whisper-base"].out
    files = fitted_files(root, store)
    records = {name: load_intervention(path).fit for name, path in files.items()}
    probes = probe_experiment(work, root, files)
    figure = _figure(work, probes)
    asr = asr_experiment(work, root, files)
    mustshe = mustshe_experiment(work, root, files)
    return render_lines(
        "interventions.md.j2",
        **dict(erase=records["erase-layer2"], control=records["random-layer2"], final=records["erase-final"], steer=records["steer-to-female-layer2"]),
        **dict(erased_site=ERASED_SITE, final_site=FINAL_SITE, positions=POSITIONS, files=root / "files", figure=figure.name),
        **dict(probe_table=probe_table(probes), asr_table=asr_table(asr), mustshe_table=mustshe_table(mustshe)),
    )
