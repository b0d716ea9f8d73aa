"""The study's figures, drawn from saved results only (nothing is recomputed here).

``python -m experiments.figures KIND ...`` draws one of them from result files; the demo's report
(``experiments.demo.report``) and ``experiments.correlate --plot`` call these functions directly.

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
- ``site_heatmap``: a score per site and condition (pretrained, random init, control), its cells
  gathered from result rows by ``site_condition_scores``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from experiments.results.correlation import MIN_ROWS
from experiments.results.records import F1VsMustSheRow
from experiments.scoring.gaps import GAP_ESTIMATES
from extract.diskfull import write_whole
from extract.paths import canonical_path
from probing.data import DEFAULT_SPLIT
from probing.kinds import headline

DECODER_ROLE = "decoder"  # the site_role of a decoder store's sites (extract.families.base.DECODER; that module loads torch)

FONT_SIZE = 9
PAPER_STYLE = {
    "font.size": FONT_SIZE,
    "axes.titlesize": FONT_SIZE + 1,
    "axes.labelsize": FONT_SIZE,
    "legend.fontsize": FONT_SIZE - 1,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "savefig.bbox": "tight",
    "savefig.dpi": 150,
}


def paper_style(draw: Callable[..., list[Path]]) -> Callable[..., list[Path]]:
    """Decorator of a function that draws and saves a figure: it runs with :data:`PAPER_STYLE` in a
    ``matplotlib.rc_context``, so a notebook's or script's own rcParams are left as they were."""

    @functools.wraps(draw)
    def styled(*args, **kwargs) -> list[Path]:
        import matplotlib

        with matplotlib.rc_context(PAPER_STYLE):
            return draw(*args, **kwargs)

    return styled


def pyplot():
    """pyplot, imported on first drawing. A backend the caller chose (a notebook's, ``MPLBACKEND``,
    ``matplotlib.use``) is kept; when none was chosen (a command line, a script), Agg: no window and
    no display needed. It must be chosen before pyplot picks one itself."""
    import matplotlib

    if matplotlib.get_backend(auto_select=False) is None:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure_paths(out: str | Path) -> list[Path]:
    """The files :func:`save` writes for ``out`` (without or with a suffix): ``out.png`` and ``out.pdf``."""
    out = Path(out)
    return [out.with_suffix(".png"), out.with_suffix(".pdf")]


def save(figure, out: str | Path) -> list[Path]:
    """``out`` without or with a suffix: writes ``out.png`` and ``out.pdf``, each whole or not at all
    (through a temporary file: a run killed while it saves leaves no half-written figure)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    paths = figure_paths(out)
    try:
        for path in paths:
            write_whole(path, lambda temporary, suffix=path.suffix[1:]: figure.savefig(temporary, format=suffix))
    finally:
        pyplot().close(figure)
    return paths


@paper_style
def per_position(
    f1: np.ndarray,
    mean_test_length: float,
    out,
    *,
    ema: np.ndarray | None = None,
    control: np.ndarray | None = None,
    mdl_bits: np.ndarray | None = None,
    uniform_bits: np.ndarray | None = None,
    frame_rate: float | None = None,
    title: str = "",
) -> list[Path]:
    """F1 (percent) per position; optional EMA, control curve and MDL codelengths per position (bits).

    ``mean_test_length`` is the row's ``mean_test_length``: mean speech frames of the test utterances,
    drawn as a vertical line (F1_S averages the positions left of it).
    """
    plt = pyplot()
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
    top.text(mean_test_length, 2, " avg. test length (speech)", fontsize=FONT_SIZE - 1, va="bottom")  # at the floor, where no F1 curve runs
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
        bottom.legend(loc="best", frameon=False)  # the codelengths peak anywhere: matplotlib finds the corner they leave free
    label = "position (frame)" if not frame_rate else f"position (frame, {1000 / frame_rate:.0f} ms each)"
    axes[-1, 0].set_xlabel(label)
    return save(figure, out)


