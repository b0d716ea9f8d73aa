"""Which sites a patch run patches: single sites, as stores name them, and joint ones.

A joint site ``A+B`` (``--sites encoder.layer.2+encoder.layer.3``) patches its members in the same
forward pass (:func:`extract.patching.patched_together`); it is one row per pair and one entry of the
summary, named by its members in forward order. Its ``site_index`` is its last member's: everything
after that site runs on patched states.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from experiments.results.records import JOINT, members
from extract.options import OptionError

if TYPE_CHECKING:
    from extract.families.base import Extractor


def check_joint(name: str) -> None:
    """A joint site joins two or more different site names (never ``all`` or every:K)."""
    if JOINT not in name:
        return
    parts = members(name)
    fix = "join two or more different site names with + (e.g. encoder.layer.2+encoder.layer.3)"
    if any(not part or part == "all" or part.startswith("every:") for part in parts):
        raise OptionError.refused("sites", name, f"a joint site must {fix}")
    twice = sorted({part for part in parts if parts.count(part) > 1})
    if twice:
        raise OptionError.refused("sites", name, f"names {', '.join(twice)} twice; a joint site must {fix}")


def resolve_sites(extractor: Extractor, names: list[str] | str, component: str = "residual") -> list[str]:
    """The sites a run patches: single sites (``all``, names or every:K, as stores name them) and joint
    ones (their members checked and put in forward order, so ``B+A`` is ``A+B``), in forward order of
    their last member, a joint site after the single site it ends at. ``all`` and every:K choose among
    the sites a patch can overwrite (a derived view, ZeroSwot's ``post_adapter_no_special``, is left
    out; with a block ``component``, among the encoder layers); a derived site, or a site without the
    component, named is refused."""
    from extract.families.base import select_sites
    from extract.patching import check_site, patchable_sites

    joint = [name for name in ([] if isinstance(names, str) else names) if JOINT in name]
    single = [names] if isinstance(names, str) else [name for name in names if JOINT not in name]
    selection = len(single) == 1 and (single[0] == "all" or single[0].startswith("every:"))
    chosen = select_sites(patchable_sites(extractor, component), single, extractor.family) if selection else extractor.resolve_sites(single) if single else []
    sites = chosen + [JOINT.join(extractor.resolve_sites(members(name))) for name in joint]
    for site in sites:
        for member in members(site):
            check_site(extractor, member, component)
    order = {name: index for index, name in enumerate(extractor.site_table())}
    return sorted(dict.fromkeys(sites), key=lambda site: (order[members(site)[-1]], len(members(site))))
