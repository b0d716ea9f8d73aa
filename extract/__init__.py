"""Speech models in, hidden states and hypotheses out: audio, manifests, weights, extractors, shard store.

The names in ``__all__`` are the package's public API (``docs/api.md`` is generated from their
docstrings); the rest is internal and may change. They load on first use (PEP 562's module
``__getattr__``), so ``import extract`` stays cheap: most of them import torch.
"""

from extract.exports import lazy_exports

__version__ = "0.1.0"

_HOMES = {  # public name -> the module that defines it
    "FAMILIES": "extract.families",
    "ModelSpec": "extract.spec",
    "load_extractor": "extract.spec",
    "load_generator": "extract.spec",
    "ExtractionJob": "extract.jobs",
    "extract": "extract.jobs",
    "TranscriptionJob": "extract.jobs",
    "transcribe": "extract.jobs",
    "Utterance": "extract.manifest",
    "read_manifest": "extract.manifest",
    "write_manifest": "extract.manifest",
    "ShardReader": "extract.store",
    "ActivationBatches": "extract.activations",
}
__all__ = ["__version__", *_HOMES]

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
