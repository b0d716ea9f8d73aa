"""Studies: one YAML file describes an experiment end to end; ``python -m experiments.study run`` runs it.

- :mod:`experiments.study.schema`: the study file's schema, read and checked (:func:`load_study`);
- :mod:`experiments.study.stages`: its stages, one module each (extract, f0, transcribe, probe, the
  behaviour scores, the analyses, collect, reporting): what each has finished, and running the rest;
- :mod:`experiments.study.context`: what they share (the folder layout, the study with its manifests);
- :mod:`experiments.study.runner`: the plan and the run, in the stage table's order (:func:`run_study`);
- :mod:`experiments.study.report`: the correlations, figures and ``RESULTS.md`` from the collected tables.

The command line is ``experiments/study/__main__.py``; nothing imports it. The papers' studies are
under ``experiments/studies/``.
"""
