"""A stage's options declared once: typed dataclass fields carrying their help, choices and checks.

A field declared with :func:`option` is an option of its stage. Its type, default and metadata are
the one declaration from which ``experiments.options`` derives the command line's flags (and so
``docs/cli.md``) and the study file's keys; :func:`check_options`, called from the dataclass's
``__post_init__``, makes the library, the command line and the study refuse a bad value the same way.
This module imports nothing heavy: the options of a stage are read to build its ``--help``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from extract.errors import UserError

OPTION = "option"  # the metadata key of a declared field
SEED_MOST = 2**32 - 1  # the largest seed every consumer takes: numpy's RandomState and Lightning's seed_everything stop here
FLOAT32_MAX = 3.4028234663852886e38  # torch's optimiser step scalars are float32
LARGEST_LR = FLOAT32_MAX * (1 - 0.9)  # Adam's first step size is lr / (1 - β1), β1 = 0.9 (torch's default): a float32


class OptionError(UserError, ValueError):
    """A value (or a combination of values) that options refuse. ``template`` names the options as
    ``{field_name}``, so that each caller spells them its way (:meth:`spelled`): ``--num-shards 0:
    must be at least 1`` on the command line, ``num_shards 0: ...`` from the library."""

    def __init__(self, template: str, *names: str):
        self.template, self.names = template, names
        super().__init__(self.spelled(lambda name: name))

    @classmethod
    def refused(cls, name: str, value: Any, reason: str) -> OptionError:
        """``NAME VALUE: REASON`` for one option."""
        return cls(f"{{{name}}} {_literal(value)}: {_literal(reason)}", name)

    def spelled(self, spell: Callable[[str], str]) -> str:
        return self.template.format_map({name: spell(name) for name in self.names})


def _literal(value: Any) -> str:
    """``value`` as text inside a template (its braces doubled)."""
    return str(value).replace("{", "{{").replace("}", "}}")


@dataclass(frozen=True)
class Option:
    """What a field is to its users besides its type and default.

    ``choices``: the values it takes; ``least``: its smallest value (``positive``: above 0 instead), ``most`` its largest;
    ``flag``: its command-line spelling (default ``--field-name``), ``aliases``: deprecated spellings
    that still work with a note, ``also``: other spellings without one; ``metavar`` as argparse's;
    ``role``: ``input`` or ``output`` for a file or folder the command reads or writes (``sidecars``:
    the files an output writes beside its path, path -> paths); ``parse``:
    the command line's conversion of a value (argparse's ``type``; default: the field's type);
    ``group``: the heading of its flag in ``--help`` (default: the parser's options); ``study``: also
    a key of its section in a study file; ``command``: a command-line flag at all; ``one_value``: a
    list of names given in one comma-separated value only (a command whose positional argument may
    follow its flags: ``study run --stages probe STUDY.yaml`` would otherwise read the file as a stage)."""

    help: str
    choices: tuple | None = None
    least: float | None = None
    most: float | None = None
    positive: bool = False
    flag: str | None = None
    aliases: tuple[str, ...] = ()
    also: tuple[str, ...] = ()
    metavar: str | None = None
    role: str | None = None
    sidecars: Callable[[Any], list] | None = None
    parse: Callable[[str], Any] | None = None
    group: str | None = None
    study: bool = False
    command: bool = True
    one_value: bool = False

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is refused, or None (None itself is always accepted: "not given")."""
        if value is None:
            return None
        if isinstance(value, (tuple, list)):  # a list option: each item within the choices
            return next(filter(None, (self.problem(item) for item in value)), None)
        if self.choices is not None and value not in self.choices:
            return f"not one of {', '.join(map(str, self.choices))}"
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        if isinstance(value, float) and not math.isfinite(value):
            return "must be a finite number"
        if self.positive and value <= 0:
            return "must be positive"
        if self.least is not None and value < self.least:
            return f"must be at least {self.least:g}"
        if self.most is not None and value > self.most:
            return f"must be at most {self.most:.10g}"
        return None


def option(default: Any = dataclasses.MISSING, help: str = "", **details: Any) -> Any:
    """A dataclass field that is an option (:class:`Option`'s ``details``); ``default`` as ``field``'s
    (a list or other mutable default goes through ``default_factory``)."""
    if isinstance(default, (list, dict, set)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata={OPTION: Option(help, **details)})
    return dataclasses.field(default=default, metadata={OPTION: Option(help, **details)})


def seed_option(help: str, **details: Any) -> Any:
    """A ``seed`` option (default 0): a whole number from 0 to :data:`SEED_MOST`, in every command that takes one."""
    return option(0, help, least=0, most=SEED_MOST, **details)


def field_problem(cls: type, name: str, value: Any) -> str | None:
    """Why the declared option ``name`` of ``cls`` refuses ``value``, or None."""
    return next(declaration.problem(value) for item, declaration in declared(cls) if item.name == name)


def declared(cls: type) -> Iterator[tuple[dataclasses.Field, Option]]:
    """The option fields of a dataclass (or of an instance's class), in declaration order."""
    for item in dataclasses.fields(cls):
        if OPTION in item.metadata:
            yield item, item.metadata[OPTION]


def default_of(item: dataclasses.Field) -> Any:
    """A field's default (``dataclasses.MISSING`` for a required one)."""
    if item.default_factory is not dataclasses.MISSING:
        return item.default_factory()
    return item.default


def check_options(instance: Any) -> None:
    """Every declared option of ``instance`` within its choices and bounds, or :class:`OptionError`."""
    for item, declaration in declared(instance):
        value = getattr(instance, item.name)
        problem = declaration.problem(value)
        if problem is not None:
            raise OptionError.refused(item.name, value, problem)


class Checked:
    """The base of an options dataclass whose values are checked by their declarations alone
    (:func:`check_options`, as the dataclass is made)."""

    def __post_init__(self):
        check_options(self)
