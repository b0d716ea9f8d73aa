"""One stage table (issue 31, item 2): ``experiments.stage_table`` lists every stage once, and the
console script, the study, the scheduler and the demo read it instead of keeping lists of their own."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from experiments import scheduling
from experiments import stages as stage_list
from experiments.stage_table import BY_COMMAND, BY_NAME, JOB_ARRAY_STAGES, STUDY_STAGES, TABLE, StageRecord
from experiments.study import runner
from experiments.study.context import StudyStage
from extract.options import declared
from tests.paths import CHECKOUT

CHECKOUT = CHECKOUT


def test_every_command_is_in_the_table_with_its_module_and_every_record_is_a_command_or_a_study_stage():
    found = {stage.name: stage.module for stage in stage_list.stages()}
    assert found == {name: record.module for name, record in BY_COMMAND.items()}
    assert [record.name for record in TABLE if record.module is None] == ["report"]  # the study's own stage
    assert len({record.name for record in TABLE}) == len(TABLE)
    commands = [record.command_name for record in TABLE if record.command_name is not None]
    assert len(set(commands)) == len(commands)  # BY_COMMAND would keep only the last of two


def test_the_study_runs_the_table_s_study_stages_in_its_order_and_submits_its_job_arrays():
    assert (
        runner.STAGES
        == STUDY_STAGES
        == (
            "extract",
            "f0",
            "transcribe",
            "probe",
            "asr_gap",
            "mustshe",
            "st_quality",
            "acoustic",
            "lexical",
            "feature_gaps",
            "collect",
            "correlate",
            "figures",
            "report",
        )
    )
    assert all(isinstance(runner.study_stage(name), StudyStage) for name in STUDY_STAGES)
    submitted = tuple(name for name in STUDY_STAGES if runner.study_stage(name).submit is not None)
    assert submitted == JOB_ARRAY_STAGES == ("extract", "transcribe", "probe")


def test_the_commands_with_an_executor_are_the_job_arrays_and_the_study():
    def flags(name: str) -> set[str]:
        parser = stage_list.parser_of(stage_list.find(name))
        return {flag for current in (parser, *stage_list.subcommands(parser)) for action in current._actions for flag in action.option_strings}

    with_executor = {name for name in BY_COMMAND if "--executor" in flags(name)}
    assert with_executor == {BY_NAME[name].command_name for name in JOB_ARRAY_STAGES} | {"study"}


def test_the_scheduler_submits_only_job_array_stages():
    with pytest.raises(ValueError, match="'collect' is not a job-array stage"):
        scheduling.run_tasks(None, "collect", [], 0, "")


def test_every_entry_point_and_options_type_resolves():
    for record in TABLE:
        assert callable(StageRecord.resolve(record.entry)) or record.name == "manifest", record.name  # manifest: the recipe registry
        if record.options is not None:
            options = StageRecord.resolve(record.options)
            assert dataclasses.is_dataclass(options) and any(True for _ in declared(options)), record.name


def test_a_study_stage_name_runs_its_command(capsys):
    from experiments import __main__ as entry

    with pytest.raises(SystemExit) as exited:
        entry.main(["f0", "--help"], prog="speech-gender")
    assert exited.value.code == 0 and "--range-by" in capsys.readouterr().out


def test_reading_the_table_imports_nothing_heavy():
    script = (
        "import sys, experiments.stage_table, experiments.stages; print(sorted(m for m in ('torch', 'lightning', 'transformers', 'h5py') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=CHECKOUT, timeout=120, check=True)
    assert result.stdout.strip() == "[]"
