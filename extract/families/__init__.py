"""Model families: one self-contained module each, and this registry.

A family module holds everything about its models: the extractor with its site table, the generator
with its language forcing and language codes, and the tiny random model for tests and the demo; it
exports them as ``FAMILY`` (:class:`extract.families.base.Family`). Adding a family touches
one new module in extract/families/ plus one registry line in ``FAMILY_MODULES`` below.

The family modules import torch (seconds on a busy machine), so they load on first use of
``FAMILIES`` or of a name from :mod:`extract.families.base` (PEP 562's module ``__getattr__``):
a parser offers ``--family`` from :data:`FAMILY_NAMES` without them, so ``--help`` stays fast.
"""

from importlib import import_module

FAMILY_MODULES = (  # one line per family (the demo runs its tiny random models in this order)
    "whisper",
    "seamless",
    "zeroswot",
    "s2t",
    "ssl",
)
FAMILY_NAMES = FAMILY_MODULES  # each module is named after its family (tests/extract/test_spec.py checks it)
_FROM_BASE = ("Extractor", "Family", "NonFiniteError", "UnknownSiteError")


def site_role(family: str | None, site: str) -> str | None:
    """The role of ``site`` in a model of ``family`` (:meth:`Family.site_role`); None for a family not
    in the registry (a store written without its family, the F0 baseline's ``praat``)."""
    families = _families()
    return families[family].site_role(site) if family in families else None


def __getattr__(name: str):
    """``FAMILIES`` (``name -> Family``, loading every family module) and the names of :mod:`extract.families.base`, on first use."""
    if name == "FAMILIES":
        return _families()
    if name in _FROM_BASE:
        return getattr(import_module(f"{__name__}.base"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _families() -> dict:
    """The registry, built once: after that ``FAMILIES`` is a plain module global."""
    if "FAMILIES" not in globals():
        globals()["FAMILIES"] = {family.name: family for family in (import_module(f"{__name__}.{module}").FAMILY for module in FAMILY_MODULES)}
    return globals()["FAMILIES"]


def tiny_extractor(family: str, **kwargs):
    """The tiny random model of ``family`` (built offline from a config), as an extractor."""
    return _families()[family].tiny_extractor(**kwargs)


__all__ = ["FAMILIES", "FAMILY_MODULES", "FAMILY_NAMES", "Extractor", "Family", "NonFiniteError", "UnknownSiteError", "site_role", "tiny_extractor"]
