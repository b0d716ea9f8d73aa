"""The naming rules of docs/contributing.md ("Rules every stage's flags follow"), checked over the
parser of every stage and subcommand: defaults shown in every help, one spelling per meaning (the
old spellings only as hidden deprecated aliases that still work), ``--device`` wherever a stage
runs a model, ``--dtype`` taking the short names, and lists in one form."""

from __future__ import annotations

import argparse

import pytest

from experiments import stages as stage_list
from experiments.argkit import CommaList
from experiments.cli import CommandParser, file_role, shows_default
from extract.device import dtype_name, resolve_device

# old spellings that may exist only as hidden deprecated aliases: (old, new)
RETIRED = {
    "--model": "--family",
    "--mem-gb": "--task-memory-gb",
    "--random-model": "--random-label",
    "--json": "--out",
    "--lang": "--tgt-lang",
    "--target-language": "--tgt-lang",
}
# flags that name a model a stage loads: such a stage has --device
LOADS_A_MODEL = ("--family", "--checkpoint", "--comet-model", "--embeddings")
# stages that load a model yet have no --device, and why
NO_DEVICE = {"demo": "the demo's numbers are CPU numbers with fixed --threads (its committed figures)"}
MODEL_STAGES_WITHOUT_MODEL_FLAGS = ("vad_filter",)  # silero-vad: loaded from the package, named by no flag


def every_parser() -> list[tuple[str, argparse.ArgumentParser]]:
    found = []
    for stage in stage_list.stages():
        parser = stage_list.parser_of(stage)
        found += [(stage.name, parser), *((stage.name, sub) for sub in stage_list.subcommands(parser))]
    return found


PARSERS = every_parser()
IDS = [parser.prog.removeprefix("speech-gender ") for _, parser in PARSERS]


def visible(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.option_strings and a.help != argparse.SUPPRESS and not isinstance(a, argparse._HelpAction)]


