"""The effect of patching per site: one line per pairing (cross, within) over the sites in forward
order, of the primary (graded) metric, and cross minus within with its interval (target and source speakers
resampled; PNG + PDF, the reports' style).
A joint site (``A+B``, patched together) takes its place after its last member, labelled by its name."""

from __future__ import annotations

from pathlib import Path

from experiments.reports.plots import paper_style, pyplot, save
from experiments.results.records import members

COLOURS = {"cross": "#c0392b", "within": "#7f8c8d", "difference": "#2c3e50"}
Y_LABELS = {"asr": "Δ log-prob of the reference (nats per token)", "st": "Δ gender margin of the reference (nats)"}  # the primary (graded) metric


@paper_style
def effect_per_site(summary: dict, out: str | Path) -> list[Path]:
    """``summary``: what :func:`experiments.patching.run.write_summary` writes; ``out``: the path without suffix."""
    plt = pyplot()
    sites = sorted(summary["sites"], key=lambda site: (summary["sites"][site]["site_index"], len(members(site))))  # a joint site after its last member
    positions = list(range(len(sites)))
    figure, axis = plt.subplots(figsize=(max(4.0, 0.55 * len(sites) + 2.0), 3.2))
    for pairing in ("cross", "within"):
        values = [summary["sites"][site]["pairings"].get(pairing, {}).get("effect") for site in sites]
        shown = [(x, y) for x, y in zip(positions, values) if y is not None]
        if shown:
            axis.plot(*zip(*shown), marker="o", color=COLOURS[pairing], label=pairing)
    difference = [(x, summary["sites"][site]) for x, site in zip(positions, sites) if summary["sites"][site].get("cross_minus_within") is not None]
    if difference:
        xs = [x for x, _ in difference]
        ys = [entry["cross_minus_within"] for _, entry in difference]
        low = [max(0.0, y - entry["ci95"][0]) if entry["ci95"][0] is not None else 0.0 for y, (_, entry) in zip(ys, difference)]
        high = [max(0.0, entry["ci95"][1] - y) if entry["ci95"][1] is not None else 0.0 for y, (_, entry) in zip(ys, difference)]
        axis.errorbar(xs, ys, yerr=[low, high], fmt="s--", color=COLOURS["difference"], capsize=3, label="cross − within (95% CI)")
    axis.axhline(0.0, color="black", linewidth=0.6)
    axis.set_xticks(positions, sites, rotation=45, ha="right")
    axis.set_ylabel(Y_LABELS[summary["subject"]["task"]])
    axis.set_title(f"{summary['subject']['model']}: {summary['component']} patched ({summary['direction']}), {summary['frames']} frames")
    if axis.get_legend_handles_labels()[0]:  # nothing scored (e.g. no frame replaced): an empty plot, no legend
        axis.legend(frameon=False)
    return save(figure, out)
