"""``correlate``, ``figures`` and ``report`` (:mod:`experiments.study.report`): the correlations, the
figures and ``RESULTS.md`` from the collected tables. Finished: every output newer than every input,
and the stages it reads up to date."""

from __future__ import annotations

from experiments.study.context import Context, StudyStage, Unit, after, newer

WHAT = {"correlate": "correlations", "figures": "figures"}  # report: the path of RESULTS.md
READS = {"correlate": ("collect",), "figures": ("collect",), "report": ("feature_gaps", "collect", "correlate", "figures")}


def plan(context: Context, stage: str) -> list[Unit]:
    from experiments.study import report

    layout = context.layout
    if not layout.results.joinpath("collect.json").exists():
        return [Unit(stage, stage, False, "waits for collect")] if context.study.probes else []
    inputs, outputs = report.stage_files(stage, layout, context.study)
    unit = Unit(stage, WHAT.get(stage, str(layout.results_md)), newer(outputs, inputs))
    return [after(context, unit, READS[stage])]


def run(context: Context, units: list[Unit]) -> None:
    from experiments.study import report

    (unit,) = units
    write = {"correlate": report.write_correlations, "figures": report.write_figures, "report": report.write_results_md}[unit.stage]
    print(f"[study] {unit.stage}: wrote {write(context.layout, context.study)}", flush=True)


def _stage(name: str) -> StudyStage:
    def outputs(context: Context) -> list:
        from experiments.study import report

        return report.stage_files(name, context.layout, context.study)[1]

    return StudyStage(lambda context: plan(context, name), run, outputs)


CORRELATE, FIGURES, REPORT = _stage("correlate"), _stage("figures"), _stage("report")
