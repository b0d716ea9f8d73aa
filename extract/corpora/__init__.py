"""Corpus recipes: native corpus files to manifests, one module per corpus (lhotse-style).

Each recipe reads a corpus in the layout its distributors ship and returns an
:class:`~extract.corpora.base.AdapterResult`: the utterances, and the rows whose audio file is
missing (reported and counted, never dropped silently). A malformed row raises ``ManifestError``
naming the file and line. Every recipe is importable as ``extract.corpora.<recipe>``.

A module offers its file-based recipes to ``python -m experiments.manifest`` as ``RECIPES``
(:class:`~extract.corpora.base.Recipe`: the subcommand, its reader and the arguments it declares);
:data:`RECIPES` below gathers them, one line per module in ``RECIPE_MODULES``, and the command
builds its subcommands by looping over it. ``hf_dataset`` reads Hugging Face ``datasets`` objects
in Python and has no subcommand.
"""

from importlib import import_module

from extract.corpora.base import Recipe
from extract.corpora.common_voice import common_voice
from extract.corpora.fleurs import fleurs
from extract.corpora.generic import generic_jsonl, generic_tsv
from extract.corpora.hf import hf_dataset
from extract.corpora.mtedx import mtedx
from extract.corpora.must_c import must_c
from extract.corpora.must_she import must_she
from extract.corpora.voxpopuli import voxpopuli
from extract.corpora.winost import winost

RECIPE_MODULES = (  # one line per module (the command lists its subcommands in this order)
    "common_voice",
    "fleurs",
    "voxpopuli",
    "must_c",
    "must_she",
    "mtedx",
    "winost",
    "generic",
)

RECIPES: dict[str, Recipe] = {recipe.name: recipe for module in RECIPE_MODULES for recipe in import_module(f"{__name__}.{module}").RECIPES}

ADAPTERS = {name: recipe.read for name, recipe in RECIPES.items()}  # each subcommand's reader

__all__ = [
    "ADAPTERS",
    "RECIPES",
    "RECIPE_MODULES",
    "Recipe",
    "common_voice",
    "fleurs",
    "generic_jsonl",
    "generic_tsv",
    "hf_dataset",
    "mtedx",
    "must_c",
    "must_she",
    "voxpopuli",
    "winost",
]
