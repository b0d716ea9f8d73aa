"""A study file's type layer, as pydantic models: which keys each section takes, their YAML types and defaults.

The sections of the command-line stages are derived from the stages' options (the fields declared
``study=True`` in :mod:`extract.stage_options`, :mod:`experiments.analysis_options`, ...), so an option
added there is a study key here. Every model refuses unknown keys (``extra="forbid"``) and converts
nothing (``strict``: a quoted "1" is not a number, true is not 1). :func:`refusal` turns pydantic's
first error into the study's one-line ``FILE: KEY: ...`` message, with the nearest known name for an
unknown key. The rules that read several keys at once (unique names, manifests that exist, a grid's
corpora and models) are :mod:`experiments.study.schema`'s, on the validated file.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, create_model, model_validator
from pydantic_core import PydanticCustomError

from experiments.analysis_options import AcousticsOptions, F0Options, FeatureGapOptions, LexicalOptions
from experiments.scoring.gaps import GapOptions, iterations_problem
from experiments.st_quality import StQualityOptions
from experiments.study.values import NONE, PROBE_OPTIONS, TYPE_NAMES, name_problem, shown
from extract.options import declared, default_of
from extract.stage_options import ExtractOptions, ModelOptions, RandomInitOptions, TranscribeOptions
from probing.grid import GridError, check_keys

GRID_KEYS = ("probes", "controls", "seeds", "corpora", "apply_to", "models", "sites", "languages")  # the grid's axes, then what the study reads
TASKS = ("asr", "st")


def refuse(message: str) -> PydanticCustomError:
    """A refusal in the study's words, said as written after ``FILE: KEY:``."""
    return PydanticCustomError("study", "{message}", {"message": message})


def refusing(problem: Callable[[Any], str | None], when: type = AfterValidator):
    """A check of a key's value: ``problem(value)`` says why it is refused, or None."""

    def check(value):
        if (text := problem(value)) is not None:
            raise refuse(text)
        return value

    return when(check)


def _one_of(choices: tuple) -> AfterValidator:
    return refusing(lambda value: None if value in choices else f"{value!r} is not one of {', '.join(map(str, choices))}")


def _non_empty(what: str) -> BeforeValidator:
    return refusing(lambda value: None if isinstance(value, list) and value else f"expected a non-empty list of {what}, got {shown(value)}", BeforeValidator)


def _given(value):
    """A section given as null is a section with its defaults (``extract:`` alone, ``gap: null``)."""
    return {} if value is None else value


def _switch(value):
    """An analysis: true (on, its defaults), false (off) or a mapping of its options."""
    if not isinstance(value, (bool, dict)):
        raise refuse(f"expected true or false or a mapping, got {shown(value)}")
    return None if value is False else {} if value is True else value


def _one_or_many(empty: str, other: str | None = None) -> BeforeValidator:
    """A mapping, or a non-empty list of them (a single one is read as a list of one; errors name it
    without ``[0]``). ``other``: the refusal of any other value, where null is one mapping of defaults
    (without it, null is none and another value is refused as not a mapping)."""

    def check(value):
        if value == []:
            raise refuse(empty)
        if other is not None and not isinstance(value, (dict, list, NONE)):
            raise refuse(f"{other}, got {shown(value)}")
        return value if isinstance(value, list) or (value is None and other is None) else [value]

    return BeforeValidator(check)


Name = Annotated[str, refusing(name_problem)]


class Section(BaseModel):
    """A mapping of known keys, each of its type."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Defaults(Section):
    """A section whose null means "every default" (``models: [null]`` names the missing keys)."""

    @model_validator(mode="before")
    @classmethod
    def _null_is_empty(cls, value):
        return _given(value)


def _yaml_type(hint: Any) -> Any:
    """The YAML type of an option's Python type: a tuple is a list, a path a string, a float takes an integer."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return typing.Union[tuple(_yaml_type(kind) for kind in typing.get_args(hint))]  # noqa: UP007 (built from a tuple)
    if typing.get_origin(hint) in (tuple, list):
        return list
    return int | float if hint is float else hint if hint in (int, bool, NONE) else str  # a path or a name: a string