def gap_mark(entry: dict) -> str:
    """The published t-test's mark for one ``asr_gap`` language entry, shown only where the
    speaker-bootstrap interval excludes 0 and rests on enough speakers: the t-test is
    pseudo-replicated, so a star beside an interval that crosses 0 (or that a handful of speakers
    make unreliable) would claim what the interval does not support."""
    low, high = entry["bootstrap"].get("ci95") or [None, None]
    if low is None or high is None or low <= 0 <= high or entry["bootstrap"].get("ci95_note"):
        return ""
    p_value = entry["bootstrap"].get("p_value")
    if p_value is None or not np.isfinite(p_value):
        return ""
    return "**" if p_value < 0.01 else "*" if p_value < 0.05 else ""


def gap_estimate_note(results: dict[str, dict]) -> str:
    """The estimate the ``gap_relative`` values are (from the JSON), for :func:`gap_bars`'s footnote."""
    names = {
        GAP_ESTIMATES.get(entry.get("gap_estimate"), "estimate not recorded")
        for result in results.values()
        for entry in result["languages"].values()
        if entry.get("gap_relative") is not None
    }
    return "bars: " + " / ".join(sorted(names))


def undefined_gap_languages(results: dict[str, dict]) -> list[str]:
    """The languages with both groups but no E: the second group (men) made no error, and E divides by
    its rate (a language missing a group has no E either, and is not listed: it has no bar to explain)."""
    return [
        language
        for result in results.values()
        for language, entry in sorted(result["languages"].items())
        if entry.get("gap_relative") is None and not entry.get("missing_groups") and len(entry.get("groups") or {}) >= 2
    ]


def no_error_languages(results: dict[str, dict]) -> list[str]:
    """The languages whose E is -100: the first group (women) made no error at all, so E is -100
    whatever the second group's rate (E = 100 (0 - WER(M)) / WER(M))."""
    return [
        language
        for result in results.values()
        for language, entry in sorted(result["languages"].items())
        if entry.get("gap_relative") is not None and abs(entry["gap_relative"] + 100.0) < 1e-9
    ]


@paper_style
def gap_bars(results: dict[str, dict], out, title: str = "") -> list[Path]:
    """``results``: dataset name -> ``experiments.asr_gap`` JSON. Bars of E(A, B) per language (the
    estimate each file's ``gap_estimate`` names, written in the y label), the speaker-bootstrap 95 %
    interval as error bars, * p < 0.05 and ** p < 0.01 from the resampling t-test where the interval
    excludes 0 (:func:`gap_mark`)."""
    plt = pyplot()
    figure, axes = plt.subplots(1, len(results), figsize=(3.2 * len(results) + 1.2, 3.6), squeeze=False, sharey=True, layout="constrained")
    for axis, (dataset, result) in zip(axes[0], results.items()):
        entries = {lang: entry for lang, entry in sorted(result["languages"].items()) if entry.get("gap_relative") is not None}
        gaps = [entry["gap_relative"] for entry in entries.values()]
        axis.bar(list(entries), gaps, color=["C1" if g > 0 else "C0" for g in gaps])
        for index, entry in enumerate(entries.values()):
            low, high = entry["bootstrap"].get("ci95") or [None, None]
            top = max(gaps[index], 0.0)
            if low is not None and high is not None:  # drawn around its own centre: the resampled E may lie outside it
                axis.errorbar(index, (low + high) / 2, yerr=(high - low) / 2, fmt="none", color="k", ecolor="k", capsize=4, linewidth=0.8)
                top = max(top, high)
            # the value, so that E = 0 (no bar) and a zero-width interval still show; † no or an unreliable interval
            unreliable = low is None or high is None or entry["bootstrap"].get("ci95_note")
            text = f"{gaps[index]:+.1f}" + (" †" if unreliable else "") + (f" {gap_mark(entry)}" if gap_mark(entry) else "")
            axis.annotate(text, (index, top), xytext=(0, 3), textcoords="offset points", ha="center", va="bottom", fontsize=FONT_SIZE - 2)
        axis.axhline(0, color="k", linewidth=0.6)
        axis.set_title(dataset)
    axes[0, 0].set_ylabel(axis_label("gap_relative"))  # E in words with its sign; the estimate is in the footnote
    perfect, undefined = no_error_languages(results), undefined_gap_languages(results)
    figure.supxlabel(
        f"{gap_estimate_note(results)}; error bars: 95 % speaker-bootstrap interval\n(† none, or too few speakers for a reliable one)\n"
        "* p < 0.05, ** p < 0.01: published resampling t-test\n(pseudo-replicated), marked only where the interval excludes 0"
        + (f"\nE = −100 ({', '.join(perfect)}): the women's WER is 0 (no error at all)" if perfect else "")
        + (f"\nno bar ({', '.join(undefined)}): the men's WER is 0, and E divides by it" if undefined else ""),
        fontsize=FONT_SIZE - 2,
    )
    if title:
        figure.suptitle(title)
    return save(figure, out)


