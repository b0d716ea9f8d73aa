"""Model families: one self-contained module each, and this registry.

A family module holds everything about its models: the extractor with its site table, the generator
with its language forcing and language codes, and the tiny random model for tests and the demo; it
exports them as ``FAMILY`` (:class:`extract.families.base.Family`). Adding a fifth family touches
one new module in extract/families/ plus one registry line in ``FAMILY_MODULES`` below.
"""

from importlib import import_module

from extract.families.base import Extractor, Family, NonFiniteError, UnknownSiteError

FAMILY_MODULES = (  # one line per family (the demo runs its tiny random models in this order)
    "whisper",
    "seamless",
    "zeroswot",
    "s2t",
)

FAMILIES: dict[str, Family] = {family.name: family for family in (import_module(f"{__name__}.{name}").FAMILY for name in FAMILY_MODULES)}


def site_role(family: str | None, site: str) -> str | None:
    """The role of ``site`` in a model of ``family`` (:meth:`Family.site_role`); None for a family not
    in the registry (a store written without its family, the F0 baseline's ``praat``)."""
    return FAMILIES[family].site_role(site) if family in FAMILIES else None


def tiny_extractor(family: str, **kwargs) -> Extractor:
    """The tiny random model of ``family`` (built offline from a config), as an extractor."""
    return FAMILIES[family].tiny_extractor(**kwargs)


__all__ = ["FAMILIES", "Extractor", "Family", "NonFiniteError", "UnknownSiteError", "site_role", "tiny_extractor"]
