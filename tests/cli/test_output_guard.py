"""An output that is also an input is refused before anything is written, by the one guard every
command's parser runs (experiments.cli.CommandParser). The commands and their file flags are read
from the parsers themselves, so a new command is covered without a new list here."""

import argparse
import json
import os
from pathlib import Path

import pytest

from experiments.cli import CommandParser, file_role, flag_name, overwritten_input
from experiments.stages import stages

STAGES = {stage.name: stage for stage in stages()}  # every command, as the entry point finds them
COMMANDS = sorted(STAGES)
FILE_FLAGS = {"--out", "--manifest", "--hypotheses", "--translations", "--store", "--probes", "--checkpoint", "--intervene", "--features", "--filters"}
SHARED = '{"id": "u1", "hypothesis": "a row that must survive"}\n'


def leaves(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()):
    """``(subcommand words, parser)`` for every parser a command line can end in."""
    subcommands = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    if not subcommands:
        yield words, parser
    for action in subcommands:
        for name, sub in action.choices.items():
            yield from leaves(sub, (*words, name))


def file_actions(parser: argparse.ArgumentParser, kind: str) -> list[argparse.Action]:
    return [action for action in parser._actions if file_role(action) is not None and file_role(action).kind == kind]


FILLERS = {"--train": "2,2", "--dev": "1,1"}  # flags whose type reads a shape, not any word (probe_data: female,male counts)


def _filler(action: argparse.Action, tmp_path: Path, number: int) -> str:
    if action.option_strings and action.option_strings[0] in FILLERS:
        return FILLERS[action.option_strings[0]]
    if action.choices:
        return str(next(iter(action.choices)))
    if action.type in (int, float):
        return "1"
    if file_role(action) is not None:
        return _spelled(action, str(tmp_path / f"filler-{number}"))
    return "x"


def _spelled(action: argparse.Action, path: str) -> str:
    return f"label={path}" if file_role(action).labelled else path


def command_line(parser: argparse.ArgumentParser, words: tuple[str, ...], values: dict[argparse.Action, str], tmp_path: Path) -> list[str]:
    """``words`` and every required flag of ``parser``: ``values`` where given, a filler elsewhere."""
    required = [action for action in parser._actions if action.required and not isinstance(action, argparse._SubParsersAction)]
    for group in parser._mutually_exclusive_groups:
        if group.required and not any(action in values for action in group._group_actions):
            required.append(group._group_actions[0])
    argv, positionals = list(words), []
    for number, action in enumerate(dict.fromkeys([*required, *values])):
        value = values.get(action) or _filler(action, tmp_path, number)
        if action.option_strings:
            argv += [action.option_strings[0], value]
        else:
            positionals.append(value)
    return argv + positionals


def pairs():
    """Every (command, subcommand words, input flag, output flag) the parsers declare."""
    found = []
    for name in COMMANDS:
        for words, parser in leaves(STAGES[name].load().build_parser()):
            for source in file_actions(parser, "input"):
                for target in file_actions(parser, "output"):
                    found.append(
                        pytest.param(
                            name,
                            words,
                            flag_name(source),
                            flag_name(target),
                            id=f"{name}{'-' + '-'.join(words) if words else ''}:{flag_name(target)}={flag_name(source)}",
                        )
                    )
    return found


def test_every_command_parses_with_the_guarded_parser_and_marks_its_file_flags():
    assert {"asr_gap", "winomt", "grafn", "transcribe", "extract", "probe", "finetune"} <= set(COMMANDS)
    for name in COMMANDS:
        parser = STAGES[name].load().build_parser()
        assert isinstance(parser, CommandParser), name
        for words, leaf in leaves(parser):
            unmarked = [flag_name(a) for a in leaf._actions if set(a.option_strings) & FILE_FLAGS and a.help != argparse.SUPPRESS and file_role(a) is None]
            assert not unmarked, f"{name} {' '.join(words)}: {unmarked} name files but are not marked input_argument/output_argument"


@pytest.mark.parametrize("name, words, source_flag, target_flag", pairs())
def test_an_output_naming_an_input_file_is_refused_before_anything_runs(tmp_path, capsys, monkeypatch, name, words, source_flag, target_flag):
    module = STAGES[name].load()
    parser = dict(leaves(module.build_parser()))[words]
    source = next(a for a in file_actions(parser, "input") if flag_name(a) == source_flag)
    target = next(a for a in file_actions(parser, "output") if flag_name(a) == target_flag)
    shared = tmp_path / "shared.jsonl"
    shared.write_text(SHARED)
    monkeypatch.chdir(tmp_path)
    values = {source: _spelled(source, str(shared)), target: "./sub/../shared.jsonl"}  # the same file by another spelling
    with pytest.raises(SystemExit) as stopped:
        module.main(command_line(parser, words, values, tmp_path))
    error = capsys.readouterr().err
    assert stopped.value.code == 2, error
    assert error.startswith(f"error: {target_flag} ") and f"is the same file as {source_flag} {shared}" in error and error.count("\n") == 1, error
    assert shared.read_text() == SHARED and sorted(p.name for p in tmp_path.iterdir()) == ["shared.jsonl"]


