"""Demo stage ``analyses`` (``python -m experiments.demo --extra analyses``): what explains a gap, on
the demo corpus (synthetic voices).

Per voice: mean F0 (per-speaker two-pass range), intensity and the two speaking rates
(``experiments.analysis.acoustic``, silero-vad speech seconds, 2 processes); female/male contrasts
per language (Welch, Mann-Whitney U, Holm); the feature differences against E over the demo's three
gap setups (whisper-base en and es, whisper-tiny.en en) and the per-utterance Poisson regression;
speaker clustering (HDBSCAN, the paper's min_cluster_size 2, cosine) of the corpus from the stored
whisper-base states of every site, and from MFCC statistics, with its adjusted Rand index against
the true voices. No lexical features: the demo has no spaCy pipeline for English or Spanish offline,
and every voice reads the same sentences, so the genders' lexical features are equal by construction.

Everything is written under ``WORK/analyses`` once; a rerun reads it back.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from functools import cache
from pathlib import Path

import numpy as np

from experiments.analysis.acoustic import FEATURES, compute_acoustics
from experiments.analysis.contrasts import error_regression, feature_table, group_contrasts, read_gap_setups, setup_correlations, setup_table
from experiments.analysis.speakers import HdbscanSettings, agreement, assign_speakers, audio_embeddings, mfcc_statistics, store_embeddings
from experiments.demo.report import number_or_dash, render_lines
from experiments.reports.plots import paper_style, pyplot, save
from experiments.scoring.gaps import finite_or_null
from extract.manifest import read_manifest
from extract.store import ShardReader

WORKERS = 2
SPEECH = "vad"  # seconds of speech by silero-vad
TOKENIZER = "bundled-base"
LABELS = {
    "f0_mean_hz": "F0 (Hz)",
    "intensity_mean_db": "intensity (dB)",
    "rate_tokens_per_second": "tokens/s",
    "rate_nuclei_per_second": "nuclei/s",
}
REGRESSION = ("f0_mean_hz", "intensity_mean_db", "rate_tokens_per_second")
CLUSTERING = HdbscanSettings(min_cluster_size=2, metric="cosine")  # the paper's


@cache
def _token_counter():
    """The Whisper tokenizer's counter, loaded by the first record that needs it (a rerun with nothing to do never loads it)."""
    from experiments.scoring.dataset_stats import whisper_token_counter

    return whisper_token_counter(TOKENIZER)


def acoustic_rows(work, folder: Path) -> tuple[list[dict], dict]:
    """The feature rows of the corpus and the timing of the run that computed them."""
    out, timing_path = folder / "acoustic.jsonl", folder / "acoustic.timing.json"
    utterances = read_manifest(work.corpus.manifest)
    started = time.time()
    summary = compute_acoustics(
        utterances, out, lambda text: _token_counter()(text), TOKENIZER, speech=SPEECH, range_by="speaker", workers=WORKERS, show_progress=False
    )
    if summary["computed_now"] == len(utterances):
        seconds = time.time() - started
        timing = {"records": len(utterances), "seconds": seconds, "seconds_per_1000": 1000 * seconds / len(utterances), "workers": WORKERS}
        timing_path.write_text(json.dumps(timing, indent=1))
    timing = json.loads(timing_path.read_text()) if timing_path.exists() else {}
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    return rows, timing | {"nulls": summary["nulls"]}


def per_voice(rows: list[dict], ranges: dict) -> list[dict]:
    voices = defaultdict(list)
    for row in rows:
        voices[row["speaker"]].append(row)
    table = []
    for speaker, members in sorted(voices.items(), key=lambda item: (item[1][0]["gender"], item[0])):
        entry = {"voice": speaker, "gender": members[0]["gender"], "records": len(members), "range": ranges.get(speaker, {})}
        for feature in FEATURES:
            values = [m["features"][feature] for m in members if m["features"][feature] is not None]
            entry[feature] = float(np.mean(values)) if values else None
        table.append(entry)
    return table


