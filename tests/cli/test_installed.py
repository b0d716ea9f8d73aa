"""The package works when installed from a wheel, not only in a checkout: no cache, figure or git
lookup inside site-packages (a non-editable install has no checkout around it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.paths import CHECKOUT

CHECKOUT = CHECKOUT


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The checkout built into a wheel and installed (without dependencies) into a fresh target folder.
    The build runs on a copy of the sources, so the checkout gets no ``build/`` or ``egg-info``."""
    root = tmp_path_factory.mktemp("installed")
    source = root / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(CHECKOUT / name, source / name)
    for package in ("extract", "probing", "experiments"):
        shutil.copytree(CHECKOUT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir", str(root / "dist"), str(source)],
        check=True,
        capture_output=True,
    )
    (wheel,) = (root / "dist").glob("*.whl")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(root / "site"), str(wheel)], check=True, capture_output=True
    )
    return root, wheel


def _run_installed(root: Path, code: str) -> dict:
    """Run ``code`` with the installed copy first on the path and the venv's dependencies after it."""
    env = {k: v for k, v in os.environ.items() if k not in ("SPEECH_GENDER_CACHE", "PYTHONPATH")}
    env |= {
        "PYTHONPATH": os.pathsep.join([str(root / "site"), sysconfig.get_paths()["purelib"]]),
        "XDG_CACHE_HOME": str(root / "user-cache"),
        "PYTHONNOUSERSITE": "1",
    }
    result = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


@pytest.mark.slow
def test_an_installed_package_keeps_its_cache_out_of_site_packages(installed):
    root, wheel = installed
    seen = _run_installed(
        root,
        "import json, extract.paths as p, extract.provenance as v; "
        "print(json.dumps({'module': p.__file__, 'checkout': str(p.source_checkout()), "
        "'cache': str(p.cache_dir()), 'commit': v.git_commit()}))",
    )
    assert Path(seen["module"]).is_relative_to(root / "site")  # the installed copy, not the checkout
    assert seen["checkout"] == "None" and seen["commit"] == "unknown"
    assert Path(seen["cache"]) == root / "user-cache" / "speech-gender-probing"
    assert not (root / "site" / ".cache").exists()


@pytest.mark.slow
def test_the_wheel_carries_every_subpackage_and_the_report_templates(installed):
    _, wheel = installed
    names = zipfile.ZipFile(wheel).namelist()
    source = {str(p.relative_to(CHECKOUT)) for top in ("extract", "probing", "experiments") for p in (CHECKOUT / top).rglob("*") if p.suffix in (".py", ".j2")}
    assert source <= set(names), sorted(source - set(names))[:5]


def test_a_checkout_caches_beside_its_code(monkeypatch):
    from extract import paths

    monkeypatch.delenv(paths.CACHE_ENV, raising=False)
    assert paths.source_checkout() == CHECKOUT
    assert paths.cache_dir() == CHECKOUT / ".cache"


@pytest.mark.slow
def test_the_installed_console_script_lists_the_installed_stages(installed):
    root, wheel = installed
    entry_points = next(name for name in zipfile.ZipFile(wheel).namelist() if name.endswith(".dist-info/entry_points.txt"))
    assert "[console_scripts]\nspeech-gender = experiments.__main__:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
    env = {k: v for k, v in os.environ.items() if k not in ("SPEECH_GENDER_CACHE", "PYTHONPATH")}
    env |= {"PYTHONPATH": str(root / "site"), "PYTHONNOUSERSITE": "1"}  # the script's python has the dependencies
    listed = subprocess.run([str(root / "site" / "bin" / "speech-gender"), "--help"], cwd=root, env=env, capture_output=True, text=True)
    assert listed.returncode == 0 and listed.stdout.startswith("usage: speech-gender STAGE [ARGS ...]\n"), listed.stderr
    assert "\n  probe  " in listed.stdout and "\n  realvoices  " in listed.stdout
    located = _run_installed(root, "import json, experiments.stages as s; print(json.dumps(str(s.find('probe').path)))")
    assert Path(located).is_relative_to(root / "site")
