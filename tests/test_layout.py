"""The tests' layout holds: helpers live in tests/support, never in a test module.

No module under tests/ or benchmarks/ imports a test module (``test_*.py``) or a
``conftest.py``: pytest loads those itself, and a second import runs them twice under two
names. benchmarks/ imports from tests/ only what is in ``tests.support``. Imports are read
with ``ast``, wherever they are in a file (a function's own imports included).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from runner.config import REPO_ROOT

CHECKED = ("tests", "benchmarks")


def is_test_module(dotted: str) -> bool:
    last = dotted.rsplit(".", 1)[-1]
    return last == "conftest" or last.startswith("test_")


def is_module(dotted: str) -> bool:
    """``dotted`` names a module or package in the repository (not a function or a class)."""
    path = REPO_ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def package_of(path: Path) -> list[str]:
    """The dotted package a file belongs to, as parts (``tests/app/x.py`` → tests, app)."""
    return list(path.relative_to(REPO_ROOT).parent.parts)


def imports(path: Path) -> Iterator[tuple[int, str, list[str]]]:
    """(line, module, names) of every import in ``path``; relative imports made absolute.

    ``names`` are the names a ``from module import ...`` takes; empty for ``import module``.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                package = package_of(path)
                base = package[: len(package) - (node.level - 1)]
                module = ".".join([*base, *([module] if module else [])])
            yield node.lineno, module, [alias.name for alias in node.names]


def violations(path: Path) -> Iterator[str]:
    where = path.relative_to(REPO_ROOT)
    in_benchmarks = where.parts[0] == "benchmarks"
    for line, module, names in imports(path):
        # `from pkg import test_x` imports a test module only when pkg/test_x.py exists.
        submodules = [f"{module}.{name}" for name in names if is_module(f"{module}.{name}")]
        for dotted in (module, *submodules):
            if is_test_module(dotted):
                yield f"{where}:{line}: imports the test module {dotted} (move what it needs to tests/support)"
        if in_benchmarks and (module == "tests" or module.startswith("tests.")):
            taken = [f"tests.{name}" for name in names] if module == "tests" and names else [module]
            for dotted in taken:
                if dotted != "tests.support" and not dotted.startswith("tests.support."):
                    yield f"{where}:{line}: a benchmark imports {dotted}, outside tests.support"


def test_no_module_imports_a_test_module_and_benchmarks_import_only_tests_support():
    files = sorted(p for top in CHECKED for p in (REPO_ROOT / top).rglob("*.py"))
    assert any(p.name == "conftest.py" for p in files) and any(
        p.parts[-2] == "benchmarks" for p in files
    ), "the layout check found no files to read"
    found = [problem for path in files for problem in violations(path)]
    assert not found, "\n".join(found)


# The layers of ARCHITECTURE.md: the library (runner/) and the warehouse (warehouse/, the report
# included) never import the dashboard or Streamlit, so the report and the Dagster assets run
# without either; the dashboard draws the report's charts (warehouse/report/charts.py), never
# the other way round.
LAYERS = {"runner": ("streamlit", "app", "warehouse"), "warehouse": ("streamlit", "app")}


def test_runner_and_warehouse_import_neither_streamlit_nor_the_dashboard():
    found = []
    for top, forbidden in LAYERS.items():
        for path in sorted((REPO_ROOT / top).rglob("*.py")):
            for line, module, _ in imports(path):
                if module.split(".")[0] in forbidden:
                    found.append(f"{path.relative_to(REPO_ROOT)}:{line}: imports {module}")
    assert (REPO_ROOT / "warehouse" / "report" / "charts.py").is_file()
    assert not found, "\n".join(found)
