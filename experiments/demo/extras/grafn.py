"""Demo stage ``grafn`` (``python -m experiments.demo --extra grafn``): GRAFN and gender-balanced LoRA
fine-tuning on the demo corpus. The voices are synthetic: the numbers show the pipeline runs.

1. GRAFN filters fitted on the train split (``grafn/filters.json``);
2. the held-out voices (dev and test splits) normalised three ways: by their gender label, by the
   pitch rule's prediction, per utterance (no label read); the whole corpus by gender, for probes;
3. bundled Whisper base transcribes each normalised held-out set (GRAFN at inference only; the
   model is unchanged): WER per gender and E against the main demo's transcripts of the same ids;
4. the per-gender long-term average spectrum distance before and after, per mode;
5. per-position probes (F1_S) at a few sites of Whisper base, on the original and the normalised corpus;
6. a LoRA fine-tuning grid of Whisper tiny.en on English: female share 0.25 / 0.5 / 0.75 of a fixed
   total, without and with the GRAFN front end, trained on sentences and speakers disjoint from the
   validation set. Its runs take minutes each on CPU, so the stage writes their manifests and prints
   their ``python -m experiments.finetune`` commands, and reports the runs found finished.

Each step resumes from what is on disk under ``WORK/grafn``.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np

from experiments.demo.report import GAP_ESTIMATE_LABELS, e_header, render_lines
from experiments.demo.work import HELD_OUT, extraction_jobs, held_out_manifest, transcription_jobs, whisper
from experiments.demo.work import log as demo_log
from experiments.finetuning.tracking import read_history
from experiments.format import number
from experiments.normalisation.calibration import group_spectra, spectrum_distance
from experiments.normalisation.corpus import MODES, apply_to_manifest, fit_from_manifest
from experiments.normalisation.filters import load_filters
from experiments.normalisation.transform import GrafnParameters
from experiments.reports import plots
from experiments.results.records import GapReport
from experiments.scoring.gaps import finite_or_null, gap_report, read_hypotheses
from experiments.scoring.group_metrics import relative_gap
from extract.audio import load_audio
from extract.families.generation import GenerationOptions
from extract.jobs import ExtractionJob, TranscriptionJob, extract, transcribe
from extract.manifest import read_manifest, write_manifest
from extract.records import read_document, write_document
from extract.runner import finished_ids
from extract.store import ShardReader, StoreError
from probing.grid import run_all
from probing.results import load_rows
from probing.run import ProbeConfig

PROBE_SITES = ("encoder.embed", "encoder.final")  # the first and last: each positional probe takes a minute on 2 busy cores
POSITIONS = 250  # as the main demo's positional probes
SHARES = (0.25, 0.5, 0.75)
FINETUNE = {"max_steps": 8, "batch_size": 4, "lr": 1e-3, "warmup_steps": 2}  # the grid runs: a few minutes each on 2 CPU cores
CONDITIONS = ("original", *MODES)
MODE_NAMES = {"original": "original audio", "gender": "GRAFN by gender label", "predicted": "GRAFN by pitch-rule gender", "utterance": "GRAFN per utterance"}
log = partial(demo_log, stage="grafn")


def normalise(work, folder: Path) -> dict[str, Path]:
    """The filters, the corpus by gender, and the held-out set in every mode; returns the manifests."""
    filters = folder / "filters.json"
    if not filters.exists():
        fit_from_manifest(work.corpus.manifest, GrafnParameters(), split="train", show_progress=False)[0].save(filters)
    manifests = {"corpus-gender": folder / "manifests" / "corpus-gender.jsonl"}
    manifests["original"] = held_out_manifest(work.corpus.manifest, folder / "manifests" / "held-out.jsonl")
    apply_to_manifest(filters, work.corpus.manifest, folder / "audio" / "corpus-gender", manifests["corpus-gender"], "gender", show_progress=False)
    for mode in MODES:
        manifests[mode] = folder / "manifests" / f"held-out-{mode}.jsonl"
        apply_to_manifest(filters, manifests["original"], folder / "audio" / f"held-out-{mode}", manifests[mode], mode, show_progress=False)
    return manifests


def _filters_of(manifest: Path) -> dict[str, str | None]:
    return {u.id: u.extra["grafn"]["filter"] for u in read_manifest(manifest)}


def transcripts(work, folder: Path, manifests: dict[str, Path]) -> tuple[dict[str, list[dict]], dict[str, str]]:
    """Whisper base hypotheses of the held-out ids per condition, and notes on conditions that reuse another's."""
    main = transcription_jobs(work)["whisper-base"]
    ids = {u.id for u in read_manifest(manifests["original"])}
    rows = {"original": [row for row in read_hypotheses(main.out) if row["id"] in ids]}
    notes = {}
    options = GenerationOptions(num_beams=1, max_new_tokens=128)  # the main demo's decoding
    for mode in MODES:
        if mode == "predicted" and _filters_of(manifests["predicted"]) == _filters_of(manifests["gender"]):
            rows[mode], notes[mode] = rows["gender"], "the pitch rule agreed with every label, so its audio is the by-gender audio"
            continue
        job = TranscriptionJob(
            whisper(work, "bundled-base"),
            manifests[mode],
            folder / "hyps" / f"whisper-base-{mode}.jsonl",
            "asr",
            name=f"whisper-base+grafn-{mode}",
            options=options,
        )
        if not ids <= finished_ids(job.out):  # a rerun loads no model
            report = transcribe(job, show_progress=False)
            log(f"whisper-base on {mode}: {report.written} transcribed, {report.total - report.todo} already done")
        rows[mode] = read_hypotheses(job.out)
    return rows, notes


