"""Probes trained on stored hidden states (per-position logistic, attention, MDL, controls).

The names in ``__all__`` are the package's public API (``docs/api.md`` is generated from their
docstrings); the rest is internal and may change. They load on first use (PEP 562's module
``__getattr__``), so ``import probing`` stays cheap.
"""

from extract.exports import lazy_exports

_HOMES = {  # public name -> the module that defines it
    "KINDS": "probing.kinds",
    "ProbeKind": "probing.kinds",
    "ProbeConfig": "probing.run",
    "ProbeResult": "probing.run",
    "run_probe": "probing.run",
    "expand_grid": "probing.grid",
    "save_result": "probing.results",
    "load_rows": "probing.results",
    "load_records": "probing.results",
    "load_arrays": "probing.results",
}
__all__ = list(_HOMES)

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
