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
from functools import partial
from pathlib import Path

import numpy as np

from experiments.analysis.acoustic import FEATURES, compute_acoustics
from experiments.analysis.contrasts import error_regression, feature_table, group_contrasts, read_gap_setups, setup_correlations, setup_table
from experiments.analysis.speakers import HdbscanSettings, agreement, assign_speakers, audio_embeddings, mfcc_statistics, store_embeddings
from experiments.format import number
from experiments.reports.plots import paper_style, pyplot, save
from experiments.scoring.gaps import finite_or_null
from extract.manifest import read_manifest

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


def _lazy_token_counter():
    """The Whisper tokenizer, loaded on the first record that needs it (a rerun with nothing to do never loads it)."""
    counter = []

    def count(text: str) -> int:
        if not counter:
            from experiments.scoring.dataset_stats import whisper_token_counter

            counter.append(whisper_token_counter(TOKENIZER))
        return counter[0](text)

    return count


def acoustic_rows(work, folder: Path) -> tuple[list[dict], dict]:
    """The feature rows of the corpus and the timing of the run that computed them."""
    out, timing_path = folder / "acoustic.jsonl", folder / "acoustic.timing.json"
    utterances = read_manifest(work.corpus.manifest)
    started = time.time()
    summary = compute_acoustics(utterances, out, _lazy_token_counter(), TOKENIZER, speech=SPEECH, range_by="speaker", workers=WORKERS, show_progress=False)
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
    from extract.store import ShardReader

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


