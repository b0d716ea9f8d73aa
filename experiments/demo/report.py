"""Figures, correlation and ``report.md`` of the demo, from the results its study collected.

Every score is read from the study's tables (``WORK/results/long.csv``, ``f1_vs_gap.csv``,
``f1_vs_mustshe.csv``, ``correlations.json``) and its behaviour outputs (gap and MuST-SHE JSON); a
probe's arrays (per-position curves, attention weights, predictions on MuST-SHE) are read by the
run id its long row names. Nothing here joins probes with behaviour: ``experiments.collect`` did.
"""

from __future__ import annotations

import json
import os
import re
from functools import cache, partial
from pathlib import Path

import numpy as np

from experiments.demo.work import ASR, REAL, TINY_PREFIX, WHISPER_BASE_SITES, Work, real_voices_skipped, tiny_families
from experiments.format import number
from experiments.reports import plots as figures
from experiments.reports.markdown import markdown_templates
from experiments.results.correlation import CorrelationError, correlate, interval_text
from experiments.results.records import F1VsGapRow, F1VsMustSheRow, GapReport, LongRow, MustSheScores, read_table
from experiments.scoring.gaps import GAP_ESTIMATES, counts_path
from experiments.scoring.mustshe import sentences_path
from extract.manifest import read_manifest
from extract.paths import CACHE_ENV, cache_dir, source_checkout
from extract.records import read_document, read_side_rows, read_versioned
from probing.mdl import uniform_block_count
from probing.results import load_arrays, load_attention, load_rows

CONDITIONS = ("pretrained", "random init", "shuffled control")
CONDITION_RUNS = {"pretrained": ("whisper-base", "none"), "random init": ("whisper-base-random", "none"), "shuffled control": ("whisper-base", "shuffled")}


def tiny_labels() -> dict[str, str]:
    """How the report names the demo's tiny models, by family (a function: the family modules load torch)."""
    from extract.families import FAMILIES

    return {name: family.tiny_label for name, family in FAMILIES.items() if family.demo_sites}


GAP_ESTIMATE_LABELS = {"resampled": "resampled", "full": "full set"}  # the estimate in a table header of E
P_VALUE_HEADER = "p, published resampling t-test (pseudo-replicated)"
RUN_ID = re.compile(r"\(run (\w+)\)$")  # the run id a probe's long.csv row names in its source
number_or_dash = partial(number, missing="–")  # the extras' tables show a missing value as an en dash, not "n/a"


@cache
def _templates():
    environment = markdown_templates("experiments.demo")
    environment.filters.update(shown=shown_path, mean=_mean)
    environment.globals.update(gap_table=gap_table, average_test_length=average_test_length, mdl_lines=mdl_lines, interval_text=interval_text)
    return environment


def render(template: str, **context) -> str:
    """A Markdown template of ``experiments/demo/templates``, with the report's tables and formatters at hand."""
    return _templates().get_template(template).render(**context)


def render_lines(template: str, **context) -> list[str]:
    """:func:`render` as the list of lines an opt-in stage's section is (:mod:`experiments.demo.extras`)."""
    return render(template, **context).split("\n")[:-1]


class Collected:
    """The demo study's collected results: long.csv's probe rows by what they are about, and each
    run's full row and arrays by the run id long.csv names."""

    def __init__(self, work: Work):
        self.work = work
        self.long = read_table(work.layout.results / "long.csv", LongRow)
        self.rows = load_rows(work.layout.probes)

    def probe(
        self, model: str, site: str, probe: str = "positional", control: str = "none", language: str | None = None, dataset: str = ASR, split: str = "fixed"
    ) -> dict:
        """The one probe run of these settings at seed 0 that long.csv names; ``language``: the subject
        language (``en+es`` for the pooled store; None: any)."""
        wanted = (model, dataset, site, probe, control, split, 0)
        found = {
            RUN_ID.search(row.source).group(1)
            for row in self.long
            if row.kind == "probe"
            and (row.model, row.dataset, row.site, row.probe, row.control, row.split, row.seed) == wanted
            and (language is None or row.language == language)
        }
        if len(found) != 1:
            raise ValueError(f"long.csv has {len(found)} probe runs of {model} {site} {probe} control={control} language={language}; expected one")
        return self.rows[found.pop()]

    def arrays(self, row: dict) -> dict:
        return load_arrays(self.work.layout.probes, row["run_id"])

    def attention_weights(self, row: dict) -> list[np.ndarray]:
        return load_attention(self.work.layout.probes, row["run_id"])[1]


