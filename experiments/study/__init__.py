"""Studies: one YAML file describes an experiment end to end; ``python -m experiments.study run`` runs it.

- :mod:`experiments.study.schema`: the study file's schema, read and checked (:func:`load_study`);
- :mod:`experiments.study.stages`: its stages, a module each: what each has finished, running the rest;
  :mod:`experiments.study.context` is what they share, :mod:`experiments.study.runner` plans and runs them;
- :mod:`experiments.study.report`: the correlations, figures and ``RESULTS.md`` from the collected tables.

The command line is ``experiments/study/__main__.py``; nothing imports it. The papers' studies are
under ``experiments/studies/``.
"""
