"""The layering of ``experiments``' study, demo and figure library (issue 31): the demo imports the
study and the figures, the study imports the figures, and the figure library imports neither, so
that no two of them import each other. Imports are read from the source (function-local ones too),
so that a lazy import inside a function cannot hide a cycle."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "experiments"

# package folder -> the packages none of its modules may import
FORBIDDEN = {
    "study": ("experiments.demo",),
    "reports": ("experiments.study", "experiments.demo"),
    # results' records and joins sit below every writer of a result (issue 47): none of them is imported back
    "results": ("experiments.scoring", "experiments.patching", "experiments.analysis", "experiments.reports", "experiments.study", "experiments.demo"),
}


def imported_modules(source: str, package: str) -> set[str]:
    """Every module that ``source`` (a module of ``package``) imports, at any depth, as absolute
    names (a relative import resolved)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(filter(None, [base, node.module]))
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)  # `from experiments import demo`
    return found


def _package_of(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).parts[:-1])


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


@pytest.mark.parametrize("folder", sorted(FORBIDDEN))
def test_no_module_imports_a_package_above_it_in_the_layering(folder):
    offending = [
        f"{path.relative_to(PACKAGE.parent)} imports {module}"
        for path in sorted((PACKAGE / folder).rglob("*.py"))
        for module in sorted(imported_modules(path.read_text(encoding="utf-8"), _package_of(path)))
        if any(_within(module, package) for package in FORBIDDEN[folder])
    ]
    assert not offending, "\n".join(offending)


def test_the_reader_sees_function_local_and_relative_imports():
    source = "def draw():\n    from experiments.demo import report\n    from ..study import stages\n    import experiments.study.report\n"
    found = imported_modules(source, "experiments.reports")
    assert {"experiments.demo", "experiments.study.stages", "experiments.study.report"} <= found