def gaps(folder: Path, rows: dict[str, list[dict]]) -> dict[str, dict]:
    """Per condition, the gap report (female vs male, 1000 iterations, seed 0: the main demo's settings)."""
    reports = {}
    for condition, condition_rows in rows.items():
        path = folder / "results" / f"gap-{condition}.json"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            report = finite_or_null(gap_report(condition_rows, ("female", "male"), iterations=1000, seed=0)[0])
            write_document(GapReport.from_dict(report, str(path)), path)
        reports[condition] = read_document(path, GapReport).to_dict()
    return reports


def spectra(folder: Path, manifests: dict[str, Path]) -> dict:
    """Per condition, each gender's long-term average spectrum of the held-out audio (dB) and the
    distance between them (the filters' smoothing, 100-7000 Hz)."""
    path = folder / "results" / "spectra.json"
    if path.exists():
        return json.loads(path.read_text())
    params = load_filters(folder / "filters.json").params
    result = {"frequencies_hz": params.frequencies.tolist(), "conditions": {}}
    for condition in CONDITIONS:
        items = ((u.gender, u.speaker, load_audio(u.audio, u.offset, u.duration).samples) for u in read_manifest(manifests[condition]))
        measured = group_spectra(items, params, local=False)
        result["conditions"][condition] = {
            "ltas_db": {group: measured.db(group).tolist() for group in ("female", "male")},
            "distance": spectrum_distance(measured.db("female"), measured.db("male"), params),
        }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result))
    return result


def _store_holds(store: Path, ids: set[str]) -> bool:
    try:
        reader = ShardReader(store)
    except StoreError:
        return False
    return ids <= set(reader.ids) and set(PROBE_SITES) <= set(reader.sites)


def probes(work, folder: Path, manifests: dict[str, Path]) -> dict[str, dict[str, float]]:
    """F1_S per site on the main demo's Whisper base store (its own rows, where the main demo has
    them) and on the store of the corpus normalised by gender."""
    original = extraction_jobs(work)["whisper-base"].out
    job = ExtractionJob(whisper(work, "bundled-base"), manifests["corpus-gender"], folder / "stores" / "whisper-base-grafn", sites=PROBE_SITES)
    if not _store_holds(job.out, {u.id for u in read_manifest(job.manifest)}):  # a rerun loads no model
        extract(job, show_progress=False)
    main_sites = ShardReader(original).sites
    main_rows = load_rows(work.layout.probes) if work.layout.probes.exists() else {}
    before = {site: ProbeConfig(str(original), site, "positional", positions=POSITIONS, mdl=site == main_sites[-1]) for site in PROBE_SITES}
    before = {site: config if config.run_id() in main_rows else replace(config, mdl=False) for site, config in before.items()}
    after = {site: ProbeConfig(str(job.out), site, "positional", positions=POSITIONS) for site in PROBE_SITES}
    results = folder / "results" / "probes.jsonl"
    run_all([config for config in before.values() if config.run_id() not in main_rows] + list(after.values()), results)
    rows = main_rows | load_rows(results)
    return {name: {site: rows[configs[site].run_id()]["f1_s"] for site in PROBE_SITES} for name, configs in (("original", before), ("gender", after))}


