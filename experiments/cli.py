"""Flags and the error path shared by the ``python -m experiments.X`` command lines.

Every output is ``--out``; the target language is ``--tgt-lang``. Old spellings (``--json``,
``--lang``, ``--target-language``) stay for one release as deprecated aliases: they still work and
print a one-line note. A user error (a bad input file, a missing path) is one line on stderr,
``error: ...``, and exit status 2, never a traceback.

Every command's parser is a :class:`CommandParser` and marks the flags that name files: what it
reads (:func:`input_argument`) and what it writes (:func:`output_argument`, :func:`add_out_argument`,
with the files written beside an output, e.g. ``OUT.counts.jsonl``). An output that names a file an
input names (another spelling, a symlink or a hard link included) is refused while parsing, before
anything is read or written.
"""

from __future__ import annotations

import argparse
import copy
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TypeVar

from experiments.argkit import DeprecatedAlias, FileRole, add_renamed_argument, fail
from experiments.options import add_options
from extract.device import AUTO, DEVICE_HELP, resolve_device
from extract.diskfull import DiskFullError, is_disk_full
from extract.errors import UserError, first_line
from extract.manifest import normalize_gender

if TYPE_CHECKING:
    from extract.spec import ModelSpec

# errors a user can fix (a malformed or missing input, an unwritable output, an output another
# process writes), shown as one line: every UserError, and the system's OSError
USER_ERRORS: tuple[type[BaseException], ...] = (UserError, OSError)


def input_argument(parser, *flags: str, labelled: bool = False, **kwargs) -> argparse.Action:
    """A flag (argparse's ``add_argument`` arguments) for a file or folder the command reads."""
    action = parser.add_argument(*flags, **kwargs)
    action.file_role = FileRole("input", labelled=labelled)
    return action


def output_argument(parser, *flags: str, sidecars: Callable[[Path], list[Path]] | None = None, **kwargs) -> argparse.Action:
    """A flag (argparse's ``add_argument`` arguments) for a file or folder the command writes, and the
    files it writes beside it (``sidecars``: path -> paths)."""
    return mark_output(parser.add_argument(*flags, **kwargs), sidecars)


def mark_output(action: argparse.Action, sidecars: Callable[[Path], list[Path]] | None = None) -> argparse.Action:
    action.file_role = FileRole("output", sidecars=sidecars)
    return action


def file_role(action: argparse.Action) -> FileRole | None:
    return getattr(action, "file_role", None)


def flag_name(action: argparse.Action) -> str:
    return action.option_strings[0] if action.option_strings else (action.metavar or action.dest)


def chosen_parsers(parser: argparse.ArgumentParser, namespace: argparse.Namespace) -> Iterator[argparse.ArgumentParser]:
    """``parser`` and the subcommand parsers ``namespace`` went through (``grafn apply``: two)."""
    yield parser
    for action in parser._actions:  # argparse has no public accessor for its actions
        if isinstance(action, argparse._SubParsersAction) and getattr(namespace, action.dest, None) in action.choices:
            yield from chosen_parsers(action.choices[getattr(namespace, action.dest)], namespace)


def file_flags(parser: argparse.ArgumentParser, namespace: argparse.Namespace) -> tuple[list[tuple[str, Path]], list[tuple[str, Path, list[Path]]]]:
    """The inputs ``(flag, path)`` and outputs ``(flag, path, paths it writes)`` of a parsed command line."""
    inputs, outputs = [], []
    for current in chosen_parsers(parser, namespace):
        for action in current._actions:
            role = file_role(action)
            if role is None:
                continue
            for path in role.paths(getattr(namespace, action.dest, None)):
                if role.kind == "input":
                    inputs.append((flag_name(action), path))
                else:
                    outputs.append((flag_name(action), path, [path, *(role.sidecars(path) if role.sidecars else [])]))
    return inputs, outputs


def same_file(first: Path, second: Path) -> bool:
    """Whether two paths name one file or folder: the same device and inode where both exist (so a
    hard link, a symlink and another spelling are the same), the same resolved path otherwise."""
    try:
        return os.path.samefile(first, second)
    except OSError:
        return os.path.realpath(first) == os.path.realpath(second)


