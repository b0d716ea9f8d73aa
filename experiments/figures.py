"""The study's figures, drawn from saved results only (nothing is recomputed here).

Each function writes a PNG and a PDF (same stem) and returns their paths. Sizes and fonts are set
for a one- or two-column paper figure.

- ``per_position``: F1 per position with its EMA, the shuffled-label control and the average test
  length in speech frames, padding excluded (Attanasio et al. 2024, figs. 3 and 9), and the MDL
  codelength per position;
- ``gap_bars``: E(F, M) per language, named by its estimate, with speaker-bootstrap intervals and
  t-test marks where the interval excludes 0, one panel per dataset (Attanasio et al. 2024, fig. 2);
- ``scatter_with_fit``: probe score against a behaviour score with the OLS line (Attanasio et al.
  2024, fig. 4; Fucci et al. 2025, fig. 1);
- ``error_distribution``: share of records whose error rate is at least x, per gender (Attanasio et
  al. 2024, fig. 5);
- ``attention_profiles``: mean ± std attention weights over 100 interpolated positions (Fucci et al.
  2025, fig. 2);
- ``confusion``: probe prediction against the gender of the translation (Fucci et al. 2025, figs. 3-4);
- ``site_heatmap``: a score per site and condition (pretrained, random init, control).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

FONT_SIZE = 9


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": FONT_SIZE, "axes.titlesize": FONT_SIZE + 1, "axes.labelsize": FONT_SIZE, "legend.fontsize": FONT_SIZE - 1,
                         "axes.spines.top": False, "axes.spines.right": False, "savefig.bbox": "tight", "savefig.dpi": 150})
    return plt


def save(figure, out: str | Path) -> list[Path]:
    """``out`` without or with a suffix: writes ``out.png`` and ``out.pdf``."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    paths = [out.with_suffix(".png"), out.with_suffix(".pdf")]
    for path in paths:
        figure.savefig(path)
    _pyplot().close(figure)
    return paths


def per_position(f1: np.ndarray, mean_test_length: float, out, *, ema: np.ndarray | None = None, control: np.ndarray | None = None,
                 mdl_bits: np.ndarray | None = None, uniform_bits: np.ndarray | None = None, frame_rate: float | None = None, title: str = "") -> list[Path]:
    """F1 (percent) per position; optional EMA, control curve and MDL codelengths per position (bits).

    ``mean_test_length`` is the row's ``mean_test_length``: mean speech frames of the test utterances,
    drawn as a vertical line (F1_S averages the positions left of it).
    """
    plt = _pyplot()
    panels = 2 if mdl_bits is not None else 1
    figure, axes = plt.subplots(panels, 1, figsize=(6.0, 2.4 * panels), sharex=True, squeeze=False, layout="constrained")
    positions = np.arange(len(f1))
    top = axes[0, 0]
    top.plot(positions, f1, color="0.75", linewidth=0.8, label="F1 per position")
    if ema is not None:
        top.plot(positions, ema, color="C0", linewidth=1.5, label="EMA (span 3)")
    if control is not None:
        top.plot(np.arange(len(control)), control, color="C3", linewidth=1.0, linestyle="--", label="shuffled-label control")
    for axis in axes[:, 0]:
        axis.axvline(mean_test_length, color="k", linestyle=":", linewidth=1.0)
    top.text(mean_test_length, 98, " avg. test length (speech)", fontsize=FONT_SIZE - 1, va="top")
    top.set_ylim(0, 100)
    top.set_ylabel("macro F1 (%)")
    top.legend(loc="lower left", bbox_to_anchor=(0, 1.0), frameon=False, ncol=3)
    if title:
        figure.suptitle(title)
    if mdl_bits is not None:
        bottom = axes[1, 0]
        bottom.plot(np.arange(len(mdl_bits)), mdl_bits, color="C2", label="online codelength")
        if uniform_bits is not None:
            bottom.plot(np.arange(len(uniform_bits)), uniform_bits, color="0.5", linestyle="--", label="uniform codelength")
        bottom.set_ylabel("MDL (bits)")
        bottom.legend(loc="upper right", frameon=False)
    label = "position (frame)" if not frame_rate else f"position (frame, {1000 / frame_rate:.0f} ms each)"
    axes[-1, 0].set_xlabel(label)
    return save(figure, out)


def _significance(p_value) -> str:
    if p_value is None or not np.isfinite(p_value):
        return ""
    return "**" if p_value < 0.01 else "*" if p_value < 0.05 else ""


def gap_mark(entry: dict) -> str:
    """The published t-test's mark for one ``asr_gap`` language entry, shown only where the
    speaker-bootstrap interval excludes 0: the t-test is pseudo-replicated, so a star beside an
    interval that crosses 0 would claim what the interval does not support."""
    low, high = entry["bootstrap"].get("ci95") or [None, None]
    if low is None or high is None or low <= 0 <= high:
        return ""
    return _significance(entry["bootstrap"].get("p_value"))


