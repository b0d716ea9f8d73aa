"""One entry point: ``python -m experiments`` / ``speech-gender`` lists every stage (found in the source
tree, not in a hand-written table) and runs ``speech-gender STAGE ARGS`` as ``python -m experiments.STAGE ARGS``;
``docs/cli.md`` is generated from the stages' parsers and kept current."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from experiments import __main__ as entry
from experiments import stages as stage_list
from experiments.stage_table import StageRecord
from tests.paths import CHECKOUT

CHECKOUT = CHECKOUT
EXPERIMENTS = CHECKOUT / "experiments"


def _defines_main(path: Path) -> bool:
    """``def main`` or ``main = command_main(...)`` at the top level."""
    body = ast.parse(path.read_text()).body
    defined = any(isinstance(node, ast.FunctionDef) and node.name == "main" for node in body)
    assigned = any(isinstance(node, ast.Assign) and [ast.unparse(target) for target in node.targets] == ["main"] for node in body)
    return defined or assigned


def test_every_command_module_is_a_stage_and_nothing_else_is():
    modules = {path.stem for path in EXPERIMENTS.glob("*.py") if not path.stem.startswith("_") and _defines_main(path)}
    packages = {path.parent.name for path in EXPERIMENTS.rglob("__main__.py") if path.parent != EXPERIMENTS and _defines_main(path)}
    found = {stage.name: stage for stage in stage_list.stages()}
    assert set(found) == modules | packages
    assert {"manifest", "extract", "transcribe", "probe", "asr_gap", "collect", "correlate", "figures", "demo", "realvoices"} <= set(found)
    assert not {"cli", "scheduling", "stages", "__main__", "democorpus", "espeak"} & set(found)
    assert found["probe"].module == "experiments.probe" and found["realvoices"].module == "experiments.recipes.realvoices"
    assert [stage.name for stage in stage_list.stages()] == sorted(found)


def test_a_table_record_without_its_module_file_is_refused_in_one_line(monkeypatch):
    monkeypatch.setattr(stage_list, "BY_COMMAND", {"ghost": StageRecord("ghost", "experiments.ghost", "x:y", "nothing")})
    with pytest.raises(stage_list.StageError, match=r"^the stage table names experiments.ghost for ghost, and there is no experiments/ghost.py$"):
        stage_list.stages()


def test_a_package_stage_is_summarised_by_its_init_docstring():
    realvoices = stage_list.find("realvoices")
    assert realvoices.path == EXPERIMENTS / "recipes" / "realvoices" / "__main__.py"
    init = ast.get_docstring(ast.parse((EXPERIMENTS / "recipes" / "realvoices" / "__init__.py").read_text()))
    assert realvoices.summary == stage_list.summary(init)


def test_every_stage_has_a_one_line_summary_and_runs_main_as_its_module_does():
    for stage in stage_list.stages():
        assert stage.summary and "\n" not in stage.summary and not stage.summary.startswith("`"), stage
        assert len(stage.summary) <= stage_list.SUMMARY_WIDTH, stage
        body = ast.parse(stage.path.read_text()).body
        # `python -m experiments.X` does exactly `exit(main())`, so `speech-gender X` may call main(argv): a guard
        # that says so, or command_main(..., module=__name__) as the module's last statement, which does it
        last = ast.unparse(body[-1])
        if last.startswith("main = command_main("):
            assert last.endswith(", module=__name__)"), stage
            continue
        guard = [node for node in body if isinstance(node, ast.If)][-1]
        assert ast.unparse(guard) in ("if __name__ == '__main__':\n    sys.exit(main())", "if __name__ == '__main__':\n    raise SystemExit(main())"), stage


def test_no_arguments_or_help_lists_every_stage(capsys):
    assert entry.main([], prog="speech-gender") == 0  # issue 45: listing the stages is a success
    listing = capsys.readouterr().out
    assert listing.startswith("usage: speech-gender STAGE [ARGS ...]\n")
    lines = listing.splitlines()
    for stage in stage_list.stages():
        assert re.search(rf"^  {stage.name} +{re.escape(stage.summary)}$", listing, re.MULTILINE), stage.name
    assert len({line.index(stage.summary) for stage in stage_list.stages() for line in lines if line.endswith(stage.summary)}) == 1  # one column
    assert entry.main(["--help"], prog="speech-gender") == 0
    assert capsys.readouterr().out == listing


@pytest.mark.parametrize(
    "argv, error",
    [
        (["prob"], "error: unknown stage 'prob'; did you mean 'probe'? (speech-gender --help lists the stages)"),
        (["asr-gap"], "error: unknown stage 'asr-gap'; did you mean 'asr_gap'? (speech-gender --help lists the stages)"),
        (["zzz"], "error: unknown stage 'zzz' (speech-gender --help lists the stages)"),
        (["--verbose"], "error: unknown option --verbose; the first argument is a stage (speech-gender --help lists the stages)"),
    ],
)
def test_an_unknown_stage_is_one_line_and_status_2(capsys, argv, error):
    assert entry.main(argv, prog="speech-gender") == 2
    captured = capsys.readouterr()
    assert captured.err == error + "\n" and captured.out == ""


def test_a_stage_runs_with_its_arguments_and_its_exit_status(tmp_path, capsys):
    table = tmp_path / "t.csv"
    table.write_text("x,y\n" + "".join(f"{i},{2 * i + (i % 3)}\n" for i in range(8)))
    argv = ["correlate", "--table", str(table), "--x", "x", "--y", "y", "--bootstrap", "50", "--out", str(tmp_path / "r.json")]
    assert entry.main(argv, prog="speech-gender") == 0
    assert json.loads((tmp_path / "r.json").read_text())["n"] == 8
    capsys.readouterr()
    assert entry.main([*argv[:2], str(tmp_path / "missing.csv"), *argv[3:]], prog="speech-gender") == 2
    assert capsys.readouterr().err.startswith("error: ")
    with pytest.raises(SystemExit) as stopped:
        entry.main(["correlate", "--help"], prog="speech-gender")
    assert stopped.value.code == 0 and capsys.readouterr().out.startswith("usage: speech-gender correlate [-h] --table TABLE")
    with pytest.raises(SystemExit) as stopped:
        entry.main(["correlate", "--table"], prog="python -m experiments")
    assert stopped.value.code == 2 and "usage: python -m experiments correlate" in capsys.readouterr().err
    assert os.path.basename(sys.argv[0]) != "speech-gender correlate"  # the program name is set only while the stage runs


def test_python_dash_m_experiments_is_the_entry_point():
    env = os.environ | {"PYTHONPATH": str(CHECKOUT)}
    listed = subprocess.run([sys.executable, "-m", "experiments", "--help"], cwd=CHECKOUT, env=env, capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and listed.stdout.startswith("usage: python -m experiments STAGE [ARGS ...]\n") and "\n  probe " in listed.stdout
    unknown = subprocess.run([sys.executable, "-m", "experiments", "probes"], cwd=CHECKOUT, env=env, capture_output=True, text=True, timeout=120)
    assert unknown.returncode == 2
    assert unknown.stderr == "error: unknown stage 'probes'; did you mean 'probe'? (python -m experiments --help lists the stages)\n"


def test_the_console_script_is_the_entry_point():
    scripts = tomllib.loads((CHECKOUT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"speech-gender": "experiments.__main__:main"}


# --- docs/cli.md ---------------------------------------------------------------------------------

REFRESH = "python -m experiments --reference > docs/cli.md"


def test_docs_cli_md_is_generated_from_the_parsers():
    expected = stage_list.cli_reference()
    written = (CHECKOUT / "docs" / "cli.md").read_text()
    assert written == expected, f"docs/cli.md is stale: regenerate it with `{REFRESH}` and commit it"


def test_the_reference_has_every_stage_and_subcommand_at_a_fixed_width(monkeypatch):
    reference = stage_list.cli_reference()
    for stage in stage_list.stages():
        assert f"\n## {stage.name}\n\n`speech-gender {stage.name}` or `python -m {stage.module}`\n" in reference
        assert f"\n| [{stage.name}](#{stage.name}) | `{stage.module}` | {stage.summary} | {stage_list.roles(stage)} |\n" in reference
        assert f"\n```text\nusage: speech-gender {stage.name} " in reference
    for subcommand in ("figures per-position", "figures heatmap", "grafn fit", "grafn apply", "erase fit", "erase show", "manifest fleurs"):
        assert f"\n### {subcommand}\n\n```text\nusage: speech-gender {subcommand} " in reference
    monkeypatch.setenv("COLUMNS", "60")
    assert stage_list.cli_reference() == reference  # not the terminal's width


def test_the_reference_is_what_the_entry_point_prints(capsys):
    assert entry.main(["--reference"], prog="speech-gender") == 0
    assert capsys.readouterr().out == stage_list.cli_reference()


HEAVY = ("torch", "lightning", "transformers")  # seconds each to import on a busy 2-core machine (torch 1.7 s, Lightning 5.5 s)
PARSER_IMPORTS = """
import contextlib, io, json, sys
from experiments.stages import parser_of, run, stages
heavy, found = {heavy!r}, {{}}
for stage in stages():
    parser_of(stage)
    with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):
        run(stage, ["--help"], "speech-gender")
    for name in heavy:
        found.setdefault(name, stage.name) if name in sys.modules else None
