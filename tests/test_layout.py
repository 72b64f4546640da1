"""The tests' layout holds: helpers live in tests/support or tools/, never in a test module.

No module under tests/, tools/ or benchmarks/ imports a test module (``test_*.py``) or a
``conftest.py``: pytest loads those itself, and a second import runs them twice under two
names. What the benchmarks share with the tests is in tools/: benchmarks/ and tools/ import
nothing from tests/, and the product (runner/, warehouse/, orchestration/, app/) imports
neither. Imports are read with ``ast``, wherever they are in a file (a function's own imports
included).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from runner.config import REPO_ROOT

CHECKED = ("tests", "benchmarks", "tools")
# What may not import tests/ (the benchmarks run without them); the product imports tools/ neither.
NOT_TESTS = ("benchmarks", "tools")
PRODUCT = ("runner", "warehouse", "orchestration", "app")


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
    shares_with_tests = where.parts[0] in NOT_TESTS
    for line, module, names in imports(path):
        # `from pkg import test_x` imports a test module only when pkg/test_x.py exists.
        submodules = [f"{module}.{name}" for name in names if is_module(f"{module}.{name}")]
        for dotted in (module, *submodules):
            if is_test_module(dotted):
                yield f"{where}:{line}: imports the test module {dotted} (move what it needs to tests/support)"
        if shares_with_tests and module.split(".")[0] == "tests":
            yield f"{where}:{line}: imports {module} (what tests and benchmarks share goes in tools/)"


def test_no_module_imports_a_test_module_and_benchmarks_and_tools_import_no_tests():
    files = sorted(p for top in CHECKED for p in (REPO_ROOT / top).rglob("*.py"))
    assert all(
        any(p.relative_to(REPO_ROOT).parts[0] == top for p in files) for top in CHECKED
    ) and any(p.name == "conftest.py" for p in files), "the layout check found no files to read"
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


def test_the_product_imports_neither_tools_nor_tests():
    """tools/ and tests/ are not shipped (the wheel holds the product's packages only)."""
    found = [
        f"{path.relative_to(REPO_ROOT)}:{line}: imports {module}"
        for top in PRODUCT
        for path in sorted((REPO_ROOT / top).rglob("*.py"))
        for line, module, _ in imports(path)
        if module.split(".")[0] in ("tools", "tests")
    ]
    assert not found, "\n".join(found)
