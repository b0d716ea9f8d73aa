"""``collect``: the probe rows joined with the gap reports and MuST-SHE scores (``results/``:
``f1_vs_gap.csv``, ``f1_vs_mustshe.csv``, ``long.csv``, ``collect.json``). Finished: every table
newer than every input, and the stages it reads up to date."""

from __future__ import annotations

from pathlib import Path

from experiments.study.context import Context, Layout, StudyStage, Unit, after, newer
from experiments.study.schema import StudyError
from experiments.study.stages.behaviour import behaviour_outputs
from experiments.study.stages.probe import probe_configs, supersede_probe_rows


def collect_paths(context: Context) -> tuple[list[Path], list[Path], list[Path]]:
    probes = [context.layout.probes] if context.layout.probes.exists() else []
    return probes, behaviour_outputs(context, "asr_gap"), behaviour_outputs(context, "mustshe")


def collected_tables(layout: Layout) -> list[Path]:
    return [layout.results / name for name in ("f1_vs_gap.csv", "f1_vs_mustshe.csv", "long.csv", "collect.json")]


def plan(context: Context) -> list[Unit]:
    probes, gaps, mustshe = collect_paths(context)
    if not probes:
        return [Unit("collect", "probe rows with behaviour", False, "waits for probe rows", waits="probe")] if context.study.probes else []
    done = newer(collected_tables(context.layout), [*probes, *gaps, *mustshe])
    unit = Unit("collect", f"{len(gaps)} gap and {len(mustshe)} MuST-SHE results with the probe rows", done, "", None, (probes, gaps, mustshe))
    return [after(context, unit, ("probe", "asr_gap", "mustshe"))]


def run(context: Context, units: list[Unit]) -> None:
    from experiments.results.collect import collect, write_collected

    (unit,) = units
    if unit.job is None:
        grids = ", ".join(grid.where for grid in context.study.probes)
        raise StudyError(f"{context.study.path}: {grids}: the probe stage wrote no row to {context.layout.probes}; check the grids' models, corpora and sites")
    configs, unknown = probe_configs(context)
    if not unknown:
        supersede_probe_rows(context, configs)  # a probe stage stopped before it could
    probes, gaps, mustshe = unit.job
    result = collect(probes, gaps, mustshe)
    written = write_collected(result, context.layout.results)
    print(
        f"[study] collect: {len(result.f1_vs_gap)} f1_vs_gap rows, {len(result.f1_vs_mustshe)} f1_vs_mustshe rows, {len(result.long)} scores; "
        f"unmatched: {result.unmatched_summary()} -> {written['collect'].parent}",
        flush=True,
    )


COLLECT = StudyStage(plan, run, lambda context: collected_tables(context.layout))