@paper_style
def f1_vs_mustshe(rows: Iterable[F1VsMustSheRow], fit: dict | None, xlabel: str, ylabel: str, out, title: str = "") -> list[Path]:
    """``experiments.collect``'s MuST-SHE pairing (``f1_vs_mustshe.csv``) drawn: each row's probe F1 on
    the MuST-SHE speakers against category-1 gender accuracy, labelled by model, site and target
    language (a row without both numbers is left out), with ``fit`` (the pairing's entry of the
    study's ``correlations.json``) where it holds one."""
    shown = [row for row in rows if row.applied_f1_macro is not None and row.category_1_accuracy is not None]
    return scatter_with_fit(
        [row.applied_f1_macro for row in shown],
        [row.category_1_accuracy for row in shown],
        [f"{row.model} {row.site} {row.tgt_lang}" for row in shown],
        fit if fit and "pearson_r" in fit else None,
        xlabel,
        ylabel,
        out,
        title=title,
    )


# what a table's column is, in words with its unit, for an axis (experiments.collect's tables)
AXIS_LABELS = {
    "f1_s": "probe F1_S: macro-F1 over speech positions (%)",
    "f1_macro": "probe macro-F1 (%)",
    "applied_f1_macro": "probe macro-F1 on the applied corpus (%)",
    "gap_relative": "E(F, M): relative WER gap (%)\n>0: worse for women",
    "delta_rel": "Δrel(F, M): WER gap over the mean (%)",
    "category_1_accuracy": "MuST-SHE category-1 gender accuracy (%)",
    "cross_minus_within": "patched WER, cross − within pairs (points)",
}


def axis_label(column: str) -> str:
    """``column`` in words with its unit where it is one of :data:`AXIS_LABELS`, else as named."""
    return AXIS_LABELS.get(column, column)


def fit_statistics(fit: dict) -> str:
    """The lines above a scatter: r with its Pearson p (and its permutation p, where the fit holds one
    over the points themselves), R² and n; with clusters, the cluster-aware line of
    :func:`_cluster_statistics` under it."""
    tests = [f"p {fit['p_value']:.2g}"] if fit.get("p_value") is not None else []
    if fit.get("p_permutation") is not None and "n_clusters" not in fit:
        tests.append(f"perm. p {fit['p_permutation']:.2g}")
    p = f" ({', '.join(tests)})" if tests else ""
    return f"r = {fit['pearson_r']:+.2f}{p}, R² = {fit['r2']:.2f}, n = {fit['n']}" + _cluster_statistics(fit)


def _cluster_statistics(fit: dict) -> str:
    """A line under a clustered fit's r: its clusters, the permutation p over them (and the smallest
    it can be), r between and within clusters; empty for a fit without clusters."""
    if "n_clusters" not in fit:
        return ""
    between, within = (f"{fit[key]:+.2f}" if fit[key] is not None else "n/a" for key in ("r_between", "r_within"))
    return (
        f"\n{fit['n_clusters']} clusters ({fit.get('cluster_by', 'cluster')}): perm. p = {fit['p_permutation']:.2g} "
        f"(min {fit['p_permutation_floor']:.2g}), r between = {between}, within = {within}"
    )


