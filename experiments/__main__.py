"""``python -m experiments`` and the ``speech-gender`` console script: one entry point for every stage.

``speech-gender`` (or ``--help``) lists the stages, exit status 0 (:mod:`experiments.stages` finds them in the
source tree); ``speech-gender STAGE ARGS`` runs ``python -m experiments.STAGE ARGS`` with its exit
status; ``speech-gender --reference`` prints the CLI reference (``docs/cli.md``). An unknown stage is
one ``error:`` line with the closest name, exit status 2.
"""

from __future__ import annotations

import os
import sys

from experiments import stages
from experiments.cli import fail, interrupted
from extract import __version__


def invoked_as() -> str:
    """How the user called the entry point, for usage lines: ``python -m experiments`` or the script's name."""
    program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else stages.PROGRAM
    return "python -m experiments" if program in ("__main__.py", "-m", "-c") else program


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    try:
        return _main(argv, prog)
    except KeyboardInterrupt:  # Ctrl-C while a stage loads, before its own handling starts
        return interrupted()


def _main(argv: list[str] | None, prog: str | None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    program = prog or invoked_as()
    if not argv or argv[0] in ("-h", "--help"):
        print(stages.listing(program), end="")
        return 0
    first, rest = argv[0], argv[1:]
    if first == "--version":
        print(f"speech-gender-probing {__version__}")
        return 0
    if first == "--reference":
        print(stages.cli_reference(), end="")
        return 0
    hint = f"({program} --help lists the stages)"
    if first.startswith("-"):
        return fail(f"unknown option {first}; the first argument is a stage {hint}")
    stage = stages.find(first)
    if stage is None:
        close = stages.suggestion(first)
        return fail(f"unknown stage {first!r}{f'; did you mean {close!r}?' if close else ''} {hint}")
    return stages.run(stage, rest, program)


if __name__ == "__main__":
    raise SystemExit(main())