def help_of(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    formatter = parser._get_formatter()
    return formatter._format_action(action)


@pytest.mark.parametrize(("stage", "parser"), PARSERS, ids=IDS)
def test_every_help_shows_every_default(stage, parser):
    assert isinstance(parser, CommandParser), f"{parser.prog}: build the parser with experiments.cli.CommandParser"
    for action in visible(parser):
        if shows_default(action):
            text = " ".join(help_of(parser, action).split())
            assert "default" in text, f"{parser.prog} {action.option_strings[0]}: its help does not show its default {action.default!r}"


@pytest.mark.parametrize(("stage", "parser"), PARSERS, ids=IDS)
def test_retired_spellings_are_hidden_aliases_only(stage, parser):
    for action in parser._actions:
        for flag in action.option_strings:
            if flag in RETIRED:
                assert action.help == argparse.SUPPRESS, f"{parser.prog} {flag}: spelled {RETIRED[flag]} now; keep {flag} as a hidden deprecated alias"


@pytest.mark.parametrize(("stage", "parser"), PARSERS, ids=IDS)
def test_a_stage_that_runs_a_model_has_device(stage, parser):
    flags = {flag for action in parser._actions for flag in action.option_strings}
    if (flags & set(LOADS_A_MODEL) or stage in MODEL_STAGES_WITHOUT_MODEL_FLAGS) and stage not in NO_DEVICE:
        assert "--device" in flags, f"{parser.prog} loads a model: give it --device (experiments.cli.add_device_argument)"


@pytest.mark.parametrize(("stage", "parser"), PARSERS, ids=IDS)
def test_device_and_dtype_are_the_shared_flags(stage, parser):
    for action in parser._actions:
        if "--device" in action.option_strings:
            assert action.type is resolve_device, f"{parser.prog} --device: use experiments.cli.add_device_argument"
        if "--dtype" in action.option_strings:
            assert action.type is dtype_name, f"{parser.prog} --dtype: use the model flags' --dtype (extract.device.dtype_name)"


@pytest.mark.parametrize(("stage", "parser"), PARSERS, ids=IDS)
def test_lists_take_one_form(stage, parser):
    """Names: comma-separated (CommaList); files and LABEL=VALUE pairs: space-separated after one flag;
    every list flag adds when repeated (argparse's plain nargs would keep only the last occurrence)."""
    for action in parser._actions:
        flag = action.option_strings[0] if action.option_strings else None
        if flag is None:
            continue
        assert not isinstance(action, argparse._AppendAction) or isinstance(action, argparse._ExtendAction), (
            f"{parser.prog} {flag}: a list takes nargs with action='extend' (or CommaList)"
        )
        if action.nargs in ("+", "*"):
            assert isinstance(action, (argparse._ExtendAction, CommaList)), (
                f"{parser.prog} {flag}: repeated, it would drop the earlier values; use action='extend'"
            )
            pairs = "=" in f"{action.metavar or ''} {action.help or ''}"
            assert isinstance(action, CommaList) or file_role(action) is not None or pairs, (
                f"{parser.prog} {flag}: a list of names is comma-separated (CommaList)"
            )


def test_the_checks_can_fail():
    """Each rule above fails on a parser that breaks it."""
    parser = CommandParser(prog="speech-gender x")
    shown = parser.add_argument("--size", type=int, default=3)
    assert "default: 3" in help_of(parser, shown)
    plain = argparse.ArgumentParser()
    hidden = plain.add_argument("--size", type=int, default=3, help="a size")
    assert "default" not in help_of(plain, hidden)
    names = parser.add_argument("--names", nargs="+")
    assert not isinstance(names, (argparse._ExtendAction, CommaList)) and file_role(names) is None
    device = parser.add_argument("--device", default="cpu")
    assert device.type is not resolve_device


def test_retired_spellings_still_work_with_a_note(capsys):
    from experiments import extract, figures
    from experiments.scheduling import add_executor_arguments

    args = extract.build_parser().parse_args(["--model", "whisper", "--manifest", "m.jsonl", "--out", "store"])
    assert args.family == "whisper"
    assert capsys.readouterr().err == "note: --model is deprecated; use --family\n"
    with pytest.raises(SystemExit):
        extract.build_parser().parse_args(["--model", "nonesuch", "--manifest", "m.jsonl", "--out", "store"])
    assert "invalid choice: 'nonesuch'" in capsys.readouterr().err
    scheduled = CommandParser(prog="x")
    add_executor_arguments(scheduled, "a task")
    assert scheduled.parse_args(["--mem-gb", "8"]).task_memory_gb == 8.0
    assert scheduled.parse_args([]).task_memory_gb == 16.0
    heatmap = figures.build_parser().parse_args(["heatmap", "--long", "l.csv", "--model", "wb", "--random-model", "wb-random", "--out", "f"])
    assert (heatmap.label, heatmap.random_label) == ("wb", "wb-random")


def test_a_comma_list_takes_commas_spaces_and_repeats_and_replaces_its_default():
    parser = CommandParser(prog="x")
    parser.add_argument("--languages", action=CommaList, choices=("en", "fr", "it"), default=["en"])
    assert parser.parse_args([]).languages == ["en"]
    assert parser.parse_args(["--languages", "fr,it"]).languages == ["fr", "it"]
    assert parser.parse_args(["--languages", "fr", "it"]).languages == ["fr", "it"]
    assert parser.parse_args(["--languages", "fr", "--languages", "it,en"]).languages == ["fr", "it", "en"]
    with pytest.raises(SystemExit):
        parser.parse_args(["--languages", "fr,de"])


def test_a_repeated_file_list_keeps_every_file():
    from experiments import collect

    args = collect.build_parser().parse_args(["--probes", "a.jsonl", "--probes", "b.jsonl", "c.jsonl", "--out", "o"])
    assert [str(p) for p in args.probes] == ["a.jsonl", "b.jsonl", "c.jsonl"]
