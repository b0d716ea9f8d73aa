"""Studies: one YAML file describes an experiment end to end; ``python -m experiments.study run`` runs it.

- :mod:`experiments.study.schema`: the study file's schema, read and checked (:func:`load_study`);
- :mod:`experiments.study.stages`: the stages it plans (extract, transcribe, probe, asr_gap, mustshe,
  st_quality, collect, correlate, figures, report), what each has finished, running the rest;
- :mod:`experiments.study.report`: the correlations, figures and ``RESULTS.md`` from the collected tables.

The command line is ``experiments/study/__main__.py``; nothing imports it. The papers' studies are
under ``experiments/studies/``.
"""
