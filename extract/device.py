"""The device and dtype names of every command line: ``auto`` is ``cuda`` when a GPU is visible, else ``cpu``.

Kept apart from :mod:`extract.spec` so that a parser can name the rule without importing torch
(seconds on a busy machine): torch is imported only when ``auto`` is resolved, which argparse does
after parsing, never for ``--help``.
"""

from __future__ import annotations

import re

DTYPE_NAMES = ("float32", "float16", "bfloat16")  # model compute dtypes (extract.spec.DTYPES maps them to torch's)
DTYPE_ALIASES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}  # the spellings HuggingFace users type
AUTO = "auto"  # the default of every --device: resolved by default_device() once the flags are parsed
DEVICE_HELP = "cpu, cuda, cuda:N or mps; auto (default): cuda if a GPU is visible, else cpu"
DEVICE = re.compile(r"(cpu|cuda|mps)(:[0-9]+)?")


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_device(value: str) -> str:
    """A ``--device`` value: ``auto`` becomes :func:`default_device`; another must be spelled as a
    device (argparse applies a flag's type to a string default too, so the default resolves the same
    way). Whether this machine has it is checked after parsing (:func:`device_problem`), and only
    where the command runs here: a job submitted with ``--executor`` runs on a node that may have
    the GPU its login node lacks."""
    import argparse

    if value == AUTO:
        return default_device()
    if not DEVICE.fullmatch(value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a device; give cpu, cuda, cuda:N or mps")
    return value


def device_problem(device: str) -> str | None:
    """Why ``device`` cannot run a model or a probe on this machine, or None: shared by every
    ``--device`` and a study's ``device`` (torch and Lightning would fail on it only once a model is
    loaded, with a traceback)."""
    if not DEVICE.fullmatch(device):
        return f"{device!r} is not a device; give cpu, cuda, cuda:N or mps"
    import torch

    kind, _, index = device.partition(":")
    if kind == "cuda":
        if not torch.cuda.is_available():
            return f"{device}: no GPU is visible here (torch.cuda.is_available() is false); use cpu"
        if index and int(index) >= torch.cuda.device_count():
            return f"{device}: only {torch.cuda.device_count()} GPU(s) are visible (cuda:0 to cuda:{torch.cuda.device_count() - 1})"
    if kind == "mps" and not torch.backends.mps.is_available():
        return f"{device}: the Apple GPU (mps) is not available here; use cpu"
    return None


def dtype_name(value: str) -> str:
    """A ``--dtype`` value as its torch name: ``fp16`` -> ``float16`` (see :data:`DTYPE_ALIASES`); an
    unknown one is an argparse error listing both spellings."""
    import argparse

    name = DTYPE_ALIASES.get(value, value)
    if name not in DTYPE_NAMES:
        spelled = ", ".join(f"{name} ({alias})" for alias, name in DTYPE_ALIASES.items())
        raise argparse.ArgumentTypeError(f"{value!r} is not a dtype; choose from {spelled}")
    return name