def test_pairs_cover_the_four_reported_commands():
    ids = {p.id for p in pairs()}
    for expected in ("asr_gap:--out=--hypotheses", "winomt:--out=--translations", "grafn-apply:--out=--manifest", "transcribe:--out=--manifest"):
        assert expected in ids


def _refused(main, argv, capsys) -> str:
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    return capsys.readouterr().err


@pytest.fixture
def inputs(tmp_path):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"id": "u1", "audio": "a.wav", "language": "en", "text": "x", "gender": "female", "speaker": "s"}) + "\n")
    return tmp_path, manifest, manifest.read_bytes()


@pytest.mark.parametrize("link", ["symlink", "hardlink", "relative"])
def test_transcribe_refuses_its_manifest_as_out_through_a_symlink_a_hard_link_or_a_relative_spelling(inputs, capsys, monkeypatch, link):
    from experiments import transcribe

    folder, manifest, content = inputs
    out = folder / "out.jsonl"
    if link == "symlink":
        out.symlink_to(manifest)
    elif link == "hardlink":
        os.link(manifest, out)
    else:
        monkeypatch.chdir(folder)
        out = Path("other/../m.jsonl")
    argv = ["--family", "whisper", "--task", "asr", "--manifest", str(manifest), "--out", str(out)]
    error = _refused(transcribe.main, argv, capsys)
    assert error == f"error: --out {out} is the same file as --manifest {manifest}: the command would overwrite what it reads; give another --out\n"
    assert manifest.read_bytes() == content and not list(folder.glob("*.settings.json"))


def test_the_reported_commands_keep_their_inputs(inputs, capsys):
    """#27 winomt, #48 grafn apply, #140 asr_gap: each used to overwrite its input and exit 0."""
    from experiments import asr_gap, grafn, winomt

    folder, manifest, content = inputs
    filters = folder / "filters.json"
    filters.write_text("{}")
    cases = [
        (winomt.main, ["--source", str(manifest), "--pro", str(manifest), "--anti", str(manifest), "--translations", str(manifest), "--tgt-lang", "fr"]),
        (grafn.main, ["apply", "--filters", str(filters), "--manifest", str(manifest), "--audio-dir", str(folder / "audio")]),
        (asr_gap.main, ["--hypotheses", str(manifest)]),
    ]
    for main, argv in cases:
        assert "is the same file as" in _refused(main, [*argv, "--out", str(manifest)], capsys)
        assert manifest.read_bytes() == content
    assert not (folder / "audio").exists()


def test_files_written_beside_an_output_are_checked_too(tmp_path, capsys):
    from experiments import asr_gap, grafn, winomt

    counts = tmp_path / "report.counts.jsonl"
    counts.write_text(SHARED)
    error = _refused(asr_gap.main, ["--hypotheses", str(counts), "--out", str(tmp_path / "report.json")], capsys)
    assert error.startswith(f"error: --out {tmp_path / 'report.json'} writes {counts}, which is the same file as --hypotheses {counts}")
    sentences = tmp_path / "r.sentences.jsonl"
    sentences.write_text(SHARED)
    argv = ["--source", str(counts), "--pro", str(counts), "--anti", str(counts), "--translations", str(sentences), "--out", str(tmp_path / "r.json")]
    assert f"writes {sentences}, which is the same file as --translations" in _refused(winomt.main, argv, capsys)
    done = tmp_path / "audio" / "grafn-done.jsonl"
    done.parent.mkdir()
    done.write_text(SHARED)
    argv = ["apply", "--filters", str(counts), "--manifest", str(done), "--audio-dir", str(tmp_path / "audio"), "--out", str(tmp_path / "g.jsonl")]
    assert "--audio-dir" in _refused(grafn.main, argv, capsys)
    assert counts.read_text() == sentences.read_text() == done.read_text() == SHARED


def test_distinct_files_and_missing_inputs_pass_the_guard(tmp_path):
    existing = tmp_path / "in.jsonl"
    existing.write_text(SHARED)
    assert overwritten_input([("--manifest", existing)], [("--out", tmp_path / "out.jsonl", [tmp_path / "out.jsonl"])]) is None
    missing = tmp_path / "missing.jsonl"  # nothing there to lose: reading it fails later with its own message
    assert overwritten_input([("--manifest", missing)], [("--out", missing, [missing])]) is None


def test_a_grid_whose_out_is_the_grid_file_is_refused(tmp_path, capsys):
    from experiments import probe

    grid = tmp_path / "grid.yaml"
    grid.write_text(f"out: {grid}\nstores: [{tmp_path}]\nsites: [encoder.final]\nprobes: [mean]\n")
    text = grid.read_text()
    assert probe.main(["--grid", str(grid)]) == 2
    assert f"out of --grid {grid} is the same file as --grid {grid}" in capsys.readouterr().err
    assert grid.read_text() == text
