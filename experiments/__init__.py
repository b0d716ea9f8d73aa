"""The study layer: scoring of model outputs, the joins of probe rows with behaviour, correlation,
studies, figures and the ``python -m experiments.X`` command lines.

The names in ``__all__`` are the package's public API (``docs/api.md`` is generated from their
docstrings); the rest is internal and may change. They load on first use (PEP 562's module
``__getattr__``), so ``import experiments`` stays cheap. The join is exported as
``collect_results`` and the correlation of two table columns as ``correlate_columns``: the plain
names ``collect`` and ``correlate`` are the command-line modules ``experiments.collect`` and
``experiments.correlate``, which importing them would put in their place.
"""

from extract.exports import lazy_exports

_HOMES = {  # public name -> (the module that defines it, its name there)
    "load_study": ("experiments.study.schema", "load_study"),
    "run_study": ("experiments.study.runner", "run_study"),
    "collect_results": ("experiments.results.collect", "collect"),
    "write_collected": ("experiments.results.collect", "write_collected"),
    "Collected": ("experiments.results.collect", "Collected"),
    "correlate_columns": ("experiments.results.correlation", "correlate_columns"),
}
__all__ = list(_HOMES)

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
