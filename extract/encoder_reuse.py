"""The encoder run once for extraction and transcription, within one process (opt-in).

A study extracts Whisper's encoder states and then transcribes the same clips with the same model:
each clip's 30-s encoder pass, most of a Whisper transcription's cost on a CPU, would run twice.
Inside :func:`reusing_encoder_outputs`, an extraction that runs the whole encoder keeps each clip's
encoder output, keyed by the digest of the model's weights and of the clip's input features, and a
transcription whose every clip of a batch is kept decodes from those outputs instead of running the
encoder again (each kept output is handed over once and then dropped).

The reuse is exact where the encoder's kernels give a clip the same numbers whatever batch it is in;
on a CPU they do (float32 and bfloat16, batches of 1, 4 and 8 clips compared bit for bit), and the
demo's transcripts are compared with a run without reuse in ``docs/demo.md``. Interventions edit the
encoder's states while they are installed, so nothing is kept or reused under them
(:func:`suspended`). A randomly initialised model's outputs are not kept (such a model is a control,
not transcribed), and the kept outputs are bounded by ``max_bytes``: past it, clips are recomputed.
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is loaded by the models that use this; extract.runner imports it for --help too
    import torch

_ACTIVE: _KeptOutputs | None = None


class _KeptOutputs:
    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.kept: dict[tuple[str, str], torch.Tensor] = {}
        self.bytes = 0
        self.reused = 0
        self.suspended = 0
        self._weights: weakref.WeakKeyDictionary[torch.nn.Module, tuple[tuple[int, ...], str]] = weakref.WeakKeyDictionary()

    def weights_digest(self, model: torch.nn.Module) -> str:
        """The digest of the model's parameters, computed once per model and state of its tensors (an
        in-place edit, such as a random re-initialisation, bumps their versions: a new digest)."""
        versions = tuple(parameter._version for parameter in model.parameters())
        known = self._weights.get(model)
        if known is None or known[0] != versions:
            digest = hashlib.blake2b(digest_size=16)
            for name, parameter in model.named_parameters():
                digest.update(f"{name} {parameter.dtype} {tuple(parameter.shape)}".encode())
                digest.update(_raw_bytes(parameter))
            device = next(model.parameters()).device
            known = self._weights[model] = (versions, f"{device}:{digest.hexdigest()}")
        return known[1]


def _raw_bytes(tensor: torch.Tensor) -> bytes:
    """The tensor's bytes as stored, whatever its dtype (numpy has no bfloat16)."""
    import torch

    host = tensor.detach().cpu().contiguous().reshape(-1)
    return host.view(torch.uint8).numpy().tobytes()


def _feature_digests(features: torch.Tensor) -> list[str]:
    return [hashlib.blake2b(_raw_bytes(row), digest_size=16).hexdigest() for row in features]


@contextmanager
def reusing_encoder_outputs(max_bytes: int = 2 << 30) -> Iterator[None]:
    """Keep and reuse encoder outputs (see the module's docstring) until the block ends."""
    global _ACTIVE
    previous, _ACTIVE = _ACTIVE, _KeptOutputs(max_bytes)
    try:
        yield
    finally:
        _ACTIVE = previous


@contextmanager
def suspended() -> Iterator[None]:
    """Neither keep nor reuse while the block runs (interventions are installed)."""
    active = _ACTIVE
    if active is not None:
        active.suspended += 1
    try:
        yield
    finally:
        if active is not None:
            active.suspended -= 1


def _active() -> _KeptOutputs | None:
    return _ACTIVE if _ACTIVE is not None and not _ACTIVE.suspended else None


def keep(model: torch.nn.Module, features: torch.Tensor, outputs: torch.Tensor) -> None:
    """Keep ``outputs[i]``, the encoder output of ``features[i]`` (nothing when reuse is off)."""
    active = _active()
    if active is None:
        return
    weights = active.weights_digest(model)
    for digest, output in zip(_feature_digests(features), outputs):
        key, size = (weights, digest), output.numel() * output.element_size()
        if key in active.kept:  # the same clip extracted again (another manifest holds it): kept once
            continue
        if active.bytes + size > active.max_bytes:
            return
        active.kept[key] = output.detach().clone()
        active.bytes += size


def take(model: torch.nn.Module, features: torch.Tensor) -> torch.Tensor | None:
    """The kept encoder outputs of a batch of ``features`` stacked, if every clip of it is kept (and
    then no longer kept); None otherwise, and the encoder runs."""
    active = _active()
    if active is None or not active.kept:
        return None
    weights = active.weights_digest(model)
    keys = [(weights, digest) for digest in _feature_digests(features)]
    if not all(key in active.kept for key in keys):
        return None
    import torch

    outputs = [active.kept.pop(key) for key in keys]
    active.bytes -= sum(output.numel() * output.element_size() for output in outputs)
    active.reused += len(outputs)
    return torch.stack(outputs).to(features.device)


def reused() -> int:
    """How many clips have decoded from a kept encoder output in the current block."""
    return _ACTIVE.reused if _ACTIVE is not None else 0