def overwritten_input(inputs: list[tuple[str, Path]], outputs: list[tuple[str, Path, list[Path]]]) -> str | None:
    """Why writing ``outputs`` would overwrite one of ``inputs`` (an existing input that an output
    or a file written beside it names), or None."""
    for out_flag, out, written in outputs:
        for in_flag, source in inputs:
            if not source.exists():
                continue  # nothing there to lose; reading it fails with its own message
            for path in written:
                if same_file(path, source):
                    what = f"{out_flag} {out}" if path == out else f"{out_flag} {out} writes {path}, which"
                    return f"{what} is the same file as {in_flag} {source}: the command would overwrite what it reads; give another {out_flag}"
    return None


class _DefaultsShown:
    """A help formatter that shows every flag's default: ``(default: X)`` is added where the help
    does not say its default already (a switch, a flag without a default and a repeatable flag that
    starts empty have none to show), and a flag without a help gets ``default: X``."""

    def _format_action(self, action: argparse.Action) -> str:
        if not action.help and action.option_strings and shows_default(action):
            action = copy.copy(action)  # the parser keeps its action as declared
            action.help = "default: %(default)s"
        return super()._format_action(action)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or not action.option_strings or not shows_default(action):
            return text
        return f"{text} (default: %(default)s)"


class DefaultsShownFormatter(_DefaultsShown, argparse.RawDescriptionHelpFormatter):
    """Descriptions as written, and every flag's default (:class:`_DefaultsShown`)."""


class WrappedDefaultsShownFormatter(_DefaultsShown, argparse.HelpFormatter):
    """Descriptions wrapped to the terminal, and every flag's default (:class:`_DefaultsShown`)."""


def shows_default(action: argparse.Action) -> bool:
    """Whether ``action`` has a default worth showing: a value, not a switch's False, None, [] or argparse's SUPPRESS."""
    if action.default in (None, "", argparse.SUPPRESS, [], ()) or action.help == argparse.SUPPRESS:
        return False
    return not isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._HelpAction, argparse._VersionAction))


class CommandParser(argparse.ArgumentParser):
    """The parser of every ``python -m experiments.X``: once parsed, an output flag that names a file
    an input flag names (:func:`overwritten_input`) is one ``error:`` line and exit status 2. Its
    help shows every flag's default (:class:`DefaultsShownFormatter`)."""

    def __init__(self, *args, **kwargs):
        shown = {argparse.HelpFormatter: WrappedDefaultsShownFormatter, argparse.RawDescriptionHelpFormatter: DefaultsShownFormatter}
        kwargs["formatter_class"] = shown.get(kwargs.get("formatter_class", argparse.HelpFormatter), kwargs.get("formatter_class"))
        super().__init__(*args, **kwargs)

    def parse_args(self, args=None, namespace=None):
        parsed = super().parse_args(args, namespace)
        problem = overwritten_input(*file_flags(self, parsed)) or device_missing_here(parsed)
        if problem is not None:
            raise SystemExit(fail(problem))
        return parsed

    def error(self, message: str):
        """argparse's error, with a hint where a checkpoint was given as the family (``--model
        openai/whisper-base``, as in HuggingFace's scripts, where ``--model`` names the checkpoint)."""
        family_flag = message.startswith(("argument --family", "argument --model")) and "invalid choice: " in message
        if family_flag and "/" in message.partition("invalid choice: ")[2].partition(" (choose")[0]:
            message += "; a hub id or a folder goes to --checkpoint, the family to --family (e.g. --family whisper --checkpoint openai/whisper-base)"
        super().error(message)


def device_missing_here(parsed: argparse.Namespace) -> str | None:
    """``--device`` names a device this machine lacks, and the command runs here (anything but
    ``--executor slurm``, whose jobs run on nodes that may have it): the problem, as ``--device``'s line."""
    device = getattr(parsed, "device", None)
    if not isinstance(device, str) or getattr(parsed, "executor", None) == "slurm":
        return None
    from extract.device import device_problem

    problem = device_problem(device)
    return f"--device {problem}" if problem else None


