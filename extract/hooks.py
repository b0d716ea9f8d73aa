"""One hook context manager for every model family, and one for editing what a site passes on.

:func:`capture` registers forward hooks on the modules named in a site table, keeps a detached copy
of each captured tensor, optionally stops the forward pass once every requested site has fired (no
work past the last wanted layer, no decoder), always removes its hooks, and fails loudly when a site
did not fire (e.g. a layer skipped by layerdrop) or fired twice.

:func:`edit` registers hooks that replace a site's tensor with a function of it (an eraser, a
steering vector: ``extract.interventions``) ahead of every other hook of the module, so that a
capture at the same site reads the edited state and the rest of the forward pass runs on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch import nn

from extract.errors import UserError


@dataclass(frozen=True)
class Site:
    """Where a hidden state is read: ``module`` (a dotted path), its input or output, and a transform."""

    module: str
    take: str = "output"  # "output", or "input" (the first positional argument)
    transform: Callable[[torch.Tensor], torch.Tensor] | None = None
    select: Callable[[object], torch.Tensor] | None = None  # picks the tensor out of a structured output

    def __post_init__(self):
        if self.take not in ("input", "output"):
            raise ValueError(f"take must be 'input' or 'output', got {self.take!r}")


class SiteNotCapturedError(UserError, RuntimeError):
    """A requested site did not fire during the forward pass."""


class _StopForward(Exception):
    """Raised inside a hook to end the forward pass early; never escapes :func:`capture`."""


@dataclass
class Capture:
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)


def _first_tensor(value) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)) and value and isinstance(value[0], torch.Tensor):
        return value[0]
    if hasattr(value, "last_hidden_state"):
        return value.last_hidden_state
    raise TypeError(f"cannot find a tensor in a {type(value).__name__}")


def resolve_module(model: nn.Module, path: str) -> nn.Module:
    try:
        return model.get_submodule(path)
    except AttributeError as error:
        raise KeyError(f"model {type(model).__name__} has no module {path!r}") from error


@contextmanager
def capture(model: nn.Module, sites: dict[str, Site], stop_early: bool = True) -> Iterator[tuple[Capture, Callable]]:
    """Yield ``(capture, run)``: call ``run(fn, *args, **kwargs)`` to run the forward pass.

    ``run`` returns the forward's result, or None when the pass was stopped after the last site.
    """
    result = Capture()
    handles = []

    def make_hook(name: str, site: Site):
        def store(value) -> None:
            if name in result.tensors:
                raise RuntimeError(f"site {name} ({site.module}) fired twice in one forward pass")
            tensor = (site.select(value) if site.select else _first_tensor(value)).detach()
            result.tensors[name] = site.transform(tensor) if site.transform else tensor
            if stop_early and len(result.tensors) == len(sites):
                raise _StopForward

        if site.take == "input":
            return lambda module, args, kwargs: store(args[0] if args else next(iter(kwargs.values())))
        return lambda module, args, kwargs, output: store(output)

    try:
        for name, site in sites.items():
            module = resolve_module(model, site.module)
            hook = make_hook(name, site)
            if site.take == "input":
                handles.append(module.register_forward_pre_hook(hook, with_kwargs=True))
            else:
                handles.append(module.register_forward_hook(hook, with_kwargs=True))

        def run(fn: Callable, *args, **kwargs):
            try:
                output = fn(*args, **kwargs)
            except _StopForward:
                output = None
            missing = [name for name in sites if name not in result.tensors]
            if missing:
                raise SiteNotCapturedError(
                    f"sites not captured: {', '.join(missing)} (a skipped layer? check that layerdrop is 0 and the model is in eval mode)"
                )
            return output

        yield result, run
    finally:
        for handle in handles:
            handle.remove()


def _replace_first_tensor(value, tensor: torch.Tensor):
    """``value`` (a tensor, a tuple/list led by one, or a model output) with its first tensor replaced."""
    if isinstance(value, torch.Tensor):
        return tensor
    if isinstance(value, (tuple, list)) and value and isinstance(value[0], torch.Tensor):
        return type(value)([tensor, *value[1:]])
    if hasattr(value, "last_hidden_state"):
        value.last_hidden_state = tensor
        return value
    raise TypeError(f"cannot find a tensor in a {type(value).__name__}")


@contextmanager
def edit(model: nn.Module, edits: dict[str, tuple[Site, Callable[[torch.Tensor], torch.Tensor]]]) -> Iterator[None]:
    """While inside, the tensor each ``Site`` takes (its module's first input or output) is replaced
    by ``function(tensor)``; the hooks run before any other hook of the module and are always removed.
    Sites that read a derived view (``select`` or ``transform``) cannot be edited."""
    handles = []

    def output_hook(function):
        return lambda module, args, output: _replace_first_tensor(output, function(_first_tensor(output)))

    def input_hook(function):
        def hook(module, args, kwargs):
            if args:
                return (function(args[0]), *args[1:]), kwargs
            name = next(iter(kwargs))
            return args, {**kwargs, name: function(kwargs[name])}

        return hook

    try:
        for name, (site, function) in edits.items():
            if site.select is not None or site.transform is not None:
                raise ValueError(f"site {name} reads a derived view of {site.module or 'the model'}'s output and cannot be edited")
            module = resolve_module(model, site.module)
            if site.take == "input":
                handles.append(module.register_forward_pre_hook(input_hook(function), with_kwargs=True, prepend=True))
            else:
                handles.append(module.register_forward_hook(output_hook(function), prepend=True))
        yield
    finally:
        for handle in handles:
            handle.remove()
