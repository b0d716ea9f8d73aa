"""The stages of the study: every ``python -m experiments.X`` command, as the stage table lists them.

A command is a record of :data:`experiments.stage_table.TABLE` with a ``module``: a module of this
package that defines ``main(argv)`` and runs it under ``if __name__ == "__main__":``
(``experiments/probe.py`` -> ``probe``), or a package with such a ``__main__.py``
(``experiments.recipes.realvoices`` -> ``realvoices``). A new command is its module and one line of
the table; a command module the table lacks is caught by ``tests/cli/test_entry_point.py``. Listing
reads the table and each module's docstring from its file (no stage is imported, so it is instant);
the reference imports each stage and formats its parser (``build_parser()``) at a fixed width, so it
does not depend on the terminal it is made in.
"""

from __future__ import annotations

import argparse
import ast
import functools
import importlib
import re
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from experiments.stage_table import BY_COMMAND, BY_NAME
from extract.errors import UserError

PACKAGE_FOLDER = Path(__file__).resolve().parent
PROGRAM = "speech-gender"  # the console script ([project.scripts] in pyproject.toml)
SUMMARY_WIDTH = 80  # characters of a stage's summary in the listing (with the names: under 100 columns)
REFERENCE_WIDTH = 100  # columns of the help texts in docs/cli.md
# "``python -m experiments.X ARGS``", optionally "(what ``make x`` runs)", then ":" opens a stage's docstring
COMMAND_PREFIX = re.compile(r"^``python -m [\w.]+[^`]*``\s*(\([^)]*\))?\s*:\s*")


class StageError(UserError, Exception):
    """Stages that cannot be told apart, or a stage without a parser to document."""


@dataclass(frozen=True)
class Stage:
    """``speech-gender NAME`` runs ``python -m MODULE``; ``path`` holds its ``main``."""

    name: str
    module: str
    path: Path
    summary: str

    def load(self) -> ModuleType:
        """The module that defines ``main`` (for a package, its ``__main__``)."""
        return importlib.import_module(f"{self.module}.__main__" if self.path.name == "__main__.py" else self.module)


def stages() -> list[Stage]:
    """Every command of the stage table, by name."""
    return sorted((_stage(name, record.module) for name, record in BY_COMMAND.items()), key=lambda stage: stage.name)


def _stage(name: str, module: str) -> Stage:
    """The stage ``name`` run as ``python -m module``, its summary read from the module's file."""
    parts = module.split(".")
    if parts[0] != __package__:
        raise StageError(f"{name}: {module} is not a module of {__package__}")
    base = PACKAGE_FOLDER.joinpath(*parts[1:])
    path, docstring_of = (base / "__main__.py", base / "__init__.py") if base.is_dir() else (base.with_suffix(".py"), None)
    if not path.is_file():
        raise StageError(f"the stage table names {module} for {name}, and there is no {path.relative_to(PACKAGE_FOLDER.parent)}")
    docstring = _docstring(docstring_of) if docstring_of is not None and docstring_of.is_file() else None
    return Stage(name, module, path, summary(docstring or _docstring(path) or ""))


def _docstring(path: Path) -> str | None:
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))


def summary(docstring: str) -> str:
    """A stage's line in the listing: its docstring's first paragraph without the leading command
    (``python -m experiments.X ...``:), on one line, shortened to :data:`SUMMARY_WIDTH`."""
    paragraph = " ".join(docstring.split("\n\n")[0].split())
    text = COMMAND_PREFIX.sub("", paragraph)
    return textwrap.shorten(text[:1].upper() + text[1:], SUMMARY_WIDTH, placeholder=" …")


def listing(program: str) -> str:
    """What ``speech-gender`` and ``speech-gender --help`` print."""
    found = stages()
    width = max(len(stage.name) for stage in found)
    lines = [
        f"usage: {program} STAGE [ARGS ...]",
        "",
        f"Runs `python -m experiments.STAGE ARGS`. `{program} STAGE --help` shows a stage's flags,",
        f"`{program} --reference` every stage's (docs/cli.md), `{program} --version` the package version.",
        "",
        "stages:",
        *(f"  {stage.name:<{width}}  {stage.summary}" for stage in found),
    ]
    return "\n".join(lines) + "\n"


def suggestion(name: str) -> str | None:
    """The stage a mistyped ``name`` most likely meant."""
    import difflib

    names = [stage.name for stage in stages()]
    close = difflib.get_close_matches(name.replace("-", "_"), names, n=1, cutoff=0.6)
    return close[0] if close else None