def program_name(module: str) -> str:
    """A command's program name in its usage lines: ``speech-gender STAGE`` (or ``python -m experiments
    STAGE``) when it runs through the entry point, which names ``sys.argv[0]`` so
    (:func:`experiments.stages.program_name`), else ``python -m MODULE`` (run as a module,
    ``sys.argv[0]`` is its file: a package's would read ``__main__.py``)."""
    called = sys.argv[0] if sys.argv else ""
    return f"python -m {module}" if not called or called.endswith(".py") else called


def add_reclaim_stale_argument(parser: argparse.ArgumentParser, what: str = "--out") -> None:
    """``--reclaim-stale``: take over the claim on ``what`` left by a killed run (:mod:`extract.claims`)."""
    parser.add_argument(
        "--reclaim-stale",
        action="store_true",
        help=f"take over the claim on {what} left on this host by a process that is gone (a job killed with SIGKILL), with a note",
    )


def add_quiet_argument(parser: argparse.ArgumentParser, help: str = "no progress bar") -> None:
    """``--quiet`` (``args.quiet``): the command prints no progress bars."""
    parser.add_argument("--quiet", action="store_true", help=help)


def output_file(value: str) -> Path:
    """An ``--out`` file path; an existing folder is refused while parsing, before any work is done."""
    path = Path(value)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{value} is a folder; give the path of a file")
    return path


def add_out_argument(parser: argparse.ArgumentParser, help: str, required: bool = True, sidecars: Callable[[Path], list[Path]] | None = None) -> None:
    """``--out`` (``args.out``, a :class:`Path` that is not a folder), with ``--json`` as its
    deprecated alias; an output (:func:`output_argument`) that writes ``sidecars`` beside it."""
    mark_output(add_renamed_argument(parser, "--out", ("--json",), required, type=output_file, help=help), sidecars)


def add_tgt_lang_argument(parser: argparse.ArgumentParser, aliases: tuple[str, ...], help: str, required: bool = False, default: str | None = None) -> None:
    """``--tgt-lang`` (``args.tgt_lang``), with the command's old spellings as deprecated aliases."""
    add_renamed_argument(parser, "--tgt-lang", aliases, required, default=default, help=help)


def two_groups(parser: argparse.ArgumentParser, text: str) -> tuple[str, str]:
    """``--groups`` as two different gender labels (``female,male``); anything else is a usage error."""
    try:
        groups = tuple(normalize_gender(g) for g in text.split(","))
    except ValueError as error:
        parser.error(f"--groups: {error}")
    if len(groups) != 2 or groups[0] == groups[1]:
        parser.error("--groups takes two different groups, e.g. female,male or other,male")
    return groups


class _RespelledAlias(DeprecatedAlias):
    """A deprecated flag whose values the new flag spells differently: ``respell`` gives the new spelling."""

    def __init__(self, option_strings, dest, respell: Callable[[str], str], **kwargs):
        self.respell = respell
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        super().__call__(parser, namespace, self.respell(values), option_string)


class _TaskOrAttribute(_RespelledAlias):
    """``--task``: a deprecated gender task (respelled as ``--groups``), or ``attribute:NAME[:A,B]``,
    kept as spelled in ``args.attribute_task`` (without a note) for the command to read with its
    ``--attribute``; a gender task also stays in ``args.groups_task``."""

    def __call__(self, parser, namespace, values, option_string=None):
        if values.startswith("attribute:"):
            namespace.attribute_task = values
            return None
        if values not in self.choices_of_groups:
            choices = ", ".join(repr(choice) for choice in sorted(self.choices_of_groups))
            parser.error(f"argument {option_string}: invalid choice: {values!r} (choose from {choices}, or attribute:NAME[:A,B])")
        namespace.groups_task = values  # a gender task: the command refuses it beside --attribute
        return super().__call__(parser, namespace, values, option_string)


def flag_given(argv: list[str] | None, flag: str) -> bool:
    """Whether the command line (``argv``, else ``sys.argv``) spells ``flag`` (``--groups A,B`` or
    ``--groups=A,B``): for a flag whose default stands for something else than the same value given."""
    return any(arg == flag or arg.startswith(flag + "=") for arg in (sys.argv[1:] if argv is None else argv))