def clustering(work, folder: Path) -> list[dict]:
    """ARI and purity of HDBSCAN speaker ids per whisper-base site and from MFCC statistics (cached)."""
    path = folder / "clustering.json"
    if path.exists():
        return json.loads(path.read_text())
    utterances = read_manifest(work.corpus.manifest)
    store = work.store("whisper-base")
    reader = ShardReader(store)
    sites = list(reader.sites)
    reader.close()
    sources = {site: store_embeddings(str(store), site, [u.id for u in utterances])[0] for site in sites}
    sources["MFCC statistics"] = audio_embeddings(utterances, mfcc_statistics, show_progress=False)
    results = []
    for name, embeddings in sources.items():
        assigned = assign_speakers(utterances, embeddings, CLUSTERING)
        truth = [f"{a['scope']}|{u.speaker}" for a, u in zip(assigned, utterances)]
        sentences = [f"{a['scope']}|{u.text}" for a, u in zip(assigned, utterances)]  # every voice reads the same sentences
        predicted = [a["speaker"] for a in assigned]
        results.append(
            {"source": name, "noise": sum(a["noise"] for a in assigned), "ari_against_sentence": agreement(sentences, predicted)["adjusted_rand_index"]}
            | agreement(truth, predicted)
        )
    path.write_text(json.dumps(results, indent=1))
    return results


def _rate_ratio(coefficient: dict) -> str:
    low, high = np.exp(coefficient["ci95"])
    return f"{coefficient['rate_ratio']:.3g} ({low:.3g}–{high:.3g})"


def _p(value) -> str:
    return "–" if value is None else f"{value:.2g}"


@paper_style
def f0_figure(rows: list[dict], voices: list[dict], out: Path) -> list[Path]:
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(6.4, 2.8))
    names = [v["voice"] for v in voices]
    data = [[r["features"]["f0_mean_hz"] for r in rows if r["speaker"] == name and r["features"]["f0_mean_hz"] is not None] for name in names]
    for position, (values, voice) in enumerate(zip(data, voices), start=1):
        colour = "#d95f02" if voice["gender"] == "female" else "#1b9e77"
        offsets = np.linspace(-0.2, 0.2, len(values)) if len(values) > 1 else np.zeros(len(values))
        axis.scatter(position + offsets, values, s=10, color=colour, alpha=0.7)
        if values:
            axis.hlines(np.mean(values), position - 0.3, position + 0.3, color="black", linewidth=1)
    axis.set_xticks(range(1, len(names) + 1), [n.replace("kokoro-", "") for n in names], rotation=60, ha="right")
    axis.set_ylabel("mean F0 per record (Hz)")
    axis.set_title("Mean F0 per record, per-voice Praat range (synthetic voices)\norange female, green male; bars: voice means")
    return save(figure, out)


def run(work) -> list[str]:
    """The section's Markdown lines (rendered from ``templates/analyses.md.j2``)."""
    folder = work.root / "analyses"
    folder.mkdir(parents=True, exist_ok=True)
    rows, timing = acoustic_rows(work, folder)
    ranges = json.loads((folder / "acoustic.ranges.json").read_text())["ranges"]
    voices = per_voice(rows, ranges)
    utterances = read_manifest(work.corpus.manifest)
    table = feature_table(utterances, {r["id"]: r["features"] for r in rows}, FEATURES)
    contrasts = group_contrasts(table, FEATURES)
    by_speaker = {(c["language"], c["feature"]): c for c in group_contrasts(table, FEATURES, unit="speaker")}
    setups = read_gap_setups([("whisper-base", work.gap("whisper-base")), ("whisper-tiny.en", work.gap("whisper-tiny.en"))])
    every_record = feature_table(utterances, {r["id"]: r["features"] for r in rows}, FEATURES, every_record=True)
    setup_rows = setup_table(setups, every_record, FEATURES)
    correlations = [c for c in setup_correlations(setup_rows, FEATURES, bootstrap=1000) if c["dataset"] == "all"]
    regressions = [error_regression(setup, every_record, REGRESSION) for setup in setups]
    speakers = clustering(work, folder)
    (folder / "results.json").write_text(
        json.dumps(finite_or_null({"contrasts": contrasts, "setups": setup_rows, "correlations": correlations, "regressions": regressions}), indent=1)
    )
    figure = f0_figure(rows, voices, work.out / "analyses_f0")
    return render_lines(
        "analyses.md.j2",
        **dict(rows=rows, timing=timing, workers=WORKERS, speech=SPEECH, voices=voices, figure=figure[0].name, contrasts=contrasts, by_speaker=by_speaker),
        **dict(setup_rows=setup_rows, regressions=regressions, speakers=speakers, labels=LABELS, n=number_or_dash, p=_p, rate_ratio=_rate_ratio),
        nulls="; ".join(f"{f}: {n} ({r})" for f, reasons in (timing.get("nulls") or {}).items() for r, n in reasons.items()),
        pearson="; ".join(
            f"{c['feature']} {number_or_dash(c.get('pearson_r'), 2, True)}" if "pearson_r" in c else f"{c['feature']} – ({c['note']})" for c in correlations
        ),
        unreliable=any("reliability_note" in r for r in regressions),
    )
