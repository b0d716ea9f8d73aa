"""The argparse pieces that the command lines (:mod:`experiments.cli`) and the flags derived from
declared options (:mod:`experiments.options`) both build on: a flag's file role, a list of names,
deprecated spellings, and the one ``error:`` line."""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class FileRole:
    """What a flag's value is to its command: a file or folder it reads (``input``) or writes
    (``output``). ``labelled``: values are ``LABEL=PATH`` (or parsed ``(label, path)`` pairs);
    ``sidecars``: the files an output writes beside its own path (``OUT.counts.jsonl``)."""

    kind: str
    labelled: bool = False
    sidecars: Callable[[Path], list[Path]] | None = None

    def paths(self, value) -> Iterator[Path]:
        """The paths a parsed value names (a list for ``nargs`` and ``append`` flags)."""
        for item in value if isinstance(value, list) else [value]:
            if item is None:
                continue
            if self.labelled:
                item = item[-1] if isinstance(item, tuple) else str(item).partition("=")[2]
            yield Path(item)


class DeprecatedAlias(argparse.Action):
    """An old spelling of a flag: stores into the new flag's destination and prints a one-line note."""

    def __init__(self, option_strings, dest, replacement: str, **kwargs):
        self.replacement = replacement
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"note: {option_string} is deprecated; use {self.replacement}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_renamed_argument(parser: argparse.ArgumentParser, flag: str, aliases: tuple[str, ...], required: bool = False, **kwargs) -> argparse.Action:
    """``flag`` with its old spellings, ``aliases``, as deprecated aliases: one of them may be given
    (exactly one if ``required``); returns ``flag``'s action."""
    group = parser.add_mutually_exclusive_group(required=required)
    action = group.add_argument(flag, **kwargs)
    for alias in aliases:
        group.add_argument(
            alias,
            dest=action.dest,
            type=action.type,
            choices=action.choices,
            metavar=action.metavar,
            default=argparse.SUPPRESS,
            action=DeprecatedAlias,
            replacement=flag,
            help=argparse.SUPPRESS,
        )
    return action


class CommaList(argparse.Action):
    """A list of names (the naming rules in docs/contributing.md): comma-separated in one value
    (``--languages en,fr``); space-separated values and a repeated flag add to the list too. The
    first occurrence replaces the default. ``choices`` are checked per name (argparse would check
    the raw ``en,fr``)."""

    def __init__(self, option_strings, dest, nargs="+", choices=None, **kwargs):
        self.names = tuple(choices) if choices is not None else None
        super().__init__(option_strings, dest, nargs=nargs, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        values = [values] if isinstance(values, str) else values  # nargs=None: one value
        names = [name.strip() for value in values for name in value.split(",") if name.strip()]
        unknown = [name for name in names if self.names is not None and name not in self.names]
        if unknown:
            nearest = difflib.get_close_matches(unknown[0], self.names, n=1)
            hint = f"; did you mean {nearest[0]!r}?" if nearest else ""
            parser.error(f"{option_string} {','.join(unknown)}: not one of {','.join(self.names)}{hint}")
        current = getattr(namespace, self.dest, None)
        setattr(namespace, self.dest, [*([] if current is None or current is self.default else current), *names])


def fail(message: str) -> int:
    """One line on stderr (a message with line breaks, as HDF5 writes some, is joined), exit status 2."""
    line = " ".join(message.splitlines())
    print(f"error: {line}", file=sys.stderr)
    return 2