def add_groups_argument(
    parser: argparse.ArgumentParser, help: str, old_spellings: Mapping[str, Mapping[str, str]], default: str = "female,male", attribute_tasks: bool = False
) -> None:
    """``--groups A,B`` (``args.groups``, read with :func:`two_groups`). ``old_spellings``: deprecated
    flags, each with its values and their ``--groups`` spelling (``{"--task": {"female-male": "female,male"}}``).
    ``attribute_tasks``: those flags also take ``attribute:NAME[:A,B]`` (``args.attribute_task``,
    None where not given), the spelling of an attribute probe's task."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--groups", default=default, metavar="A,B", help=help)
    if attribute_tasks:
        parser.set_defaults(attribute_task=None, groups_task=None)
    for flag, spellings in old_spellings.items():
        action = group.add_argument(
            flag,
            dest="groups",
            choices=None if attribute_tasks else sorted(spellings),
            default=argparse.SUPPRESS,
            action=_TaskOrAttribute if attribute_tasks else _RespelledAlias,
            replacement="--groups",
            respell=spellings.__getitem__,
            help=argparse.SUPPRESS,
        )
        action.choices_of_groups = tuple(spellings)


def _stop_on_sigterm(signum, frame) -> NoReturn:
    """SIGTERM (a cancelled job, ``kill``) unwinds like Ctrl-C; the process ends with status 128 + 15."""
    raise SystemExit(128 + signum)


INTERRUPTED = 128 + signal.SIGINT  # the exit status of a command stopped by Ctrl-C (130), as a shell reports it
INTERRUPTED_LINE = (
    "interrupted (Ctrl-C): what was finished is kept (complete parts, written rows) and what was being written was discarded; rerun the same command to resume"
)


def _interrupt_once(signum, frame) -> NoReturn:
    """Ctrl-C: a second one is ignored from now on, so that the unwinding it starts (a part discarded,
    claims released) and the interpreter's exit are not cut short by a traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def interrupted() -> int:
    """The one line of a command stopped by Ctrl-C, and its exit status (130); later Ctrl-Cs are ignored while it exits."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    print(f"error: {INTERRUPTED_LINE}", file=sys.stderr, flush=True)
    return INTERRUPTED


@contextmanager
def stops_cleanly() -> Iterator[None]:
    """Within it, Ctrl-C raises KeyboardInterrupt once (:func:`_interrupt_once`) and SIGTERM unwinds
    (:func:`_stop_on_sigterm`): ``finally`` blocks and ``with`` exits run either way, so the part being
    written is discarded and every claim and lock is released. The handlers before are restored after
    (SIGINT's unless Ctrl-C ended the command); off the main thread, where Python cannot install a
    handler, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _interrupt_once)
    previous_sigterm = signal.signal(signal.SIGTERM, _stop_on_sigterm)
    stopped = False
    try:
        yield
    except KeyboardInterrupt:
        stopped = True
        raise
    finally:
        signal.signal(signal.SIGTERM, previous_sigterm)
        if not stopped:
            signal.signal(signal.SIGINT, previous)


def run_cli(command: Callable[[], int], *errors: type[BaseException]) -> int:
    """``command()``'s exit status; a user error (:data:`USER_ERRORS`: every
    :class:`~extract.errors.UserError`, and ``errors``) becomes :func:`fail`'s one line and status 2,
    as does an audio file libsndfile cannot read or write (its errors are no OSError). A full disk
    that no writer named says so. Ctrl-C is one line and status 130 (:func:`interrupted`), SIGTERM
    status 143; both unwind first (:func:`stops_cleanly`), releasing every claim the command holds."""
    try:
        with stops_cleanly():
            return command()
    except KeyboardInterrupt:
        return interrupted()
    except _handled(errors) as error:
        return fail(_user_message(error))


def command_main(
    build_parser: Callable[[], argparse.ArgumentParser],
    run: Callable[[argparse.Namespace], int],
    *errors: type[BaseException],
    module: str = "",
) -> Callable[[list[str] | None], int]:
    """A command module's ``main(argv=None)`` (``main = command_main(build_parser, _run,
    module=__name__)``, its last line): ``run`` on ``argv`` parsed by the module's parser, a user
    error (:func:`run_cli`, with ``errors``) one line and exit status 2. When ``module`` is
    ``"__main__"`` (``python -m experiments.STAGE``), it runs the command and exits with its status."""

    def main(argv: list[str] | None = None) -> int:
        args = build_parser().parse_args(argv)
        return run_cli(lambda: run(args), *errors)

    if module == "__main__":
        sys.exit(main())
    return main


