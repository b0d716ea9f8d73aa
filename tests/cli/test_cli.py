"""experiments.cli: --out and --tgt-lang with their deprecated aliases, and the one-line error path."""

import argparse
import sys
from pathlib import Path

import pytest

from experiments.cli import add_out_argument, add_tgt_lang_argument, run_cli
from extract.manifest import ManifestError
from tests.paths import CHECKOUT


def _parser(required_language=False):
    parser = argparse.ArgumentParser(prog="x")
    add_out_argument(parser, "where to write")
    add_tgt_lang_argument(parser, ("--lang", "--target-language"), "target language", required=required_language, default=None if required_language else "it")
    return parser


def test_new_spellings_are_quiet(capsys):
    args = _parser().parse_args(["--out", "o.json", "--tgt-lang", "es"])
    assert (args.out, args.tgt_lang) == (Path("o.json"), "es") and capsys.readouterr().err == ""
    assert _parser().parse_args(["--out", "o.json"]).tgt_lang == "it"


@pytest.mark.parametrize(
    "argv, note",
    [
        (["--json", "o.json"], "note: --json is deprecated; use --out\n"),
        (["--out", "o.json", "--lang", "es"], "note: --lang is deprecated; use --tgt-lang\n"),
        (["--out", "o.json", "--target-language", "es"], "note: --target-language is deprecated; use --tgt-lang\n"),
    ],
)
def test_old_spellings_work_with_a_one_line_note(capsys, argv, note):
    args = _parser().parse_args(argv)
    assert args.out == Path("o.json") and args.tgt_lang == ("es" if len(argv) == 4 else "it")
    assert capsys.readouterr().err == note


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "one of the arguments --out is required"),
        (["--out", "a", "--json", "b"], "argument --json: not allowed with argument --out"),
        (["--out", "a", "--tgt-lang", "es", "--lang", "it"], "argument --lang: not allowed with argument --tgt-lang"),
    ],
)
def test_missing_or_doubled_flags_exit_2(capsys, argv, message):
    with pytest.raises(SystemExit) as error:
        _parser().parse_args(argv)
    assert error.value.code == 2 and message in capsys.readouterr().err


def test_a_required_target_language_accepts_its_alias(capsys):
    assert _parser(required_language=True).parse_args(["--out", "o", "--target-language", "de"]).tgt_lang == "de"
    with pytest.raises(SystemExit):
        _parser(required_language=True).parse_args(["--out", "o"])
    assert "one of the arguments --tgt-lang is required" in capsys.readouterr().err


def test_run_cli_turns_user_errors_into_one_line_and_status_2(capsys):
    def bad_row():
        raise ManifestError("h.jsonl", 3, "missing key(s) id")

    def missing_file():
        raise FileNotFoundError(2, "No such file or directory", "gone.json")

    class Custom(Exception):
        pass

    def custom():
        raise Custom("the table has no column f1")

    assert run_cli(bad_row) == 2 and capsys.readouterr().err == "error: h.jsonl:3: missing key(s) id\n"
    assert run_cli(missing_file) == 2 and capsys.readouterr().err == "error: [Errno 2] No such file or directory: 'gone.json'\n"
    assert run_cli(custom, Custom) == 2 and capsys.readouterr().err == "error: the table has no column f1\n"
    assert run_cli(lambda: 0) == 0
    with pytest.raises(Custom):  # an error that is not declared a user error is a bug: its traceback stays
        run_cli(custom)


def test_manifest_must_c_takes_tgt_lang_and_its_old_spelling(tmp_path, tone, capsys):
    from experiments.manifest import main

    root = tmp_path / "mc/tst"
    tone("mc/tst/wav/ted_1.wav", seconds=2.0)
    (root / "txt").mkdir(parents=True)
    (root / "txt/tst.yaml").write_text("- {duration: 1.0, offset: 0.0, speaker_id: spk.1, wav: ted_1.wav}\n")
    (root / "txt/tst.en").write_text("Hi.\n")
    (root / "txt/tst.it").write_text("Ciao.\n")
    (tmp_path / "sp.tsv").write_text("TALK-ID\tTED-PRONOUN\n1\tShe\n")
    common = ["must_c", str(root), "--split-name", "tst", "--speakers", str(tmp_path / "sp.tsv")]
    assert main([*common, "--tgt-lang", "it", "--out", str(tmp_path / "new.jsonl")]) == 0
    assert main([*common, "--target-language", "it", "--out", str(tmp_path / "old.jsonl")]) == 0
    assert "note: --target-language is deprecated; use --tgt-lang" in capsys.readouterr().err
    assert (tmp_path / "new.jsonl").read_text() == (tmp_path / "old.jsonl").read_text()
    assert '"translation": "Ciao."' in (tmp_path / "new.jsonl").read_text()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["experiments.probe", "--store", "{tmp}/none", "--site", "encoder.final", "--out", "{tmp}/p.jsonl"], "does not exist"),
        (["experiments.finetune", "--manifest", "{tmp}/none.jsonl", "--female-share", "0.5", "--total", "4", "--out", "{tmp}/ft"], "none.jsonl"),
    ],
)
def test_a_probe_or_finetune_error_is_one_stderr_line_in_a_fresh_process(tmp_path, argv, message):
    """Importing Lightning imports torchmetrics, which imports setuptools' deprecated pkg_resources:
    its two-line warning preceded every error of these commands. Only a fresh interpreter shows it."""
    import os
    import subprocess
    import sys

    environment = {key: value for key, value in os.environ.items() if key != "PYTHONWARNINGS"}
    command = [sys.executable, "-m", *(part.format(tmp=tmp_path) for part in argv)]
    finished = subprocess.run(command, cwd=CHECKOUT, env=environment, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 2
    assert len(finished.stderr.splitlines()) == 1 and finished.stderr.startswith("error: ") and message in finished.stderr, finished.stderr


@pytest.mark.parametrize("flag", ["--family", "--model"])
def test_a_checkpoint_given_as_the_family_is_pointed_to_checkpoint(flag, capsys):
    from experiments.extract import main

    with pytest.raises(SystemExit) as exit_:
        main([flag, "openai/whisper-base", "--manifest", "m.jsonl", "--out", "out"])
    assert exit_.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "invalid choice: 'openai/whisper-base'" in last and "goes to --checkpoint" in last and "--family whisper --checkpoint openai/whisper-base" in last


def test_a_misspelt_family_gets_no_checkpoint_hint(capsys):
    from experiments.extract import main

    with pytest.raises(SystemExit):
        main(["--family", "wisper", "--manifest", "m.jsonl", "--out", "out"])
    assert "--checkpoint" not in capsys.readouterr().err.strip().splitlines()[-1]


def test_command_main_runs_the_command_and_exits_with_its_status_only_when_its_module_is_the_program(monkeypatch):
    from experiments.cli import command_main

    monkeypatch.setattr(sys, "argv", ["stage", "--flag", "7"])

    def build():
        parser = argparse.ArgumentParser()
        parser.add_argument("--flag", type=int)
        return parser

    main = command_main(build, lambda args: args.flag, module="experiments.stage")  # imported: nothing runs
    assert main(["--flag", "3"]) == 3
    with pytest.raises(SystemExit) as exited:
        command_main(build, lambda args: args.flag, module="__main__")  # python -m: sys.argv's command, its status
    assert exited.value.code == 7