def options_fields(*classes: type, bounds: bool = False, checks: dict | None = None) -> dict[str, Any]:
    """The ``study`` options of ``classes`` as pydantic fields, with their choices (and, with ``bounds``,
    their declared bounds; ``checks``: the study's own, by key) checked; a tuple default is a list, as YAML writes it."""
    fields = {}
    for cls in classes:
        hints = typing.get_type_hints(cls)
        for item, declaration in declared(cls):
            if declaration.study:
                within = refusing(lambda value, option=declaration: (problem := option.problem(value)) and f"{problem}, got {value!r}")
                own = [_one_of(declaration.choices)] if declaration.choices else []
                own += ([within] if bounds else []) + ([checks[item.name]] if item.name in (checks or {}) else [])
                default = default_of(item)
                kind = Annotated[(_yaml_type(hints[item.name]), *own)] if own else _yaml_type(hints[item.name])
                fields[item.name] = (kind, list(default) if isinstance(default, tuple) else default)
    return fields


def section(title: str, /, *classes: type, base: type = Defaults, bounds: bool = False, checks: dict | None = None, **fields: Any) -> type[Section]:
    """A section of the study's options ``classes``, then ``fields`` (``name=(type, default)``, replacing a derived one)."""
    return create_model(title, __base__=base, **{**options_fields(*classes, bounds=bounds, checks=checks), **fields})


class Named(Defaults):
    name: Name
    family: str


Names = list | None  # a list the study checks item by item (names, choices), or null
ModelEntry = section(
    "ModelEntry",
    ModelOptions,  # checkpoint, revision, trust_remote_code, dtype: declared with the model flags
    RandomInitOptions,  # random_init, seed: declared with extract's flags
    base=Named,
    sites=(str | list, None),
    decoder=(str | None, None),
    languages=(Names, None),
    transcribe=(bool | list, True),
)
CorpusEntry = section(
    "CorpusEntry", name=(Name, ...), task=(Annotated[str, _one_of(TASKS)], ...), manifests=(dict, ...), tgt_langs=(list, None), mustshe=(dict, None)
)
Grid = section(
    "Grid",
    base=Section,  # probes: [null] is no grid
    **dict.fromkeys(GRID_KEYS, (Any, None)),  # the study reads the keys given (model_fields_set)
    **dict.fromkeys(PROBE_OPTIONS, (Any, None)),  # ProbeConfig's, checked by its types (probing.grid) and by ProbeConfig
)
positive = refusing(lambda value: None if value > 0 else f"must be positive, got {value!r}")
Gap = section("Gap", GapOptions, checks={"iterations": refusing(iterations_problem)}, corpora=(Names, None), languages=(Names, None))  # asr_gap's flags
StQuality = section(
    "StQuality",
    StQualityOptions,
    checks={"batch_size": positive},
    comet_model=(str | None, None),  # a study scores COMET only where it names the model (st_quality loads its default)
    gpus=(Annotated[int, refusing(lambda value: None if value >= 0 else f"must be 0 or more, got {value}")], 0),  # COMET on the cpu unless
    # the study asks for GPUs (st_quality: 1 with --device cuda; a study's device may be decided when it runs)
    corpora=(Names, None),
)
F0Baseline = section("F0Baseline", corpora=(Names, None), **options_fields(F0Options))  # the analyses' keys: declared with their flags
Acoustic = section(
    "Acoustic", AcousticsOptions, workers=(Annotated[int, refusing(lambda value: None if value >= 1 else f"must be at least 1, got {value}")], 1)
)
Lexical = section("Lexical", pipelines=(dict, None), **options_fields(LexicalOptions, checks={"batch_size": positive}))
FeatureGaps = section("FeatureGaps", groups=(list, ["female", "male"]), **options_fields(FeatureGapOptions, checks={"bootstrap": positive}))
Extract = section("Extract", ExtractOptions, bounds=True)  # declared once, with the command line's flags (extract.stage_options)
Transcribe = section("Transcribe", TranscribeOptions, bounds=True)
Given = BeforeValidator(_given)
Switch = BeforeValidator(_switch)


class Behaviour(Defaults):
    gap: Annotated[list[Gap] | None, _one_or_many("expected a mapping or a non-empty list of mappings", "expected a mapping or a list or null")] = None
    st_quality: Annotated[StQuality | None, Given] = None


class Baselines(Defaults):
    f0: Annotated[F0Baseline | None, Given] = None


class Report(Defaults):
    site: str | None = None