def _handled(errors: tuple[type[BaseException], ...]) -> tuple[type[BaseException], ...]:
    """The errors :func:`run_cli` turns into one line; evaluated only when an exception is raised."""
    return (*USER_ERRORS, *errors, *_sound_file_errors())


def _sound_file_errors() -> tuple[type[BaseException], ...]:
    """soundfile's error classes; imported only when an error is being handled (see :func:`run_cli`)."""
    import soundfile

    return (soundfile.SoundFileError,)


def _user_message(error: BaseException) -> str:
    """A user error's line; a full disk that no writer named (:class:`DiskFullError` names its file) says so."""
    if isinstance(error, OSError) and not isinstance(error, DiskFullError) and is_disk_full(error):
        where = f" while writing {error.filename}" if error.filename else ""
        return f"disk full{where}: free space and rerun"
    if isinstance(error, _sound_file_errors()):
        return f"libsndfile: {error}"
    return str(error)


def add_model_stage_arguments(parser: argparse.ArgumentParser, out_help: str, sidecars: Callable[[Path], list[Path]] | None = None) -> None:
    """What a stage that runs a model on a manifest reads and writes (``extract``, ``transcribe``, ``patch``): which model
    to load (:class:`extract.stage_options.ModelOptions`), where it runs (``--device``), ``--manifest`` and ``--out``
    (``sidecars``: written beside it)."""
    from extract.stage_options import ModelOptions

    add_options(parser, ModelOptions)
    add_device_argument(parser)
    input_argument(parser, "--manifest", required=True)
    output_argument(parser, "--out", required=True, help=out_help, sidecars=sidecars)


def add_device_argument(parser: argparse.ArgumentParser, default: str | None = AUTO, help: str = DEVICE_HELP) -> argparse.Action:
    """``--device`` (``args.device``): ``auto``, the default, is resolved once the flags are parsed
    (:func:`extract.device.resolve_device`), so building the parser imports no torch."""
    return parser.add_argument("--device", default=default, type=resolve_device, help=help)


def model_spec(args: argparse.Namespace, random_init: bool = False, seed: int = 0) -> ModelSpec:
    """The spec the model flags name. A ``--checkpoint`` that is neither a folder nor a hub id is
    one line and exit status 2, before anything loads."""
    from extract.spec import ModelSpec, ModelSpecError  # loads torch: imported where a model runs

    try:
        spec = ModelSpec(args.family, args.checkpoint, args.revision, args.dtype, args.device, random_init, args.trust_remote_code, seed)
        spec.check_checkpoint()
    except ModelSpecError as error:
        raise SystemExit(fail(f"--checkpoint {error}")) from None
    return spec


Loaded = TypeVar("Loaded")


def load_or_exit(load: Callable[[], Loaded], spec: ModelSpec) -> Loaded:
    """``load()`` (an extractor or a generator), or one line saying why it cannot be loaded, exit status 2."""
    from extract.spec import LOAD_ERRORS  # loads torch: imported where a model runs

    try:
        return load()
    except LOAD_ERRORS as error:
        raise SystemExit(fail(str(error))) from None
    except OSError as error:
        raise SystemExit(fail(f"cannot load --checkpoint {spec.checkpoint or spec.resolved_checkpoint()}: {first_line(error)}")) from None
    except (ValueError, TypeError, KeyError) as error:
        # transformers fails this way on a local folder that lacks a file (e.g. no tokenizer files:
        # "expected str ... not NoneType"); anywhere else it is a bug and keeps its traceback
        if not (spec.checkpoint and Path(spec.checkpoint).is_dir()):
            raise
        raise SystemExit(
            fail(
                f"cannot load --checkpoint {spec.checkpoint} ({type(error).__name__}: {first_line(error)}); "
                "check that the folder holds a complete transformers checkpoint (config, weights, processor files)"
            )
        ) from None
