"""Speech models in, hidden states and hypotheses out: audio, manifests, weights, extractors, shard store.

The names in ``__all__`` are the package's public API (``docs/api.md`` is generated from their
docstrings); the rest is internal and may change. They load on first use (PEP 562's module
``__getattr__``), so ``import extract`` stays cheap: most of them import torch.
"""

from importlib import import_module

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
}
__all__ = ["__version__", *_HOMES]


def __getattr__(name: str):
    """A public name, imported from its home on first use and kept as a module global after that."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(_HOMES[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