_number = partial(number, missing="–")


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

    lines = [
        "## What explains a gap: acoustic features and speaker clustering (synthetic voices)",
        "",
        "**Synthetic voices** (Kokoro-82M and espeak-ng): these numbers show that the analyses of Attanasio et al. 2024 §3 and §5 run end to end; "
        "they are not a finding about speakers. Lexical features are not computed here: no English or Spanish spaCy pipeline is installed offline, "
        "and every voice reads the same sentences, so the two genders' lexical features are equal by construction.",
        "",
        f"Acoustic features of {timing.get('records', len(rows))} records in {_number(timing.get('seconds'), 0)} s "
        f"({_number(timing.get('seconds_per_1000'), 0)} s per 1000 records, {timing.get('workers', WORKERS)} processes, "
        f"{'silero-vad speech seconds' if SPEECH == 'vad' else 'seconds of clip'}, "
        "including model loading). F0: Praat, per-voice floor 0.75 × q25 and ceiling 1.5 × q75 of a 60-700 Hz first pass; intensity: Praat mean "
        "(energy), dB re 2e-5 with the samples as pascals (a full-scale sine at 91 dB); rates per second of detected speech: "
        "Whisper-tokenizer tokens, and syllable nuclei (voiced intensity peaks, approximate).",
    ]
    nulls = timing.get("nulls") or {}
    if nulls:
        lines.append("Null features: " + "; ".join(f"{f}: {n} ({r})" for f, reasons in nulls.items() for r, n in reasons.items()) + ".")
    lines += ["", "| Voice | Gender | Records | F0 range (Hz) | F0 (Hz) | Intensity (dB) | Tokens/s | Nuclei/s |", "|---|---|---|---|---|---|---|---|"]
    for v in voices:
        span = f"{v['range']['floor']:.0f}–{v['range']['ceiling']:.0f}" if "floor" in v["range"] else "–"
        lines.append(
            f"| {v['voice']} | {v['gender']} | {v['records']} | {span} | {_number(v['f0_mean_hz'])} | {_number(v['intensity_mean_db'])} "
            f"| {_number(v['rate_tokens_per_second'], 2)} | {_number(v['rate_nuclei_per_second'], 2)} |"
        )
    lines += [
        "",
        f"![mean F0 per voice]({figure[0].name})",
        "",
        "Female − male per language: records as the unit (the paper's; Welch's t-test and Mann-Whitney U, Holm over the four features), "
        "and the t-test on per-voice means (the voices, not the records, are the independent units: the record-level p-values are pseudo-replicated).",
        "",
        "| Lang | Feature | F mean | M mean | Difference | Cohen's d | Rank-biserial | p (Welch, Holm) | p (U, Holm) | Voices F/M "
        "| p (Welch on voice means, Holm) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in contrasts:
        s = by_speaker[(c["language"], c["feature"])]
        lines.append(
            f"| {c['language']} | {LABELS[c['feature']]} | {_number(c['mean_a'], 2)} | {_number(c['mean_b'], 2)} | {_number(c['difference'], 2, True)} "
            f"| {_number(c['cohens_d'], 2, True)} | {_number(c['rank_biserial'], 2, True)} | {_p(c['p_t_adjusted'])} | {_p(c['p_u_adjusted'])} "
            f"| {s['n_a']}/{s['n_b']} | {_p(s['p_t_adjusted'])} |"
        )
    lines += [
        "",
        "Feature differences (female − male) against the gap E(F, M) over the demo's setups. **Three points: a correlation over 3 setups means "
        "nothing** (any two-parameter line nearly fits three points); the rows show the table `python -m experiments.correlate` reads "
        f"(`{(folder / 'results.json').name}` holds them).",
        "",
        f"| Setup | E (%, {setup_rows[0]['gap_estimate'] if setup_rows else ''}) | ΔF0 (Hz) | Δintensity (dB) | Δtokens/s | Δnuclei/s |",
        "|---|---|---|---|---|---|",
    ]
    for r in setup_rows:
        lines.append(
            f"| {r['setup']} | {_number(r['gap_relative'], 1, True)} | {_number(r['diff_f0_mean_hz'], 1, True)} "
            f"| {_number(r['diff_intensity_mean_db'], 2, True)} | {_number(r['diff_rate_tokens_per_second'], 2, True)} "
            f"| {_number(r['diff_rate_nuclei_per_second'], 2, True)} |"
        )
    lines += [
        "",
        "Pearson r over the 3 setups (meaningless, shown as the pipeline's output): "
        + "; ".join(f"{c['feature']} {_number(c.get('pearson_r'), 2, True)}" if "pearson_r" in c else f"{c['feature']} – ({c['note']})" for c in correlations)
        + " (the two English setups share their feature differences: the same records).",
    ]
    lines += [
        "",
        "Per-utterance Poisson regression of errors on gender (offset log reference length, speaker-clustered errors; rate ratio of female "
        "against male, alone and with z-scored F0, intensity and token rate held fixed). On these voices F0 nearly determines gender, so "
        "gender's coefficient with F0 held fixed rests on little independent variation (r(gender, F0) below): with a handful of voices a side, "
        "the joint model extrapolates and its ratio is not an estimate of anything; read the interval, not the point.",
        "",
        "| Setup | Records | Voices | r(gender, F0) | Rate ratio F/M, alone (95% CI) | Rate ratio F/M, with features (95% CI) | McFadden R², with features |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in regressions:
        note = r.get("note") or r["group_only"].get("note") or r["with_features"].get("note")
        if note:
            lines.append(f"| {r['dataset']}/{r['language']}/{r['model']} | {r['records']} | – | – | {note} | | |")
            continue
        alone, joint = r["group_only"]["coefficients"]["is_female"], r["with_features"]["coefficients"]["is_female"]
        lines.append(
            f"| {r['dataset']}/{r['language']}/{r['model']} | {r['records']} | {r['speakers']}{' †' if 'reliability_note' in r else ''} "
            f"| {r['gender_feature_correlation']['f0_mean_hz']:+.2f} "
            f"| {_rate_ratio(alone)} | {_rate_ratio(joint)} "
            f"| {r['with_features']['pseudo_r2_mcfadden']:.3f} |"
        )
    if any("reliability_note" in r for r in regressions):
        lines += ["", "† fewer than 5 voices in a group: the speaker-clustered intervals rest on too few clusters to be trusted."]
    lines += [
        "",
        "Speaker ids by HDBSCAN (min_cluster_size 2, cosine; per dataset, language and gender, as the paper) from the mean-pooled whisper-base "
        "states of each site and from MFCC statistics; adjusted Rand index and purity against the true voices (one voice per language scope), "
        "and the ARI against the sentence read: where it beats the voices' ARI, the clusters group what is said, not who says it.",
        "",
        "| Embeddings | Clusters | Noise singletons | True voices | ARI | Purity | ARI against the sentence |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in speakers:
        lines.append(
            f"| {s['source']} | {s['clusters'] - s['noise']} | {s['noise']} | {s['true_speakers']} | {s['adjusted_rand_index']:.3f} | {s['purity']:.3f} "
            f"| {s['ari_against_sentence']:.3f} |"
        )
    return lines
