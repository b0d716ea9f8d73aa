"""Figures, correlation tables and ``report.md`` of the demo, from the results the stages saved."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from experiments.reports import plots as figures
from extract.families import FAMILIES
from probing.mdl import uniform_block_count
from probing.results import load_arrays, load_attention

CONDITIONS = ("pretrained", "random init", "shuffled control")
TINY_PREFIX = "tiny-random-"  # the model name of a family's tiny random-init model: tiny-random-FAMILY
TINY_LABELS = {name: family.tiny_label for name, family in FAMILIES.items() if family.demo_sites}  # the demo's tiny models, by family
# ``gap_estimate`` of an ``experiments.asr_gap`` JSON (``--gap-estimate``) -> how the report names it
GAP_ESTIMATES = {"resampled": "E on resampled means (paper)", "full": "E on the full set"}
GAP_ESTIMATE_LABELS = {"resampled": "resampled", "full": "full set"}  # the estimate in a table header of E
P_VALUE_HEADER = "p, published resampling t-test (pseudo-replicated)"


@dataclass(frozen=True)
class ProbeRun:
    """The name of one probe run of the demo. ``kind``: ``positional`` (Whisper base per site, under
    ``condition``, one of :data:`CONDITIONS`), ``language`` (one model's ``encoder.final`` on the
    utterances of ``language``) or ``attention`` (Whisper base, or a tiny random model at ``site``)."""

    kind: str
    model: str
    site: str
    condition: str | None = None
    language: str | None = None


class DemoProbes:
    """The result rows of the demo's probe runs, by :class:`ProbeRun`, in the order they were planned."""

    def __init__(self, rows: dict[ProbeRun, dict]):
        self.rows = rows

    @property
    def sites(self) -> list[str]:
        """The Whisper base sites of the positional probes, in forward order."""
        return [run.site for run in self.rows if run.kind == "positional" and run.condition == CONDITIONS[0]]

    def positional(self, site: str, condition: str) -> dict:
        return self.rows[ProbeRun("positional", "whisper-base", site, condition=condition)]

    def by_language(self) -> list[tuple[ProbeRun, dict]]:
        return [(run, row) for run, row in self.rows.items() if run.kind == "language"]

    def attention(self, model: str, site: str) -> dict:
        return self.rows[ProbeRun("attention", model, site)]

    def tiny_attention(self) -> list[tuple[ProbeRun, dict]]:
        """The attention probes on the tiny random-init models."""
        return [(run, row) for run, row in self.rows.items() if run.kind == "attention" and run.model.startswith(TINY_PREFIX)]


def _frame_rate(store: Path, site: str) -> float:
    """Frames per second of ``site``, as the store recorded it at extraction."""
    from extract.store import ShardReader

    return ShardReader(store).info.frame_rate(site)


def _arrays(work, row: dict) -> dict:
    return load_arrays(work.probes, row["run_id"])


def _attention_weights(work, row: dict) -> list[np.ndarray]:
    return load_attention(work.probes, row["run_id"])[1]