def gap_axis_label(results: dict[str, dict]) -> str:
    """The y label of :func:`gap_bars`, naming the estimate the ``gap_relative`` values are (from the JSON)."""
    from experiments.gaps import GAP_ESTIMATES

    names = {GAP_ESTIMATES.get(entry.get("gap_estimate"), "estimate not recorded")
             for result in results.values() for entry in result["languages"].values() if entry.get("gap_relative") is not None}
    return "E(F, M) (%)  >0: worse for women\n" + " / ".join(sorted(names))


def gap_bars(results: dict[str, dict], out, title: str = "") -> list[Path]:
    """``results``: dataset name -> ``experiments.asr_gap`` JSON. Bars of E(A, B) per language (the
    estimate each file's ``gap_estimate`` names, written in the y label), the speaker-bootstrap 95 %
    interval as error bars, * p < 0.05 and ** p < 0.01 from the resampling t-test where the interval
    excludes 0 (:func:`gap_mark`)."""
    plt = _pyplot()
    figure, axes = plt.subplots(1, len(results), figsize=(3.2 * len(results) + 0.6, 2.9), squeeze=False, sharey=True, layout="constrained")
    for axis, (dataset, result) in zip(axes[0], results.items()):
        entries = {lang: entry for lang, entry in sorted(result["languages"].items()) if entry.get("gap_relative") is not None}
        gaps = [entry["gap_relative"] for entry in entries.values()]
        axis.bar(list(entries), gaps, color=["C1" if g > 0 else "C0" for g in gaps])
        for index, (lang, entry) in enumerate(entries.items()):
            low, high = entry["bootstrap"].get("ci95") or [None, None]
            top = gaps[index]
            if low is not None and high is not None:  # drawn around its own centre: the resampled E may lie outside it
                axis.errorbar(index, (low + high) / 2, yerr=(high - low) / 2, fmt="none", ecolor="k", capsize=3, linewidth=0.8)
                top = max(top, high)
            if gap_mark(entry):
                axis.text(index, top, gap_mark(entry), ha="center", va="bottom")
        axis.axhline(0, color="k", linewidth=0.6)
        axis.set_title(dataset)
    axes[0, 0].set_ylabel(gap_axis_label(results))
    figure.supxlabel("error bars: 95 % speaker-bootstrap interval\n* p < 0.05, ** p < 0.01: published resampling t-test\n"
                     "(pseudo-replicated), marked only where the interval excludes 0", fontsize=FONT_SIZE - 2)
    if title:
        figure.suptitle(title)
    return save(figure, out)


def scatter_with_fit(xs, ys, labels, fit: dict | None, xlabel: str, ylabel: str, out, title: str = "") -> list[Path]:
    """Points (labelled) and, when ``fit`` holds an OLS fit, its line and the correlation."""
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(3.6, 3.0), layout="constrained")
    axis.scatter(xs, ys, color="C0", zorder=3)
    for x, y, label in zip(xs, ys, labels or []):
        if label:
            axis.annotate(label, (x, y), textcoords="offset points", xytext=(4, 3), fontsize=FONT_SIZE - 1)
    if fit:
        grid = np.linspace(min(xs), max(xs), 50)
        axis.plot(grid, fit["slope"] * grid + fit["intercept"], color="C3", linewidth=1.2)
        axis.text(0.02, 0.98, f"r = {fit['pearson_r']:+.2f}, R² = {fit['r2']:.2f}, n = {fit['n']}", transform=axis.transAxes, va="top")
    else:
        axis.text(0.02, 0.98, f"n = {len(xs)}: too few points for a fit", transform=axis.transAxes, va="top")
    axis.set_xlabel(xlabel)
    axis.set_ylabel(ylabel)
    if title:
        axis.set_title(title)
    return save(figure, out)


def error_distribution(distribution: dict[str, list[float]], out, metric: str = "WER", title: str = "") -> list[Path]:
    """``distribution``: group -> share of records (percent) with error rate >= x, for x = 0..100."""
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(3.6, 2.8), layout="constrained")
    for index, (group, shares) in enumerate(distribution.items()):
        axis.step(np.arange(len(shares)), shares, where="post", color=f"C{index}", label=group)
    axis.set_xlabel(f"{metric} (%) of a record, at least")
    axis.set_ylabel("records (%)")
    axis.set_ylim(0, 100)
    axis.legend(frameon=False)
    if title:
        axis.set_title(title)
    return save(figure, out)