@paper_style
def scatter_with_fit(xs, ys, labels, fit: dict | None, xlabel: str, ylabel: str, out, title: str = "", reason: str = "") -> list[Path]:
    """Points (labelled) and, when ``fit`` holds an OLS fit of at least
    :data:`experiments.results.correlation.MIN_ROWS` points (the one rule of the study, its report
    and the demo), its line and the correlation (:func:`fit_statistics`; with clusters, e.g. Fucci et
    al.'s 3 models, also the cluster-aware p and r); else ``reason`` (why there is none, e.g. the
    correlation's note). The statistics go above the axes, where no point's label can cover them; a
    label is written on the side of its point that faces the middle, so it stays inside the axes."""
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(3.8, 3.2), layout="constrained")
    axis.scatter(xs, ys, color="C0", zorder=3)
    middle = (min(xs) + max(xs)) / 2 if len(xs) else 0.0
    for x, y, label in zip(xs, ys, labels or []):
        if label:
            right = x > middle
            axis.annotate(label, (x, y), textcoords="offset points", xytext=(-4 if right else 4, 3), ha="right" if right else "left", fontsize=FONT_SIZE - 1)
    axis.margins(x=0.15, y=0.15)
    if fit and fit.get("n", len(xs)) >= MIN_ROWS:
        grid = np.linspace(min(xs), max(xs), 50)
        axis.plot(grid, fit["slope"] * grid + fit["intercept"], color="C3", linewidth=1.2)
        statistics = fit_statistics(fit)
    else:
        statistics = f"n = {len(xs)}, no fit: {reason}" if reason else f"n = {len(xs)}: no fit (a fit needs {MIN_ROWS} points)"
    axis.set_title("\n".join(part for part in (title, statistics) if part), fontsize=FONT_SIZE)
    axis.set_xlabel(xlabel)
    axis.set_ylabel(ylabel)
    return save(figure, out)


@paper_style
def error_distribution(distribution: dict[str, list[float]], out, metric: str = "WER", title: str = "") -> list[Path]:
    """``distribution``: group -> share of records (percent) with error rate >= x, for x = 0..100."""
    plt = pyplot()
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


@paper_style
def attention_profiles(profiles: dict[str, list[np.ndarray]], out, points: int = 100, title: str = "") -> list[Path]:
    """``profiles``: label (model and site) -> one weight vector per utterance; each is resampled to
    ``points`` positions, then mean ± std across utterances."""
    from probing.modules import interpolate_weights  # torch: imported when drawn, so that --help stays fast

    plt = pyplot()
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


@paper_style
def confusion(predictions: list[str], translation_genders: list[str], out, classes: tuple[str, str] = ("female", "male"), title: str = "") -> list[Path]:
    """Counts of (probe prediction, gender of the translation's speaker-referred words)."""
    plt = pyplot()
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


@paper_style
def site_heatmap(
    scores: dict[tuple[str, str], float],
    sites: list[str],
    conditions: list[str],
    out,
    label: str = "F1_S (%)",
    title: str = "",
    xlabel: str = "",
    ylabel: str = "",
    chance: float | None = None,
) -> list[Path]:
    """``scores``: (site, condition) -> score; missing cells stay blank; ``xlabel``, ``ylabel``: the axes'
    titles; ``chance``: the score of guessing, a white line on the colour bar."""
    plt = pyplot()
    matrix = np.full((len(conditions), len(sites)), np.nan)
    for (site, condition), value in scores.items():
        matrix[conditions.index(condition), sites.index(site)] = value
    # wide and tall enough for a two-line title and the colour bar's label, however few the cells
    figure, axis = plt.subplots(figsize=(max(0.62 * len(sites) + 3.0, 5.0), max(0.42 * len(conditions) + 1.6, 2.8)), layout="constrained")
    image = axis.imshow(matrix, cmap="viridis", vmin=0, vmax=100, aspect="auto")
    for (row, column), value in np.ndenumerate(matrix):
        if np.isfinite(value):
            axis.text(column, row, f"{value:.0f}", ha="center", va="center", color="white" if value < 60 else "black", fontsize=FONT_SIZE - 1)
    axis.set_xticks(range(len(sites)), [s.removeprefix("encoder.") for s in sites], rotation=45, ha="right")
    axis.set_yticks(range(len(conditions)), conditions)
    axis.spines[:].set_visible(False)
    bar = figure.colorbar(image, ax=axis, label=label, fraction=0.06, aspect=12)
    if chance is not None:
        bar.ax.axhline(chance, color="white", linewidth=1.5)
    axis.set_xlabel(xlabel)
    axis.set_ylabel(ylabel)
    if title:
        axis.set_title(title)
    return save(figure, out)


