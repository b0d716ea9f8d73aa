"""Probes trained on stored hidden states (per-position logistic, attention, MDL, controls).

The names in ``__all__`` are the package's public API (``docs/api.md`` is generated from their
docstrings); the rest is internal and may change. They load on first use (PEP 562's module
``__getattr__``), so ``import probing`` stays cheap.
"""

from importlib import import_module

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


def __getattr__(name: str):
    """A public name, imported from its home on first use and kept as a module global after that."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(_HOMES[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