def _write_table(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def _correlate(table: Path, x: str, y: str, out_json: Path, plot: Path, labels: list[str], xs, ys, xlabel: str, ylabel: str):
    """``correlate`` on the rows just saved to ``table`` (its JSON names the table); with too few or
    constant points, the scatter alone and the reason."""
    from experiments.scoring.correlation import CorrelationError, correlate

    try:
        fit = correlate(xs, ys, seed=0) | {"x": x, "y": y, "table": str(table)}
        out_json.write_text(json.dumps(fit, indent=2) + "\n")
        reason = None
    except CorrelationError as error:
        fit, reason = None, str(error)
    figures.scatter_with_fit(xs, ys, labels, fit, xlabel, ylabel, plot)
    return fit, reason


def format_number(value, digits=1) -> str:
    return "n/a" if value is None or (isinstance(value, float) and not np.isfinite(value)) else f"{value:.{digits}f}"


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


def gap_estimate_names(gaps: dict[str, dict]) -> str:
    """Every estimate named in these asr_gap results, for a figure title or axis."""
    return ", ".join(sorted({gap_estimate_name(entry) for result in gaps.values() for entry in result["languages"].values()}))


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
            groups = entry["groups"]
            bootstrap = entry.get("bootstrap", {})
            ci = bootstrap.get("ci95") or [None, None]
            interval = f"{format_number(ci[0])} .. {format_number(ci[1])}" + (" (crosses 0)" if _crosses_zero(ci) else "")
            if bootstrap.get("ci95_note"):
                speakers = bootstrap.get("speakers", {})
                interval += f" (unreliable: {' / '.join(str(n) for n in speakers.values())} speakers)"
            lines.append(
                f"| {model} | {language} | {entry['metric'].upper()} | {format_number(groups.get('female', {}).get('error_rate'), 2)} | "
                f"{format_number(groups.get('male', {}).get('error_rate'), 2)} | {interval} | {format_number(entry.get('gap_relative'))} | "
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
    phrase = f"{format_number(row['mean_test_length'])} speech frames"
    if row.get("stored_positions") is not None:
        phrase += f" ({format_number(row['stored_positions'])} stored positions, padding included)"
    return phrase


def mdl_lines(site: str, row: dict) -> list[str]:
    """The MDL sentence of a probe row: the codelengths, the compression, how many blocks were coded
    uniformly, and why a compression below 1 is not overconfidence alone (see :mod:`probing.mdl`)."""
    blocks = row.get("mdl_blocks")
    later = len(row["mdl_uniform_blocks"])
    uniform = f"{uniform_block_count(row['mdl_uniform_blocks'])} of them coded uniformly, the first as always"
    uniform += f" and {later} after speakers of one gender only" if later else ""
    return [
        f"MDL on {site}: online codelength {format_number(row.get('codelength_online_bits'))} bits against "
        f"{format_number(row.get('codelength_uniform_bits'))} uniform, compression {format_number(row.get('compression'), 2)} "
        f"({blocks} blocks cut at speaker boundaries, {uniform}; {row.get('mdl_guard', 'no guard')}).",
        "A compression below 1 mixes prior shift with overconfidence: the probes' intercept is unpenalised at every C, so each",
        "block is coded with the gender share of the speakers before it, and a block whose share differs costs more than a",
        "bit an utterance whatever the states carry (features of pure noise in this design can reach compression 0.75).",
    ]


def mustshe_pairing(attention: dict, mustshe: dict) -> dict:
    """Fucci et al.'s Figure 1 pairing: the attention probe's macro-F1 on the MuST-SHE speakers it
    is applied to (``applied_f1_macro``) against gender accuracy on category-1 sentences."""
    if mustshe.get("category_1") is None:
        raise ValueError("the MuST-SHE results have no category-1 (1F/1M) sentences to correlate with")
    return {
        "model": "whisper-base (forced es)",
        "direction": "en-es",
        "applied_f1_macro": attention["applied_f1_macro"],
        "category_1_accuracy": mustshe["category_1"]["accuracy"],
    }


def write_report(work, stores: dict[str, Path], behaviour: dict[str, Path], probes: DemoProbes, trimmed: bool) -> Path:
    out = work.out
    out.mkdir(parents=True, exist_ok=True)
    gaps = {name: json.loads(behaviour[name].read_text()) for name in ("whisper-base", "whisper-tiny.en")}
    mustshe = json.loads(behaviour["mustshe"].read_text())
    sites = probes.sites
    last = sites[-1]

    # per-position curve, control and MDL of the last layer
    real, control = probes.positional(last, "pretrained"), probes.positional(last, "shuffled control")
    arrays, control_arrays = _arrays(work, real), _arrays(work, control)
    figures.per_position(
        arrays["test_f1_macro"],
        real["mean_test_length"],
        out / "per_position",
        ema=arrays["test_f1_ema"],
        control=control_arrays["test_f1_macro"],
        mdl_bits=arrays.get("mdl_online_bits"),
        uniform_bits=arrays.get("mdl_uniform_bits"),
        frame_rate=_frame_rate(stores["whisper-base"], last),
        title=f"whisper-base {last} (synthetic voices)",
    )

    # heatmap of F1_S per site and condition
    scores = {(site, condition): probes.positional(site, condition)["f1_s"] for site in sites for condition in CONDITIONS}
    figures.site_heatmap(scores, sites, list(CONDITIONS), out / "site_heatmap", title="whisper-base: F1_S per site (synthetic voices)")

    # gaps and error distributions
    estimate = gap_estimate_names(gaps)
    figures.gap_bars(gaps, out / "gaps", title=f"{estimate} on the demo corpus (synthetic voices)")
    for language in gaps["whisper-base"]["languages"]:
        entry = gaps["whisper-base"]["languages"][language]
        figures.error_distribution(
            entry["error_distribution"],
            out / f"error_distribution_{language}",
            metric=entry["metric"].upper(),
            title=f"whisper-base, {language} (synthetic voices)",
        )

    # probe F1_S against the gap: one point per (model, language)
    f1_rows = []
    for run, row in probes.by_language():
        entry = gaps[run.model]["languages"].get(run.language, {})
        f1_rows.append(
            {
                "model": run.model,
                "language": run.language,
                "label": f"{run.model} {run.language}",
                "f1_s": row["f1_s"],
                "gap_relative": entry.get("gap_relative"),
                "gap_estimate": entry.get("gap_estimate"),
            }
        )
    table = _write_table(work.results / "f1_vs_gap.csv", f1_rows)
    usable = [r for r in f1_rows if r["gap_relative"] is not None]
    gap_fit, gap_reason = _correlate(
        table,
        "f1_s",
        "gap_relative",
        work.results / "correlation_f1_gap.json",
        out / "f1_vs_gap",
        [r["label"] for r in usable],
        [r["f1_s"] for r in usable],
        [r["gap_relative"] for r in usable],
        "probe F1_S (%)",
        f"E(F, M) (%), {estimate}",
    )

    # attention probe: its F1 on MuST-SHE against category-1 accuracy, attention profiles, confusion on MuST-SHE
    attention = probes.attention("whisper-base", "encoder.final")
    mustshe_rows = [mustshe_pairing(attention, mustshe)]
    mustshe_table = _write_table(work.results / "f1_vs_mustshe.csv", mustshe_rows)
    mustshe_fit, mustshe_reason = _correlate(
        mustshe_table,
        "applied_f1_macro",
        "category_1_accuracy",
        work.results / "correlation_f1_mustshe.json",
        out / "f1_vs_mustshe",
        [r["model"] for r in mustshe_rows],
        [r["applied_f1_macro"] for r in mustshe_rows],
        [r["category_1_accuracy"] for r in mustshe_rows],
        "attention-probe F1 on MuST-SHE (%)",
        "MuST-SHE category-1 accuracy (%)",
    )
    profiles = {"whisper-base encoder.final": _attention_weights(work, attention)}
    for run, row in probes.tiny_attention():
        profiles[f"{TINY_LABELS[run.model.removeprefix(TINY_PREFIX)]} {run.site} (random weights)"] = _attention_weights(work, row)
    figures.attention_profiles(profiles, out / "attention_profiles", title="attention weights, mean ± std")

    applied = _arrays(work, attention)
    classes = [str(c) for c in applied["applied_class_names"]]
    predicted = {i: classes[int(p > 0.5)] for i, p in zip(applied["applied_ids"], applied["applied_probabilities"])}
    sentences = [json.loads(line) for line in behaviour["mustshe"].with_name(behaviour["mustshe"].stem + ".sentences.jsonl").read_text().splitlines()]
    figures.confusion(
        [predicted[s["id"]] for s in sentences],
        [s["translation_gender"] for s in sentences],
        out / "confusion",
        classes=("female", "male"),
        title="MuST-SHE (voices the probe never trained on)",
    )

    report = out / "report.md"
    report.write_text(_markdown(work, gaps, mustshe, probes, sites, gap_fit, gap_reason, mustshe_fit, mustshe_reason, len(sentences), trimmed))
    return report


def _markdown(work, gaps, mustshe, probes, sites, gap_fit, gap_reason, mustshe_fit, mustshe_reason, confusion_count, trimmed) -> str:
    lines = [
        "# Demo report" + (" (trimmed corpus)" if trimmed else ""),
        "",
        "**The voices are synthetic** (Kokoro-82M and espeak-ng, see the corpus card). These numbers show that the pipeline runs end to",
        "end; they are not a finding about women and men, nor about Whisper.",
        "",
        f"Corpus: `{shown_path(work.corpus.root)}`. Work folder: `{shown_path(work.root)}`. Every number below is read from files in "
        f"`{shown_path(work.root / 'results')}`.",
        f"The Whisper models ran in {work.dtype} (bfloat16 where the CPU or GPU supports it natively, for speed), torch on "
        f"{work.threads} CPU threads (`--threads`).",
        "",
        *reproducibility_lines(),
        "",
        "## ASR gaps (bundled Whisper base and tiny.en)",
        "",
        *gap_table(gaps),
    ]
    lines += [
        "",
        "![gaps](gaps.png)",
        "",
        "![error distribution](error_distribution_en.png)",
        "",
        "## Probes on Whisper base",
        "",
        "Per-position logistic probes (first frames up to the longest clip), F1_S = mean F1 over the positions before the average test",
        "length in speech frames (padding excluded). Random init: the same architecture with random weights. Shuffled control:",
        "training and dev labels agreeing with the true ones on exactly half of each class, mean of three seeds.",
        "",
        "| site | " + " | ".join(CONDITIONS) + " |",
        "|---|" + "---|" * len(CONDITIONS),
    ]
    for site in sites:
        lines.append(f"| {site} | " + " | ".join(format_number(probes.positional(site, c)["f1_s"]) for c in CONDITIONS) + " |")
    last = probes.positional(sites[-1], "pretrained")
    lines += [
        "",
        f"Average test length (F1_S's span, the dashed line of the per-position figure): {average_test_length(last)}.",
        "",
        *mdl_lines(sites[-1], last),
        "",
        "![heatmap](site_heatmap.png)",
        "",
        "![per position](per_position.png)",
        "",
        "## Probe F1_S against the gap",
        "",
    ]
    lines += _fit_lines(gap_fit, gap_reason, "f1_vs_gap")
    attention = probes.attention("whisper-base", "encoder.final")
    lines += [
        "",
        "## Attention probe and MuST-SHE",
        "",
        f"Attention probe on Whisper base `encoder.final` (Adam lr {attention['config']['lr']:g}, at most {attention['config']['max_epochs']} epochs: "
        f"faster than the paper's 1e-4 on two CPU cores): macro-F1 {format_number(attention['f1_macro'])} on the demo corpus' test voices, "
        f"{format_number(attention['applied_f1_macro'])} on the {attention['applied_to']['scored']} MuST-SHE utterances it is applied to "
        "(voices outside its training split).",
        f"MuST-SHE en-es (Whisper base with Spanish forced, not a trained translation direction): category 1 (1F + 1M) coverage "
        f"{format_number(mustshe['category_1']['coverage'])}, gender accuracy {format_number(mustshe['category_1']['accuracy'])}; all categories: "
        f"coverage {format_number(mustshe['global']['coverage'])}, accuracy {format_number(mustshe['global']['accuracy'])} "
        f"(She {format_number(mustshe['genders']['She']['accuracy'])}, He {format_number(mustshe['genders']['He']['accuracy'])}).",
        "",
        "The correlation pairs the probe's macro-F1 on the MuST-SHE speakers (`applied_f1_macro`) with category-1 gender",
        "accuracy (`category_1.accuracy`), as in Fucci et al. (2025), Figure 1: not the probe's F1 on its own test split, nor",
        "accuracy over all categories.",
        "",
    ]
    lines += _fit_lines(mustshe_fit, mustshe_reason, "f1_vs_mustshe")
    lines += [
        "",
        f"Confusion of the probe's prediction with the gender of the translation on the {confusion_count} MuST-SHE sentences",
        "(read by voices the probe never trained on):",
        "",
        "![confusion](confusion.png)",
        "",
        "## Before and after the adapters (random weights)",
        "",
        "Tiny SeamlessM4T v2, S2T and a ZeroSwot stand-in with **random weights** (no checkpoint can be downloaded here): the",
        "extraction before/after the adapters and the attention probes run end to end. Random features of the waveform can still",
        "separate a few synthetic voices, and the test split holds two of them: these scores say nothing about the real models.",
        "",
        "| model | site | F1 |",
        "|---|---|---|",
    ]
    for run, row in probes.tiny_attention():
        lines.append(f"| {run.model} | {run.site} | {format_number(row['f1_macro'])} |")
    lines += ["", "![attention](attention_profiles.png)", ""]
    return "\n".join(lines) + "\n"


def reproducibility_lines() -> list[str]:
    """What makes a rerun identical, and what can still differ on another machine (measured on the
    2-core CPU the committed report comes from; see the README)."""
    return [
        "**Reproducibility.** A rerun from an empty cache on the same machine gives these numbers exactly: every random draw",
        "is seeded; espeak-ng speaks each utterance in a fresh process with a fixed noise seed (it seeded its female variants'",
        "breath noise from the clock, which moved this table's female WER between runs); Kokoro's ONNX output does not depend on",
        "the thread count (1, 2 and 4 gave the same samples); torch runs on the fixed thread count above (an attention probe's",
        "weights moved by 7e-9 between 1 and 2 threads). On another machine, expect small differences: the Whisper compute dtype",
        "follows the hardware (bfloat16 with AVX512-BF16 or CUDA, float32 elsewhere; the two differ by up to 1.8 % relative L2",
        "in encoder.final states, and gave the same 42 transcripts of the trimmed corpus), and CPU or GPU kernels round",
        "differently by instruction set (not measured here): a probe score or a transcript near a decision boundary can change.",
    ]


def shown_path(path: Path) -> str:
    """A path relative to the source checkout when it is inside one (the committed report names no machine)."""
    from extract.paths import source_checkout

    path, checkout = Path(path).resolve(), source_checkout()
    return str(path.relative_to(checkout)) if checkout and path.is_relative_to(checkout) else str(path)


def _p(value) -> str:
    return "n/a" if value is None else f"{value:.2g}" if value >= 1e-4 else "< 1e-4"


def _fit_lines(fit, reason, figure) -> list[str]:
    if fit is None:
        return [f"No correlation: {reason}.", "", f"![{figure}]({figure}.png)"]
    return [
        f"n = {fit['n']}: Pearson r {fit['pearson_r']:+.2f} (p {fit['p_value']:.3g}, 95 % CI {fit['ci95_r'][0]:+.2f} .. {fit['ci95_r'][1]:+.2f}), "
        f"R² {fit['r2']:.2f}, Spearman {fit['spearman_rho']:+.2f}. With so few points this is a smoke test of the code, not evidence.",
        "",
        f"![{figure}]({figure}.png)",
    ]
