"""Flags and the error path shared by the ``python -m experiments.X`` command lines.

Every output is ``--out``; the target language is ``--tgt-lang``. Old spellings (``--json``,
``--lang``, ``--target-language``) stay for one release as deprecated aliases: they still work and
print a one-line note. A user error (a bad input file, a missing path) is one line on stderr,
``error: ...``, and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from extract.manifest import ManifestError

# errors a user can fix (a malformed or missing input, an unwritable output), shown as one line
USER_ERRORS: tuple[type[BaseException], ...] = (ManifestError, OSError)


class _DeprecatedAlias(argparse.Action):
    """An old spelling of a flag: stores into the new flag's destination and prints a one-line note."""

    def __init__(self, option_strings, dest, replacement: str, **kwargs):
        self.replacement = replacement
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"note: {option_string} is deprecated; use {self.replacement}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def _add_with_aliases(parser: argparse.ArgumentParser, flag: str, aliases: tuple[str, ...], required: bool, **kwargs) -> None:
    """``flag`` and its deprecated ``aliases``, one of which may be given (exactly one if ``required``)."""
    group = parser.add_mutually_exclusive_group(required=required)
    action = group.add_argument(flag, **kwargs)
    for alias in aliases:
        group.add_argument(alias, dest=action.dest, type=action.type, metavar=action.metavar, default=argparse.SUPPRESS,
                           action=_DeprecatedAlias, replacement=flag, help=argparse.SUPPRESS)


def add_out_argument(parser: argparse.ArgumentParser, help: str, required: bool = True, type: Callable = Path) -> None:
    """``--out`` (``args.out``), with ``--json`` as its deprecated alias."""
    _add_with_aliases(parser, "--out", ("--json",), required, type=type, help=help)


def add_tgt_lang_argument(parser: argparse.ArgumentParser, aliases: tuple[str, ...], help: str, required: bool = False,
                          default: str | None = None) -> None:
    """``--tgt-lang`` (``args.tgt_lang``), with the command's old spellings as deprecated aliases."""
    _add_with_aliases(parser, "--tgt-lang", aliases, required, default=default, help=help)


def fail(message: str) -> int:
    """One line on stderr, exit status 2."""
    print(f"error: {message}", file=sys.stderr)
    return 2


def run_cli(command: Callable[[], int], *errors: type[BaseException]) -> int:
    """``command()``'s exit status; a user error (:data:`USER_ERRORS` and ``errors``) becomes
    :func:`fail`'s one line and status 2."""
    try:
        return command()
    except (*USER_ERRORS, *errors) as error:
        return fail(str(error))