def attention_profiles(profiles: dict[str, list[np.ndarray]], out, points: int = 100, title: str = "") -> list[Path]:
    """``profiles``: label (model and site) -> one weight vector per utterance; each is resampled to
    ``points`` positions, then mean ± std across utterances."""
    from probing.modules import interpolate_weights

    plt = _pyplot()
    figure, axes = plt.subplots(len(profiles), 1, figsize=(4.8, 1.5 * len(profiles) + 0.4), sharex=True, squeeze=False, layout="constrained")
    grid = np.arange(points)
    for axis, (label, weights) in zip(axes[:, 0], profiles.items()):
        curves = interpolate_weights(weights, points)
        mean, std = np.nanmean(curves, axis=0), np.nanstd(curves, axis=0)
        axis.plot(grid, mean, color="C0")
        axis.fill_between(grid, mean - std, mean + std, color="C0", alpha=0.25, linewidth=0)
        axis.set_ylabel("weight")
        axis.set_title(f"{label} ({len(weights)} utterances)", loc="left")
    axes[-1, 0].set_xlabel(f"position, interpolated to {points} points")
    if title:
        figure.suptitle(title)
    return save(figure, out)


TRANSLATION_GENDERS = ("feminine", "masculine", "mixed", "none")


def confusion(predictions: list[str], translation_genders: list[str], out, classes: tuple[str, str] = ("female", "male"), title: str = "") -> list[Path]:
    """Counts of (probe prediction, gender of the translation's speaker-referred words)."""
    plt = _pyplot()
    matrix = np.zeros((len(classes), len(TRANSLATION_GENDERS)), dtype=int)
    for predicted, translated in zip(predictions, translation_genders):
        matrix[classes.index(predicted), TRANSLATION_GENDERS.index(translated)] += 1
    figure, axis = plt.subplots(figsize=(3.8, 2.2), layout="constrained")
    axis.imshow(matrix, cmap="Blues", vmin=0)
    for (row, column), count in np.ndenumerate(matrix):
        axis.text(column, row, str(count), ha="center", va="center", color="white" if count > matrix.max() / 2 else "black")
    axis.set_xticks(range(len(TRANSLATION_GENDERS)), TRANSLATION_GENDERS)
    axis.set_yticks(range(len(classes)), classes)
    axis.set_xlabel("gender of the translation")
    axis.set_ylabel("probe prediction")
    axis.spines[:].set_visible(False)
    if title:
        axis.set_title(title)
    return save(figure, out)


def site_heatmap(scores: dict[tuple[str, str], float], sites: list[str], conditions: list[str], out, label: str = "F1_S (%)", title: str = "") -> list[Path]:
    """``scores``: (site, condition) -> score; missing cells stay blank."""
    plt = _pyplot()
    matrix = np.full((len(conditions), len(sites)), np.nan)
    for (site, condition), value in scores.items():
        matrix[conditions.index(condition), sites.index(site)] = value
    figure, axis = plt.subplots(figsize=(0.62 * len(sites) + 1.8, 0.42 * len(conditions) + 1.2), layout="constrained")
    image = axis.imshow(matrix, cmap="viridis", vmin=0, vmax=100, aspect="auto")
    for (row, column), value in np.ndenumerate(matrix):
        if np.isfinite(value):
            axis.text(column, row, f"{value:.0f}", ha="center", va="center", color="white" if value < 60 else "black", fontsize=FONT_SIZE - 1)
    axis.set_xticks(range(len(sites)), [s.removeprefix("encoder.") for s in sites], rotation=45, ha="right")
    axis.set_yticks(range(len(conditions)), conditions)
    axis.spines[:].set_visible(False)
    figure.colorbar(image, ax=axis, label=label, fraction=0.04)
    if title:
        axis.set_title(title)
    return save(figure, out)


def _pairs(values: list[str], what: str) -> dict[str, str]:
    pairs = {}
    for value in values:
        label, separator, target = value.partition("=")
        if not separator:
            raise SystemExit(f"error: {what} takes LABEL=VALUE, got {value!r}")
        pairs[label] = target
    return pairs