print(json.dumps(found))
"""


def test_no_stage_imports_torch_lightning_or_transformers_for_its_help():
    """``speech-gender STAGE --help`` answers in a second: importing a stage, building its parser and
    running it with ``--help`` loads none of the heavy libraries (they are imported where a model runs or a probe trains). A
    structural check, not a timed one: a stage that pulls one in is named, whatever the machine's load."""
    script = PARSER_IMPORTS.format(heavy=HEAVY)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=CHECKOUT, timeout=300, check=True)
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {}, "the first stage whose parser imported each library"


def test_the_heavy_library_check_can_fail():
    script = PARSER_IMPORTS.format(heavy=HEAVY).replace("parser_of(stage)", "parser_of(stage)\n    import torch")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=CHECKOUT, timeout=300, check=True)
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"torch": stage_list.stages()[0].name}


def test_planning_a_study_or_reading_a_grid_loads_no_lightning():
    """``study run --dry-run`` and a probe grid's expansion plan without training: the modules they use
    leave Lightning and transformers (seconds to import) to the functions that train and run models."""
    script = (
        "import sys, probing.grid, probing.run\nfrom experiments.study.runner import STAGES, study_stage\n[study_stage(name) for name in STAGES]\n"
        "print(sorted(n for n in ('lightning', 'transformers') if n in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=CHECKOUT, timeout=300, check=True)
    assert result.stdout.strip() == "[]"


def test_every_stage_and_subcommand_names_itself_speech_gender_stage_through_the_entry_point():
    """One program name in every usage line (the reference's anchors follow it: ``cli.md#study-run``)."""
    for stage in stage_list.stages():
        module = stage.load()
        with stage_list.program_name(f"speech-gender {stage.name}"):
            parser = module.build_parser()
        for current in [parser, *stage_list.subcommands(parser)]:
            assert current.prog.startswith(f"speech-gender {stage.name}"), (stage.name, current.prog)


def test_run_as_a_module_a_package_stage_names_its_module_not_its_main_file():
    result = subprocess.run([sys.executable, "-m", "experiments.study", "run", "--help"], capture_output=True, text=True, cwd=CHECKOUT, check=True)
    assert result.stdout.startswith("usage: python -m experiments.study run ")


def test_dtype_takes_the_torch_names_and_the_short_ones_and_refuses_others(capsys):
    from experiments import extract, transcribe

    argv = ["--family", "whisper", "--manifest", "m.jsonl", "--out", "o.jsonl", "--task", "asr"]
    for cli, args in ((extract, argv[:6]), (transcribe, argv)):
        for given, expected in (("fp16", "float16"), ("bf16", "bfloat16"), ("fp32", "float32"), ("float16", "float16")):
            assert cli.build_parser().parse_args([*args, "--dtype", given]).dtype == expected
        assert cli.build_parser().parse_args(args).dtype == "float32"
        with pytest.raises(SystemExit):
            cli.build_parser().parse_args([*args, "--dtype", "fp8"])
        assert "'fp8' is not a dtype; choose from float32 (fp32), float16 (fp16), bfloat16 (bf16)" in capsys.readouterr().err
