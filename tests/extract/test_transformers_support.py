"""The supported transformers releases: an unsupported one is one line naming both versions."""

import pytest

from experiments.cli import run_cli
from extract.families.errors import UnsupportedTransformersError
from extract.families.transformers_support import SUPPORTED_RANGE, check_transformers, release


@pytest.mark.parametrize(("text", "expected"), [("5.24.0", (5, 24)), ("4.57.6", (4, 57)), ("4.57.0.dev0", (4, 57)), ("6.0.0rc1", (6, 0))])
def test_release_reads_major_and_minor(text, expected):
    assert release(text) == expected


@pytest.mark.parametrize("installed", ["4.57.0", "4.57.6", "5.0.0", "5.24.0", "5.99.1"])
def test_the_two_tested_majors_are_accepted(installed):
    assert check_transformers(installed) == installed


@pytest.mark.parametrize("installed", ["4.56.2", "4.0.0", "6.0.0", "6.1.0.dev0", "latest"])
def test_an_unsupported_release_is_refused_naming_both_versions(installed):
    with pytest.raises(UnsupportedTransformersError) as refused:
        check_transformers(installed)
    assert installed in str(refused.value) and ">=4.57,<6" in str(refused.value)


def test_the_installed_release_is_supported():
    check_transformers()


def test_the_command_line_shows_the_refusal_in_one_line(capsys):
    assert run_cli(lambda: check_transformers("6.0.0")) == 2
    error = capsys.readouterr().err
    supported = f"transformers{SUPPORTED_RANGE}"
    assert error == f"error: transformers 6.0.0 is installed; the model families support {supported}: pip install '{supported}'\n"