def _gap_estimate(entry: dict) -> str:
    estimate = entry.get("gap_estimate")
    if estimate not in GAP_ESTIMATES:
        raise ValueError(
            f"asr_gap entry has gap_estimate {estimate!r}; expected one of {sorted(GAP_ESTIMATES)} (rerun experiments.asr_gap with --gap-estimate)"
        )
    return estimate


def gap_estimate_name(entry: dict) -> str:
    """The report's name for the estimate an asr_gap language entry holds in ``gap_relative``."""
    return GAP_ESTIMATES[_gap_estimate(entry)]


def e_header(entries, *units: str) -> str:
    """The header of a table column of asr_gap entries' ``gap_relative``: ``E(F, M)`` with its units
    and the estimate the entries hold (``resampled`` or ``full set``; entries without a gap name none)."""
    labels = sorted({GAP_ESTIMATE_LABELS[_gap_estimate(entry)] for entry in entries if "gap_relative" in entry})
    return f"E(F, M) ({', '.join([*units, *labels])})" if units or labels else "E(F, M)"


def _crosses_zero(ci) -> bool:
    return ci[0] is not None and ci[1] is not None and ci[0] <= 0 <= ci[1]


def gap_table(gaps: dict[str, dict]) -> list[str]:
    """Markdown rows of the gap table: the speaker-bootstrap interval first, then E and the estimate
    it is, then the published resampling t-test labelled as pseudo-replicated."""
    lines = [
        f"| model | language | metric | female | male | E(F, M) 95 % CI (speaker bootstrap) | E(F, M) | estimate | {P_VALUE_HEADER} |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for model, result in gaps.items():
        for language, entry in result["languages"].items():
            rates = " | ".join(number(entry["groups"].get(group, {}).get("error_rate"), 2) for group in ("female", "male"))
            if entry.get("missing_groups"):
                lines.append(
                    f"| {model} | {language} | {entry['metric'].upper()} | {rates} | n/a | n/a (no {' or '.join(entry['missing_groups'])} voice) | n/a | n/a |"
                )
                continue
            bootstrap = entry.get("bootstrap", {})
            ci = bootstrap.get("ci95") or [None, None]
            interval = f"{number(ci[0])} .. {number(ci[1])}" + (" (crosses 0)" if _crosses_zero(ci) else "")
            if bootstrap.get("ci95_note"):
                speakers = bootstrap.get("speakers", {})
                interval += f" (unreliable: {' / '.join(str(n) for n in speakers.values())} speakers)"
            lines.append(
                f"| {model} | {language} | {entry['metric'].upper()} | {rates} | {interval} | {number(entry.get('gap_relative'))} | "
                f"{gap_estimate_name(entry)} | {_p(bootstrap.get('p_value'))} |"
            )
    lines += [
        "",
        "Read the speaker-bootstrap interval first: it resamples speakers, the unit that varies, and an interval that",
        "crosses 0 means the corpus shows no gap either way, whatever the p-value. The p-value is the resampling t-test",
        "as Attanasio et al. published it; it treats resampled subsets of the same speakers as independent samples",
        "(pseudo-replication), so it shrinks as the number of iterations grows: it is the published protocol, not the",
        "evidence to trust.",
    ]
    return lines


def average_test_length(row: dict) -> str:
    """The average test length of a positional probe row: speech frames, with the stored positions
    (padding included) beside them when they differ."""
    phrase = f"{number(row['mean_test_length'])} speech frames"
    if row.get("stored_positions") is not None:
        phrase += f" ({number(row['stored_positions'])} stored positions, padding included)"
    return phrase


def mdl_lines(site: str, row: dict) -> list[str]:
    """The MDL sentence of a probe row: the codelengths, the compression, how many blocks were coded
    uniformly, and why a compression below 1 is not overconfidence alone (see :mod:`probing.mdl`)."""
    blocks = row.get("mdl_blocks")
    later = len(row["mdl_uniform_blocks"])
    uniform = f"{uniform_block_count(row['mdl_uniform_blocks'])} of them coded uniformly, the first as always"
    uniform += f" and {later} after speakers of one gender only" if later else ""
    return [
        f"MDL on {site}: online codelength {number(row.get('codelength_online_bits'))} bits against "
        f"{number(row.get('codelength_uniform_bits'))} uniform, compression {number(row.get('compression'), 2)} "
        f"({blocks} blocks cut at speaker boundaries, {uniform}; {row.get('mdl_guard', 'no guard')}).",
        "A compression below 1 mixes prior shift with overconfidence: the probes' intercept is unpenalised at every C, so each",
        "block is coded with the gender share of the speakers before it, and a block whose share differs costs more than a",
        "bit an utterance whatever the states carry (features of pure noise in this design can reach compression 0.75).",
    ]


def write_report(work: Work, trimmed: bool) -> Path:
    from extract.store import ShardReader

    out = work.out
    out.mkdir(parents=True, exist_ok=True)
    collected = Collected(work)
    gaps = {name: read_document(work.gap(name), GapReport).to_dict() for name in ("whisper-base", "whisper-tiny.en")}
    mustshe = read_document(work.mustshe, MustSheScores).to_dict()
    pooled = "+".join(sorted(gaps["whisper-base"]["languages"]))  # the subject language of a probe on the pooled store: en+es
    sites, last = list(WHISPER_BASE_SITES), WHISPER_BASE_SITES[-1]

    def positional(site: str, condition: str) -> dict:
        model, control = CONDITION_RUNS[condition]
        return collected.probe(model, site, control=control, language=pooled)

    # per-position curve, control and MDL of the last layer
    real, control = positional(last, "pretrained"), positional(last, "shuffled control")
    arrays, control_arrays = collected.arrays(real), collected.arrays(control)
    figures.per_position(
        arrays["test_f1_macro"],
        real["mean_test_length"],
        out / "per_position",
        ema=arrays["test_f1_ema"],
        control=control_arrays["test_f1_macro"],
        mdl_bits=arrays.get("mdl_online_bits"),
        uniform_bits=arrays.get("mdl_uniform_bits"),
        frame_rate=ShardReader(Path(real["config"]["store"])).info.frame_rate(last),  # as the store recorded it at extraction
        title=f"whisper-base {last} (synthetic voices)",
    )

    # heatmap of F1_S per site and condition
    scores = {(site, condition): positional(site, condition)["f1_s"] for site in sites for condition in CONDITIONS}
    figures.site_heatmap(scores, sites, list(CONDITIONS), out / "site_heatmap", title="whisper-base: F1_S per site (synthetic voices)")

    # gaps and error distributions
    estimate = ", ".join(sorted({gap_estimate_name(entry) for result in gaps.values() for entry in result["languages"].values()}))
    figures.gap_bars(gaps, out / "gaps", title=f"{estimate} on the demo corpus (synthetic voices)")
    for language, entry in gaps["whisper-base"]["languages"].items():
        figures.error_distribution(
            entry["error_distribution"],
            out / f"error_distribution_{language}",
            metric=entry["metric"].upper(),
            title=f"whisper-base, {language} (synthetic voices)",
        )

    # probe F1_S against the gap: collect's rows at the last site, one point per (model, language), across models
    # (its JSON names the table; with too few or constant points, the scatter alone and the reason)
    f1_table = work.layout.results / "f1_vs_gap.csv"
    f1_rows = [row for row in read_table(f1_table, F1VsGapRow) if row.site == last and row.gap_relative is not None]
    xs, ys, labels = [row.f1_s for row in f1_rows], [row.gap_relative for row in f1_rows], [f"{row.model} {row.language}" for row in f1_rows]
    try:
        gap_fit = correlate(xs, ys, seed=0) | {"x": "f1_s", "y": "gap_relative", "table": shown_path(f1_table), "points": labels}
        (out / "correlation_f1_gap.json").write_text(json.dumps(gap_fit, indent=2) + "\n")
        gap_reason = None
    except CorrelationError as error:
        gap_fit, gap_reason = None, str(error)
    figures.scatter_with_fit(xs, ys, labels, gap_fit, "probe F1_S (%)", f"E(F, M) (%), {estimate}", out / "f1_vs_gap", reason=gap_reason or "")

    # attention probe: its F1 on MuST-SHE against category-1 accuracy (collect's pairing), attention profiles, confusion on MuST-SHE
    attention = collected.probe("whisper-base", last, probe="attention", language=pooled)
    mustshe_rows = read_table(work.layout.results / "f1_vs_mustshe.csv", F1VsMustSheRow)
    mustshe_fit = read_versioned(work.layout.results / "correlations.json", "study_tables")["f1_vs_mustshe"] or {}
    figures.f1_vs_mustshe(mustshe_rows, mustshe_fit, "attention-probe F1 on MuST-SHE (%)", "MuST-SHE category-1 accuracy (%)", out / "f1_vs_mustshe")
    tiny = [  # (model, site, row) of the attention probes on the tiny random models, in the families' order
        (f"{TINY_PREFIX}{family}", site, collected.probe(f"{TINY_PREFIX}{family}", site, probe="attention"))
        for family, sites in tiny_families().items()
        for site in sites
    ]
    profiles = {"whisper-base encoder.final": collected.attention_weights(attention)}
    for model, site, row in tiny:
        profiles[f"{tiny_labels()[model.removeprefix(TINY_PREFIX)]} {site} (random weights)"] = collected.attention_weights(row)
    figures.attention_profiles(profiles, out / "attention_profiles", title="attention weights, mean ± std")

    applied = collected.arrays(attention)
    classes = [str(c) for c in applied["applied_class_names"]]
    predicted = {i: classes[int(p > 0.5)] for i, p in zip(applied["applied_ids"], applied["applied_probabilities"])}
    sentences = read_side_rows(sentences_path(work.mustshe), MustSheScores)
    figures.confusion(
        [predicted[s["id"]] for s in sentences],
        [s["translation_gender"] for s in sentences],
        out / "confusion",
        title="MuST-SHE (voices the probe never trained on)",
    )

    table = {site: [scores[(site, condition)] for condition in CONDITIONS] for site in sites}
    report = out / "report.md"
    text = render(
        "report.md.j2",
        **dict(work=work, trimmed=trimmed, gaps=gaps, mustshe=mustshe, conditions=CONDITIONS, table=table, site=last, last=real, attention=attention),
        **dict(tiny=tiny, f1_rows=f1_rows, gap_fit=gap_fit, gap_reason=gap_reason, mustshe_rows=mustshe_rows, mustshe_fit=mustshe_fit),
        confusion_count=len(sentences),
    )
    report.write_text(text + real_voices_section(work, collected))
    return report


def real_voices_section(work: Work, collected: Collected) -> str:
    """The report's section on the real voices: leave-one-speaker-out probes per site against the
    F0 baseline, error rate per voice, E per language with both genders, and what so few voices cannot show;
    or, when the demo could not fetch them, that they were skipped and how to include them."""
    skipped = real_voices_skipped(work)
    if skipped is not None:
        return render("real_voices.md.j2", skipped=skipped)
    card = json.loads((work.realvoices / "card.json").read_text())
    voices = {(row["speaker"], row["language"]): row for row in card["voices"]}  # a speaker may read two languages
    last = WHISPER_BASE_SITES[-1]

    def probe(model: str, site: str, control: str = "none") -> dict:
        return collected.probe(model, site, probe="mean", control=control, dataset=REAL, split="loso")

    f0, per_site = probe("praat-f0", "f0"), {site: probe("whisper-base", site) for site in WHISPER_BASE_SITES}
    probes = [(f"whisper-base {site}", row) for site, row in per_site.items()]
    probes += [("F0 alone (Praat: ln median, mean, sd)", f0), (f"shuffled control, whisper-base {last}", probe("whisper-base", last, "shuffled"))]
    probes += [("shuffled control, F0", probe("praat-f0", "f0", "shuffled"))]
    voice_of = {utterance.id: (utterance.speaker, utterance.language) for utterance in read_manifest(work.realvoices / "manifest.jsonl")}

    def accuracy(row: dict) -> dict[tuple[str, str], float]:
        arrays = collected.arrays(row)
        return voice_accuracy(arrays["test_ids"].tolist(), arrays["test_correct"], voice_of)

    whisper_voices, f0_voices, rates = accuracy(per_site[last]), accuracy(f0), voice_error_rates(work, voice_of)
    voice_rows = [
        (
            voice["name"] or speaker,
            language,
            voice["gender"],
            voice["clips"],
            whisper_voices.get((speaker, language)),
            f0_voices.get((speaker, language)),
            rates.get((speaker, language)),
        )
        for (speaker, language), voice in sorted(voices.items(), key=lambda item: (item[0][1], item[1]["gender"], item[0][0]))
    ]
    return render(
        "real_voices.md.j2",
        **dict(skipped=None, work=work, card=card, voices=voices, clips=sum(row["clips"] for row in voices.values()), speakers=len({s for s, _ in voices})),
        **dict(probes=probes, voice_accuracy=accuracy, last=last, voice_rows=voice_rows),
        gap=read_document(work.gap("whisper-base", REAL), GapReport).to_dict(),
    )


def voice_accuracy(ids, correct, voice_of: dict[str, tuple[str, str]]) -> dict[tuple[str, str], float]:
    """Accuracy (%) per voice, (speaker, language), from a leave-one-speaker-out run's per-utterance
    outcomes (``test_ids``, ``test_correct``: :func:`probing.run._loso_run`)."""
    outcomes: dict[tuple[str, str], list[float]] = {}
    for utterance, right in zip(ids, correct):
        outcomes.setdefault(voice_of[str(utterance)], []).append(float(right))
    return {voice: 100.0 * float(np.mean(found)) for voice, found in outcomes.items()}


def _mean(values: dict) -> float | None:
    return float(np.mean(list(values.values()))) if values else None


def voice_error_rates(work: Work, voice_of: dict[str, tuple[str, str]]) -> dict[tuple[str, str], float]:
    """Error rate per (speaker, language) of Whisper base on the real voices, in percent, from the
    gap report's per-utterance counts (the language's metric: WER, or CER where it is scored so)."""
    errors: dict[tuple[str, str], list[float]] = {}
    for count in read_side_rows(counts_path(work.gap("whisper-base", REAL)), GapReport):
        totals = errors.setdefault((count["speaker"], voice_of[count["id"]][1]), [0.0, 0.0])
        totals[0] += count["errors"]
        totals[1] += count["length"]
    return {speaker: 100.0 * wrong / length for speaker, (wrong, length) in errors.items() if length}


def shown_path(path: Path) -> str:
    """A path as the committed report may show it, naming no machine's folders: relative to the
    source checkout when inside one, else under ``$SPEECH_GENDER_CACHE`` when inside a cache that
    variable chose, else as it is."""
    path, checkout = Path(path).resolve(), source_checkout()
    if checkout and path.is_relative_to(checkout):
        return str(path.relative_to(checkout))
    cache = cache_dir().resolve()
    if os.environ.get(CACHE_ENV) and path.is_relative_to(cache):
        return f"${CACHE_ENV}/{path.relative_to(cache)}"
    return str(path)


def _p(value) -> str:
    return "n/a" if value is None else f"{value:.2g}" if value >= 1e-4 else "< 1e-4"
