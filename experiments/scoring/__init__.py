"""Scoring of model outputs, library only (the ``python -m experiments.X`` modules are its command lines);
every per-group score goes through the one group-metrics frame (:mod:`.group_metrics`)."""
