"""The public API (issue 31): each package's ``__all__`` names what users import, every name
resolves to an object documented on docs/api.md, importing the packages stays cheap, and the
"Python API" section of docs/getting-started.md runs as written."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys

import pytest

from tests.paths import CHECKOUT

ROOT = CHECKOUT
PACKAGES = ("extract", "probing", "experiments")


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_resolves_and_is_on_the_api_page(package):
    module = importlib.import_module(package)
    page = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^::: ([\w.]+)$", page, flags=re.M))
    listed = re.findall(r"^::: ([\w.]+)\n    options:\n      members: \[([^\]]*)\]", page, flags=re.M)
    members = {f"{block}.{name}" for block, names in listed for name in names.split(", ")}
    for name in module.__all__:
        value = getattr(module, name)
        assert name in dir(module)
        if name == "__version__":
            continue
        if hasattr(value, "__qualname__"):  # a class or function: its own entry
            home = f"{value.__module__}.{value.__qualname__}"
            assert home in documented | members, f"{package}.{name} ({home}) is not on docs/api.md"
        else:  # a registry (a dict): documented by its module's docstring, or as a member of its module's entry
            home = module._HOMES[name] if isinstance(module._HOMES[name], str) else module._HOMES[name][0]
            assert home in documented or f"{home}.{name}" in members, f"{package}.{name} (in {home}) is not on docs/api.md"


def test_a_name_outside_the_api_is_an_attribute_error():
    import probing

    with pytest.raises(AttributeError, match="module 'probing' has no attribute 'train_everything'"):
        probing.train_everything  # noqa: B018


def test_importing_the_packages_imports_neither_torch_nor_their_stages():
    """``import experiments`` must stay cheap (--help of every stage imports it; tests/cli/test_entry_point.py times that)."""
    heavy = ("torch", "lightning", "probing.run", "experiments.results.collect")
    code = f"import sys, extract, probing, experiments; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert result.stdout.strip() == "[]"


def test_a_cli_module_of_the_same_name_does_not_replace_an_api_name():
    """``experiments.collect`` is a command-line module: the join is exported as ``collect_results``,
    which importing that module leaves in place."""
    import experiments
    import experiments.collect  # noqa: F401
    from experiments.results.collect import collect

    assert experiments.collect_results is collect and "collect" not in experiments.__all__


def test_the_getting_started_example_runs_as_written(tmp_path):
    text = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    section = text.split("\n## Python API\n", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, flags=re.S).group(1)
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0] == "['encoder.final']"
    assert re.fullmatch(r"mean tiny-random-whisper 8 test clips, F1 \d+(\.\d)?", lines[1])
    assert lines[2] == "5 scores; unmatched: none"