class Analyses(Section):
    acoustic: Annotated[Acoustic | None, Switch] = None
    lexical: Annotated[Lexical | None, Switch] = None
    feature_gaps: Annotated[FeatureGaps | None, Switch] = None  # unset: on when acoustic or lexical is
    corpora: Names = None

    @model_validator(mode="before")
    @classmethod
    def _feature_gaps_with_the_features(cls, value):
        if isinstance(value, dict) and "feature_gaps" not in value:
            return {**value, "feature_gaps": value.get("acoustic", False) is not False or value.get("lexical", False) is not False}
        return value


class StudyFile(Section):
    """The whole file, every key's type checked."""

    name: str
    out: str
    device: str = None
    models: Annotated[list[ModelEntry], _non_empty("models")]
    corpora: Annotated[list[CorpusEntry], _non_empty("corpora")]
    sites: Any = "all"
    extract: Extract = Field(default_factory=Extract)
    transcribe: Transcribe = Field(default_factory=Transcribe)
    probes: Annotated[list[Grid] | None, _one_or_many("expected a grid (a mapping) or a non-empty list of grids, got []")] = None
    baselines: Baselines = Field(default_factory=Baselines)
    behaviour: Behaviour = Field(default_factory=Behaviour)
    report: Report = Field(default_factory=Report)
    analyses: Analyses = None


RANKS = {"extra_forbidden": 0, "missing": 1}  # in one mapping: an unknown key is said first, then a missing one, then a value


def refusal(error: ValidationError, path, document: dict) -> str:
    """The first of ``error``'s refusals as the study's one line ``FILE: KEY: ...`` (``document``: the
    file as read, which tells a single mapping from a list of them)."""
    located = [(item, *_locate(item["loc"], document)) for item in error.errors(include_url=False)]
    first = {}
    for index, (_, mapping, *_) in enumerate(located):
        first.setdefault(mapping, index)
    item, mapping, model, key, field, at, hint = min(located, key=lambda entry: (first[entry[1]], RANKS.get(entry[0]["type"], 2)))
    kind, value = item["type"], item.get("input")
    if kind == "extra_forbidden":
        try:
            check_keys([key], tuple(model.model_fields), f"{path}: {mapping or 'top level'}")
        except GridError as unknown:
            return str(unknown)
    if kind == "missing" or (value is None and field is not None and hint is field.annotation and field.is_required()):
        return f"{path}: {mapping or 'top level'}: {key!r} is required"
    return f"{path}: {at}: {item['ctx']['message'] if kind == 'study' else f'expected {expected(hint)}, got {shown(value)}'}"


def _locate(loc: tuple, document) -> tuple:
    """Where an error's ``loc`` points: the key path of its mapping, that mapping's model, the key and
    its field, the key path of the value, and the value's type."""
    at, model, raw, hint = "", StudyFile, document, None
    mapping, parent, key, field = "", None, None, None
    for part in loc:
        if isinstance(part, int):
            if isinstance(raw, list):  # a single mapping where a list is taken is named without [0]
                at, raw = f"{at}[{part}]", raw[part] if part < len(raw) else None
            hint = next((typing.get_args(kind)[0] for kind in _members(hint) if typing.get_origin(kind) is list), Any)
        elif model is None or part not in model.model_fields:  # an unknown key, or the name of a union's member
            mapping, parent, key, field = (at, model, part, None) if model is not None else (mapping, parent, key, field)
            break
        else:
            mapping, parent, key, field = at, model, part, model.model_fields[part]
            at, hint, raw = f"{at}.{part}" if at else part, field.annotation, raw.get(part) if isinstance(raw, dict) else None
        model = _section_in(hint)
    return mapping, parent, key, field, at, hint


def _members(hint: Any) -> tuple:
    """The types a type takes (a union's members), without their ``Annotated`` checks."""
    bare = typing.get_args(hint)[0] if typing.get_origin(hint) is Annotated else hint
    members = typing.get_args(bare) if typing.get_origin(bare) in (typing.Union, types.UnionType) else (bare,)
    return tuple(typing.get_args(kind)[0] if typing.get_origin(kind) is Annotated else kind for kind in members)


def _section_in(hint: Any) -> type | None:
    return next((kind for kind in _members(hint) if isinstance(kind, type) and issubclass(kind, Section)), None)


def expected(hint: Any) -> str:
    """What a key takes, in the YAML's words: "an integer or null", or "a mapping of keys" for a section."""
    members = _members(hint)
    if len(members) == 1 and _section_in(hint) is not None:
        return "a mapping of keys"
    return " or ".join(dict.fromkeys(TYPE_NAMES[dict if _section_in(kind) else typing.get_origin(kind) or kind] for kind in members))
