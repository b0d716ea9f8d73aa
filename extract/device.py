"""The device and dtype names of every command line: ``auto`` is ``cuda`` when a GPU is visible, else ``cpu``.

Kept apart from :mod:`extract.spec` so that a parser can name the rule without importing torch
(seconds on a busy machine): torch is imported only when ``auto`` is resolved, which argparse does
after parsing, never for ``--help``.
"""

from __future__ import annotations

DTYPE_NAMES = ("float32", "float16", "bfloat16")  # model compute dtypes (extract.spec.DTYPES maps them to torch's)
DTYPE_ALIASES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}  # the spellings HuggingFace users type
AUTO = "auto"  # the default of every --device: resolved by default_device() once the flags are parsed
DEVICE_HELP = "cuda, cpu or another torch device; auto (default): cuda if a GPU is visible, else cpu"


def default_device() -> str:
    """``cuda`` when a GPU is visible, else ``cpu``."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_device(value: str) -> str:
    """A ``--device`` value: ``auto`` becomes :func:`default_device`, anything else is kept as given
    (argparse applies a flag's type to a string default too, so the default resolves the same way)."""
    return default_device() if value == AUTO else value


def dtype_name(value: str) -> str:
    """A ``--dtype`` value as its torch name: ``fp16`` -> ``float16`` (see :data:`DTYPE_ALIASES`); an
    unknown one is an argparse error listing both spellings."""
    import argparse

    name = DTYPE_ALIASES.get(value, value)
    if name not in DTYPE_NAMES:
        spelled = ", ".join(f"{name} ({alias})" for alias, name in DTYPE_ALIASES.items())
        raise argparse.ArgumentTypeError(f"{value!r} is not a dtype; choose from {spelled}")
    return name
