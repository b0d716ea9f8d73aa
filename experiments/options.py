"""Command-line flags and study-file keys derived from a stage's options (:mod:`extract.options`).

A stage declares its options once, as typed dataclass fields with their help, choices, defaults and
checks (``extract.stage_options.ExtractOptions``, ``probing.run.ProbeConfig``, ...).
:func:`add_options` turns them into argparse flags, with the file roles of :mod:`experiments.argkit`
(so the output guard sees them), :func:`from_args` builds the options back from the parsed flags
(a refused value is one ``error:`` line naming the flag); :mod:`experiments.study.study_file` gives a
study file's sections their keys, types and defaults from the same fields. ``docs/cli.md`` is
generated from the parsers, so it follows too.

How a field becomes a flag: ``--field-name`` (or the declared ``flag``); a ``bool`` is a switch
(``store_true``; a field that defaults to True needs a declared ``--no-...`` flag, ``store_false``);
``X | None`` takes an X and defaults to "not given"; a ``tuple`` of paths is a list of files
(space-separated, the flag repeatable), as is a ``tuple`` whose values a declared ``parse`` reads
one by one (``COLUMN=VALUE`` pairs), a ``tuple`` of names a comma-separated list
(:class:`experiments.argkit.CommaList`); a fixed-length ``tuple`` (``tuple[int, int]``) is one value
its ``parse`` reads (``2514,2546``); a field without a default is a required flag.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from experiments.argkit import CommaList, FileRole, add_renamed_argument, fail
from extract.options import Option, OptionError, check_options, declared, default_of


def _base(hint: Any) -> tuple[Any, bool]:
    """The type a field holds besides None, and whether None is allowed (``int | None`` -> int, True)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        kinds = [kind for kind in typing.get_args(hint) if kind is not types.NoneType]
        return (kinds[0] if len(kinds) == 1 else hint), types.NoneType in typing.get_args(hint)  # several kinds: a string the field's checks read
    return hint, False


def _is_sequence(kind: Any) -> bool:
    """A list of values (``tuple[X, ...]``, ``list[X]``); a fixed-length tuple (``tuple[int, int]``) is one value, read by ``parse``."""
    origin = typing.get_origin(kind)
    return origin is list or (origin is tuple and typing.get_args(kind)[-1:] == (Ellipsis,))


def flag_of(item: dataclasses.Field, declaration: Option) -> str:
    """The command-line spelling of an option."""
    return declaration.flag or "--" + item.name.replace("_", "-")


def options_of(cls: type, skip: tuple[str, ...] = ()) -> Iterator[tuple[dataclasses.Field, Option]]:
    """The fields of ``cls`` that are command-line flags, but those in ``skip``."""
    return ((item, declaration) for item, declaration in declared(cls) if declaration.command and item.name not in skip)


def add_options(parser, cls: type, skip: tuple[str, ...] = (), optional: tuple[str, ...] = ()) -> None:
    """Adds a flag to ``parser`` (a parser or an argument group) for each option of ``cls`` but ``skip``;
    those in ``optional`` are not required even without a default (the command may get them another
    way: ``probe --grid`` names the store and site in its file)."""
    hints = typing.get_type_hints(cls)
    for item, declaration in options_of(cls, skip):
        _add_option(group_of(parser, declaration.group), item, declaration, hints[item.name], item.name in optional)


def group_of(parser, title: str | None):
    """The argument group ``title`` of ``parser`` (made on first use), or the parser itself."""
    if title is None:
        return parser
    return next((group for group in parser._action_groups if group.title == title), None) or parser.add_argument_group(title)


def _add_option(parser, item: dataclasses.Field, declaration: Option, hint: Any, optional: bool = False) -> argparse.Action:
    flag, default = flag_of(item, declaration), default_of(item)
    kind, _ = _base(hint)
    kwargs: dict[str, Any] = {"dest": item.name, "help": declaration.help.replace("%", "%%")}  # argparse formats helps with %
    if default is dataclasses.MISSING:
        kwargs["required"] = not optional
    elif not _is_sequence(kind):
        kwargs["default"] = default
    if kind is bool:
        kwargs["action"] = "store_false" if default is True else "store_true"
    elif _is_sequence(kind):
        element = typing.get_args(kind)[0]
        kwargs["default"] = None if default in (dataclasses.MISSING, None) else list(default)
        if element is Path or declaration.role or declaration.parse:  # files, or values each parsed (``COLUMN=VALUE``)
            kwargs.update(nargs="+", action="extend", type=declaration.parse or element)
        else:
            kwargs.update(action=CommaList, choices=declaration.choices, nargs=None if declaration.one_value else "+")
    else:
        kwargs["type"] = declaration.parse or (kind if kind in (int, float, Path) else None)
        if declaration.choices is not None:
            kwargs["choices"] = declaration.choices
    if declaration.metavar:
        kwargs["metavar"] = declaration.metavar
    elif kind is not bool and "choices" not in kwargs and flag != "--" + item.name.replace("_", "-"):
        kwargs["metavar"] = flag.removeprefix("--").replace("-", "_").upper()  # named as spelled, not as the field
    spellings = (flag, *declaration.also)
    if declaration.aliases and declaration.also:
        raise ValueError(f"{item.name}: give its other spellings as aliases (deprecated) or also (not), not both")
    if declaration.aliases:
        action = add_renamed_argument(parser, flag, declaration.aliases, **kwargs)
    else:
        action = parser.add_argument(*spellings, **kwargs)
    if declaration.role:
        action.file_role = FileRole(declaration.role, sidecars=declaration.sidecars)
    return action


def from_args(cls: type, args: argparse.Namespace, skip: tuple[str, ...] = (), **given: Any):
    """``cls`` built from the parsed flags of its options (but ``skip``) and ``given`` values (which
    win over a flag of the same name); a value it refuses is one ``error:`` line naming the flags,
    exit status 2."""
    hints = typing.get_type_hints(cls)
    values = {}
    for item, _ in options_of(cls, skip):
        value = getattr(args, item.name)
        values[item.name] = tuple(value) if isinstance(value, list) and _is_sequence(_base(hints[item.name])[0]) else value
    try:
        made = cls(**(values | given))
        check_options(made)  # every declared bound, in classes whose own checks leave some out
        return made
    except OptionError as error:
        raise SystemExit(fail(spelled(cls, error))) from None


def spelled(cls: type, error: OptionError) -> str:
    """An :class:`OptionError` of ``cls`` with its options spelled as flags."""
    flags = {item.name: flag_of(item, declaration) for item, declaration in declared(cls)}
    return error.spelled(lambda name: flags.get(name, name))
