"""A package's public names, loaded on first use (PEP 562): ``extract``, ``probing`` and
``experiments`` each list theirs with the module that defines it, so that importing the package
stays cheap (most of those modules import torch)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib import import_module


def lazy_exports(package: str, homes: dict[str, str | tuple[str, str]]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package``. ``homes`` maps each public name to
    the module that defines it, or to (module, its name there) where the two names differ. A name is
    imported from its home on first use and kept as a module global after that."""
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str):
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        home = homes[name]
        module, attribute = home if isinstance(home, tuple) else (home, name)
        value = getattr(import_module(module), attribute)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *homes})

    return __getattr__, __dir__
