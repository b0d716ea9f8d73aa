"""``f0``: the F0 baseline's stores (``experiments.f0_baseline``), one per part of
``baselines.f0.corpora``. Finished: the store records this manifest (by its sha256) and pitch range rule."""

from __future__ import annotations

import time

from experiments.study import schema
from experiments.study.context import Context, StudyStage, Unit


def plan(context: Context) -> list[Unit]:
    from experiments.analysis.f0 import f0_store_current

    study, units = context.study, []
    if study.f0 is None:
        return units
    for name in study.f0["corpora"]:
        corpus = study.corpus(name)
        for part in corpus.parts:
            size = len(context.utterances(corpus, part))
            out = context.layout.f0_store(part)
            done = f0_store_current(part.manifest, out, study.f0["range_by"])
            if not done and out.exists():
                context.outdated[out] = ("f0", "another manifest or pitch range rule")
            units.append(Unit("f0", f"{schema.F0} {part.name}", done, f"{size} utterances" if done else "", None, (corpus, part, out), size))
    return units


def run(context: Context, units: list[Unit]) -> None:
    from experiments.analysis.f0 import write_f0_store

    for unit in units:
        (corpus, part, out), started = unit.job, time.time()
        written = write_f0_store(context.utterances(corpus, part), part.manifest, out, context.study.f0["range_by"], context.show_progress)
        print(
            f"[study] f0 {part.name}: {written.get('stored', 0)} stored, {len(written.get('skipped', []))} without F0 ({time.time() - started:.1f} s) -> {out}"
        )


F0 = StudyStage(plan, run, lambda context: [unit.job[2] for unit in plan(context)])