def find(name: str) -> Stage | None:
    """The stage of the command ``name``, or of the study stage ``name`` (``f0`` runs ``f0_baseline``:
    :data:`experiments.stage_table.TABLE` gives both names)."""
    record = BY_NAME.get(name)
    command = record.command_name if record is not None and record.command_name else name
    return next((stage for stage in stages() if stage.name == command), None)


def roles(stage: Stage) -> str:
    """What the stage table says of a command besides its flags: a study stage, a job array."""
    record = BY_COMMAND.get(stage.name)
    if record is None:
        return ""
    said = [f"study stage `{record.name}`" if record.study else "", "job array" if record.job_array else ""]
    return ", ".join(filter(None, said))


@contextmanager
def program_name(program: str) -> Iterator[None]:
    """``sys.argv[0]`` set to ``program`` while a stage runs, so that its parser's usage lines read
    ``usage: speech-gender probe ...`` (argparse names the program from ``sys.argv[0]``)."""
    saved = sys.argv[0] if sys.argv else None
    if sys.argv:
        sys.argv[0] = program
    else:
        sys.argv.append(program)
    try:
        yield
    finally:
        if saved is None:
            sys.argv.pop(0)
        else:
            sys.argv[0] = saved


def run(stage: Stage, argv: list[str], program: str) -> int:
    """``python -m STAGE.module ARGV``: the stage's ``main(argv)`` (its ``__main__`` block does
    nothing else, a test checks it), named ``PROGRAM STAGE`` in its messages."""
    module = stage.load()
    with program_name(f"{program} {stage.name}"):
        return module.main(argv)


# --- the CLI reference (docs/cli.md) -------------------------------------------------------------


def parser_of(stage: Stage, program: str = PROGRAM) -> argparse.ArgumentParser:
    """The stage's argument parser, built as ``PROGRAM STAGE`` would build it."""
    module = stage.load()
    if not hasattr(module, "build_parser"):
        raise StageError(f"{stage.path}: no build_parser() to document the stage with; add build_parser()")
    with program_name(f"{program} {stage.name}"):
        parser = module.build_parser()
    parser.prog = f"{program} {stage.name}"  # a parser may name itself (realvoices: python -m ...); the reference uses one name
    return parser


def subcommands(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """The parser of every subcommand below ``parser`` (``figures per-position``, ``grafn fit``), depth first."""
    for action in parser._actions:  # argparse has no public accessor for its subparsers
        if isinstance(action, argparse._SubParsersAction):
            for subparser in action.choices.values():
                yield subparser
                yield from subcommands(subparser)


def fixed_width_help(parser: argparse.ArgumentParser, width: int = REFERENCE_WIDTH) -> str:
    """``parser --help`` at ``width`` columns, whatever the terminal (``COLUMNS``) says."""
    formatter = parser.formatter_class
    parser.formatter_class = functools.partial(formatter, width=width)
    try:
        return parser.format_help()
    finally:
        parser.formatter_class = formatter


def cli_reference(program: str = PROGRAM) -> str:
    """``docs/cli.md``: every stage's ``--help``, and every subcommand's, as Markdown."""
    found = stages()
    lines = [
        "# Command-line reference",
        "",
        "<!-- generated from the parsers by `python -m experiments --reference > docs/cli.md`; do not edit by hand "
        "(tests/cli/test_entry_point.py fails when it is stale) -->",
        "",
        f"Every stage runs as `{program} STAGE ARGS` or as `python -m MODULE ARGS`; `{program}` alone lists them.",
        "",
        "| stage | module | what it does | in a study, with --executor |",
        "|---|---|---|---|",
        *(f"| [{stage.name}](#{stage.name}) | `{stage.module}` | {stage.summary} | {roles(stage)} |" for stage in found),
    ]
    for stage in found:
        parser = parser_of(stage, program)
        lines += ["", f"## {stage.name}", "", f"`{program} {stage.name}` or `python -m {stage.module}`", "", *_fenced(fixed_width_help(parser))]
        for subparser in subcommands(parser):
            lines += ["", f"### {subparser.prog.removeprefix(program + ' ')}", "", *_fenced(fixed_width_help(subparser))]
    return "\n".join(lines) + "\n"


def _fenced(text: str) -> list[str]:
    return ["```text", text.rstrip("\n"), "```"]