def _finetune_data(work, folder: Path) -> tuple[Path, Path, int]:
    """English only (tiny.en): validation on the held-out voices reading the later half of the
    sentences, training on the train voices reading the first half; the largest total divisible by
    4 that every share can draw."""
    english = [u for u in read_manifest(work.corpus.manifest) if u.language == "en"]
    texts = sorted({u.text for u in english})
    held_texts = set(texts[(len(texts) + 1) // 2 :])
    pool = [u for u in english if u.split == "train" and u.text not in held_texts]
    validation = [u for u in english if u.split in HELD_OUT and u.text in held_texts]
    paths = folder / "finetune" / "pool.jsonl", folder / "finetune" / "validation.jsonl"
    for path, rows in zip(paths, (pool, validation)):
        if not path.exists():
            write_manifest(path, rows)
    smaller = min(sum(u.gender == group for u in pool) for group in ("female", "male"))
    return paths[0], paths[1], 4 * int(smaller / max(SHARES) // 4)


def finetune_grid(work, folder: Path) -> tuple[dict[tuple[float, bool], list[dict]], int, list[str]]:
    """The grid's finished runs (validation histories by share and GRAFN), the training total, and the
    ``python -m experiments.finetune`` command of each run not yet done: minutes each on 2 busy CPU
    cores, too long for this stage, so they run separately (the README gives the loop)."""
    pool, validation, total = _finetune_data(work, folder)
    histories, commands = {}, []
    for share in SHARES:
        for with_grafn in (False, True):
            out = folder / "finetune" / f"female-{int(100 * share)}{'-grafn' if with_grafn else ''}"
            if (out / "model" / "finetune.json").exists():
                histories[(share, with_grafn)] = read_history(out / "val_history.jsonl")
                continue
            options = " ".join(f"--{key.replace('_', '-')} {value:g}" for key, value in FINETUNE.items())
            commands.append(
                f"python -m experiments.finetune --manifest {pool} --val-manifest {validation} --language en --checkpoint bundled-tiny.en "
                f"--female-share {share} --total {total} {options} --val-every {FINETUNE['max_steps']} --device cpu "
                + (f"--grafn {folder / 'filters.json'} " if with_grafn else "")
                + f"--out {out}"
                + (" --resume" if (out / "run.json").exists() else "")  # started before and stopped
            )
    return histories, total, commands


@plots.paper_style
def draw(work, spectra_result: dict, reports: dict, histories: dict) -> list[Path]:
    plt = plots.pyplot()
    figure, axes = plt.subplots(1, 3, figsize=(10, 3.0))
    frequencies = np.asarray(spectra_result["frequencies_hz"])
    for condition, style in (("original", ":"), ("gender", "-")):
        for group, colour in (("female", "tab:red"), ("male", "tab:blue")):
            ltas = spectra_result["conditions"][condition]["ltas_db"][group]
            level = np.mean(ltas)
            axes[0].plot(
                frequencies / 1000, np.asarray(ltas) - level, style, color=colour, lw=1, label=f"{group}, {'GRAFN' if condition == 'gender' else 'original'}"
            )
    axes[0].set(xlabel="kHz", ylabel="LTAS, dB (mean removed)", title="long-term spectra")
    axes[0].legend(frameon=False)
    languages = sorted(reports["original"]["languages"])
    width = 0.8 / len(languages)
    for index, language in enumerate(languages):
        values = [reports[condition]["languages"][language].get("gap_relative") for condition in CONDITIONS]
        positions = np.arange(len(CONDITIONS)) + (index - (len(languages) - 1) / 2) * width
        axes[1].bar(positions, [np.nan if v is None else v for v in values], width, label=language)
    axes[1].axhline(0, color="black", lw=0.5)
    axes[1].set_xticks(np.arange(len(CONDITIONS)), ["original", "by label", "by pitch", "per utt."])
    axes[1].set(ylabel="E(F, M), %", title="Whisper base, GRAFN at inference")
    axes[1].legend(frameon=False)
    for with_grafn, marker in ((False, "o"), (True, "s")):
        for group, colour in (("female", "tab:red"), ("male", "tab:blue")):
            values = [histories[(share, with_grafn)][-1].get(f"wer_{group}") if (share, with_grafn) in histories else None for share in SHARES]
            axes[2].plot(
                SHARES,
                [np.nan if v is None else v for v in values],
                marker=marker,
                color=colour,
                ls="-" if with_grafn else "--",
                label=f"{group}{' +GRAFN' if with_grafn else ''}",
            )
    axes[2].set(xlabel="female share of training", ylabel="WER (%)", title="tiny.en + LoRA")
    axes[2].legend(frameon=False, fontsize=6)
    axes[2].set_xticks(SHARES)
    axes[2].set_xlim(0.15, 0.85)
    figure.suptitle("GRAFN on the demo corpus (synthetic voices)", y=1.05)
    return plots.save(figure, work.out / "grafn")


def _history_gaps(record: dict) -> tuple:
    """E on the full set and the absolute gap of a fine-tuning history record. Records written before
    the tracker took the gap module's names hold them as ``E`` and ``gap_abs``, with E = 0 where
    neither group erred: their E is recomputed from their WERs, so it is undefined there too."""
    if "gap_relative_full" in record:
        return record["gap_relative_full"], record.get("gap_absolute")
    female, male = record.get("wer_female"), record.get("wer_male")
    return (None if female is None or male is None else relative_gap(female, male)), record.get("gap_abs")


def _gap_rows(reports: dict, notes: dict) -> list[str]:
    header = e_header(entry for report in reports.values() for entry in report["languages"].values())
    lines = [f"| condition | language | WER F | WER M | {header} | 95 % CI (speakers) | Δrel |", "|---|---|---:|---:|---:|---|---:|"]
    for condition in CONDITIONS:
        for language, entry in sorted(reports[condition]["languages"].items()):
            groups = entry["groups"]
            low, high = entry.get("bootstrap", {}).get("ci95", [None, None])
            name = MODE_NAMES[condition] + (" †" if condition in notes else "")
            lines.append(
                f"| {name} | {language} | {number(groups['female']['error_rate'])} | {number(groups['male']['error_rate'])} | "
                f"{number(entry.get('gap_relative'), sign=True)} | {number(low, sign=True)} .. {number(high, sign=True)} | "
                f"{number(entry.get('delta_rel'), sign=True)} |"
            )
    return lines


def section(reports, notes, spectra_result, probe_scores, histories, commands, figure: list[Path], seconds: float, total: int) -> list[str]:
    distances = {condition: spectra_result["conditions"][condition]["distance"] for condition in CONDITIONS}
    reduction = distances["original"]["shape_rms_db"] - distances["gender"]["shape_rms_db"]
    reduction_shares = {
        condition: f"{100 * ((distances['original']['shape_rms_db'] - distances[condition]['shape_rms_db']) / reduction):.0f} %"
        if reduction > 0 and condition != "original"
        else ""
        for condition in CONDITIONS
    }
    return render_lines(
        "grafn.md.j2",
        **dict(gap_rows=_gap_rows(reports, notes), notes=notes, conditions=CONDITIONS, mode_names=MODE_NAMES, distances=distances, shares=SHARES),
        **dict(reduction_shares=reduction_shares, probe_sites=PROBE_SITES, probe_scores=probe_scores, finetune=FINETUNE, total=total),
        **dict(full_set=GAP_ESTIMATE_LABELS["full"], histories=histories, history_gaps=_history_gaps, commands=commands, figure=figure[0].name),
        seconds=seconds,
    )


def run(work) -> list[str]:
    started = time.time()
    folder = work.root / "grafn"
    manifests = normalise(work, folder)
    log("normalised audio ready")
    rows, notes = transcripts(work, folder, manifests)
    reports = gaps(folder, rows)
    spectra_result = spectra(folder, manifests)
    probe_scores = probes(work, folder, manifests)
    histories, total, commands = finetune_grid(work, folder)
    figure = draw(work, spectra_result, reports, histories)
    return section(reports, notes, spectra_result, probe_scores, histories, commands, figure, time.time() - started, total)