def site_condition_scores(
    rows: Iterable[dict], store: str, random_store: str | None, probe: str, language: str | None, site_order: list[str], split: str = DEFAULT_SPLIT
) -> tuple[dict[tuple[str, str], float], list[str], list[str], str]:
    """The cells of :func:`site_heatmap` from probe result rows: (scores, sites, conditions, score key).

    Rows of ``probe`` and ``split`` restricted to ``language`` (None: runs over all languages) give F1_S
    (positional probes) or F1 (the others) for the conditions "pretrained" (``store``, no control),
    "<control> control" (``store`` with a control) and "random init" (``random_store``, no control).
    Stores are matched by canonical path (``stores/wb`` and ``./stores/wb/`` are one store).
    Sites follow ``site_order``; conditions start with "pretrained", then alphabetically.
    """
    key = headline(probe)
    store, random_store = canonical_path(store), canonical_path(random_store) if random_store else None
    scores, sites = {}, []
    for row in rows:
        config = row["config"]
        if config["probe"] != probe or config.get("language") != language or config.get("split", DEFAULT_SPLIT) != split:
            continue
        read = canonical_path(config["store"])
        condition = "random init" if read == random_store else "pretrained" if read == store else None
        if condition and config["control"] != "none":
            condition = f"{config['control']} control" if condition == "pretrained" else None
        if condition:
            scores[(config["site"], condition)] = row[key]
            sites += [] if config["site"] in sites else [config["site"]]
    ordered = [site for site in site_order if site in sites]
    conditions = sorted({condition for _, condition in scores}, key=lambda condition: (condition != "pretrained", condition))
    return scores, ordered, conditions, key


def long_condition_scores(
    rows: Iterable[dict], model: str, random_model: str | None, probe: str, language: str | None, dataset: str | None, split: str = DEFAULT_SPLIT
) -> tuple[dict[tuple[str, str], float], list[str], list[str], str]:
    """:func:`site_condition_scores` from ``experiments.collect``'s ``long.csv`` rows, by model label:
    "pretrained" (``model``, no control), "<control> control" (``model`` with a control) and "random
    init" (``random_model``, no control), each the mean over seeds of F1_S (positional probes) or F1
    (the others) of the rows of ``split``, sites in the stores' forward order (``site_index``; a decoder-state
    store's sites, ``site_role`` decoder, after the encoder's). Rows must be of one dataset
    and one language (``dataset`` / ``language`` choose; without them the rows must hold just one)."""
    key = headline(probe)
    chosen = [
        row
        for row in rows
        if row["kind"] == "probe"
        and row["probe"] == probe
        and row["metric"] == key
        and not row["applied_to"]
        and row["model"] in (model, random_model)
        and row["split"] == split
    ]
    for column, wanted in (("dataset", dataset), ("language", language)):
        if wanted is not None:
            chosen = [row for row in chosen if row[column] == wanted]
        values = sorted({row[column] or "" for row in chosen})  # an empty cell: "" from a CSV reader, None from a LongRow
        if len(values) > 1:
            raise ValueError(f"the rows of {model} hold {column}s {', '.join(values)}; choose one with --{column}")
    values: dict[tuple[str, str], list[float]] = {}
    order: dict[str, tuple[bool, float]] = {}
    for row in chosen:
        pretrained = row["model"] == model
        condition = (
            ("pretrained" if row["control"] == "none" else f"{row['control']} control") if pretrained else "random init" if row["control"] == "none" else None
        )
        if condition:
            values.setdefault((row["site"], condition), []).append(float(row["value"]))
            index = float(row["site_index"]) if row.get("site_index") not in (None, "") else float("inf")
            order.setdefault(row["site"], (row.get("site_role") == DECODER_ROLE, index))  # the encoder's sites, then a decoder store's
    scores = {cell: float(np.mean(found)) for cell, found in values.items()}
    sites = sorted(order, key=lambda site: (order[site], site))
    conditions = sorted({condition for _, condition in scores}, key=lambda condition: (condition != "pretrained", condition))
    return scores, sites, conditions, key
