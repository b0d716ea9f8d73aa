"""Corpus recipes: native corpus files to manifests, one module per corpus (lhotse-style).

Each recipe reads a corpus in the layout its distributors ship and returns an
:class:`~extract.corpora.base.AdapterResult`: the utterances, and the rows whose audio file is
missing (reported and counted, never dropped silently). A malformed row raises ``ManifestError``
naming the file and line. Every recipe is importable as ``extract.corpora.<recipe>``;
:data:`ADAPTERS` names the file-based ones ``python -m experiments.manifest`` offers
(``hf_dataset`` reads Hugging Face ``datasets`` objects in Python).
"""

from extract.corpora.common_voice import common_voice
from extract.corpora.fleurs import fleurs
from extract.corpora.generic import generic_jsonl, generic_tsv
from extract.corpora.hf import hf_dataset
from extract.corpora.must_c import must_c
from extract.corpora.must_she import must_she
from extract.corpora.voxpopuli import voxpopuli
from extract.corpora.winost import winost

__all__ = ["ADAPTERS", "common_voice", "fleurs", "generic_jsonl", "generic_tsv", "hf_dataset", "must_c", "must_she", "voxpopuli", "winost"]

ADAPTERS = {
    "common_voice": common_voice,
    "fleurs": fleurs,
    "voxpopuli": voxpopuli,
    "must_c": must_c,
    "must_she": must_she,
    "winost": winost,
    "tsv": generic_tsv,
    "jsonl": generic_jsonl,
}
