"""``python -m experiments.demo`` (what ``make demo`` runs): the demo corpus, then the demo as a study.

- :mod:`experiments.demo.__main__`: the command line (its flags and what it runs);
- :mod:`experiments.demo.pipeline`: the run, stage by stage (corpus, real voices, study, report, extras);
- :mod:`experiments.demo.work`: the work folder and the demo's study file, planned through ``experiments.study``;
- :mod:`experiments.demo.report`: the demo's figures, correlation tables and ``report.md``;
- :mod:`experiments.demo.extras`: the opt-in stages (``--extra NAME``).

The demo imports the study and the figure library (``experiments.reports``); neither imports the demo.
"""

from extract.exports import lazy_exports

_HOMES = {"compute_dtype": "experiments.demo.pipeline"}  # benchmarks/transcription.py uses it
__all__ = list(_HOMES)

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