def main(argv: list[str] | None = None) -> int:
    """``python -m experiments.figures KIND ... --out PATH``: one figure from saved results."""
    import argparse
    import json
    import sys

    from experiments.probe import load_arrays, load_attention, load_rows

    parser = argparse.ArgumentParser(description="Draw one figure (PNG + PDF) from saved results; the correlation scatter is `experiments.correlate --plot`.")
    kinds = parser.add_subparsers(dest="kind", required=True)
    position = kinds.add_parser("per-position", help="F1 per position, EMA, control, avg. test length, MDL")
    position.add_argument("--probes", required=True, type=Path, help="results JSONL of experiments.probe")
    position.add_argument("--run", required=True, help="run id of a positional probe")
    position.add_argument("--control", help="run id of its shuffled-label control")
    gaps = kinds.add_parser("gaps", help="E per language, a panel per dataset")
    gaps.add_argument("--gap", required=True, nargs="+", help="DATASET=experiments.asr_gap JSON")
    distribution = kinds.add_parser("error-distribution", help="share of records at or above each error rate, per gender")
    distribution.add_argument("--gap", required=True, type=Path)
    distribution.add_argument("--language", required=True)
    attention = kinds.add_parser("attention", help="mean ± std attention over 100 interpolated positions")
    attention.add_argument("--probes", required=True, type=Path)
    attention.add_argument("--run", required=True, nargs="+", help="LABEL=run id of an attention probe")
    matrix = kinds.add_parser("confusion", help="probe prediction against the gender of the translation")
    matrix.add_argument("--probes", required=True, type=Path)
    matrix.add_argument("--run", required=True, help="run id of an attention probe tested (or applied, --apply-to) on the MuST-SHE store")
    matrix.add_argument("--sentences", required=True, type=Path, help="OUT.sentences.jsonl of experiments.mustshe")
    heatmap = kinds.add_parser("heatmap", help="score per site and condition")
    heatmap.add_argument("--probes", required=True, type=Path)
    heatmap.add_argument("--store", required=True, help="the pretrained model's store")
    heatmap.add_argument("--random-store", help="the random-init twin's store")
    heatmap.add_argument("--probe", default="positional")
    heatmap.add_argument("--language", help="only runs restricted to this language (default: runs over all languages)")
    for sub in (position, gaps, distribution, attention, matrix, heatmap):
        sub.add_argument("--out", required=True, type=Path, help="output path without suffix (PNG and PDF are written)")
        sub.add_argument("--title", default="")
    args = parser.parse_args(argv)

    if args.kind == "per-position":
        row, arrays = load_rows(args.probes)[args.run], load_arrays(args.probes, args.run)
        control = load_arrays(args.probes, args.control)["test_f1_macro"] if args.control else None
        paths = per_position(arrays["test_f1_macro"], row["mean_test_length"], args.out, ema=arrays.get("test_f1_ema"), control=control,
                             mdl_bits=arrays.get("mdl_online_bits"), uniform_bits=arrays.get("mdl_uniform_bits"), title=args.title)
    elif args.kind == "gaps":
        paths = gap_bars({label: json.loads(Path(path).read_text()) for label, path in _pairs(args.gap, "--gap").items()}, args.out, args.title)
    elif args.kind == "error-distribution":
        entry = json.loads(args.gap.read_text())["languages"][args.language]
        paths = error_distribution(entry["error_distribution"], args.out, entry["metric"].upper(), args.title)
    elif args.kind == "attention":
        paths = attention_profiles({label: load_attention(args.probes, run)[1] for label, run in _pairs(args.run, "--run").items()}, args.out, title=args.title)
    elif args.kind == "confusion":
        row, arrays = load_rows(args.probes)[args.run], load_arrays(args.probes, args.run)
        classes = [str(c) for c in arrays.get("applied_class_names", ["male", "female"])]
        if "applied_ids" in arrays:
            ids, probabilities = [str(i) for i in arrays["applied_ids"]], arrays["applied_probabilities"]
        else:
            ids, _, probabilities = load_attention(args.probes, args.run)
        predicted = {i: classes[int(p > 0.5)] for i, p in zip(ids, probabilities)}
        sentences = [json.loads(line) for line in args.sentences.read_text().splitlines() if line.strip()]
        kept = [s for s in sentences if s["id"] in predicted]
        if not kept:
            print(f"error: no sentence of {args.sentences} was predicted by run {row['run_id']}", file=sys.stderr)
            return 2
        paths = confusion([predicted[s["id"]] for s in kept], [s["translation_gender"] for s in kept], args.out, title=args.title)
    else:
        rows = [r for r in load_rows(args.probes).values() if r["config"]["probe"] == args.probe and r["config"].get("language") == args.language]
        key = "f1_s" if args.probe == "positional" else "f1_macro"
        scores, sites = {}, []
        for r in rows:
            store, control = r["config"]["store"], r["config"]["control"]
            condition = ("random init" if store == args.random_store else "pretrained" if store == args.store else None)
            if condition and control != "none":
                condition = f"{control} control" if condition == "pretrained" else None
            if condition:
                scores[(r["config"]["site"], condition)] = r[key]
                sites += [] if r["config"]["site"] in sites else [r["config"]["site"]]
        from extract.store import ShardReader

        order = [s for s in ShardReader(args.store).sites if s in sites]
        conditions = sorted({c for _, c in scores}, key=lambda c: (c != "pretrained", c))
        paths = site_heatmap(scores, order, conditions, args.out, label=f"{key} (%)", title=args.title)
    print(f"[figures] wrote {', '.join(map(str, paths))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
