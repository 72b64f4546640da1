"""The layout holds: test helpers live in tests/support or tools/, never in a test module,
runner/ is entered by its rooms, and each test folder mirrors a folder of the repository.

No module under tests/, tools/ or benchmarks/ imports a test module (``test_*.py``) or a
``conftest.py``: pytest loads those itself, and a second import runs them twice under two
names. What the benchmarks share with the tests is in tools/: benchmarks/ and tools/ import
nothing from tests/, and the product (runner/, warehouse/, orchestration/, app/) imports
neither. Imports are read with ``ast``, wherever they are in a file (a function's own imports
included).
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

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


# runner/ in rooms (runner/README.md): the modules that stay at its top are the shared ones; any
# other module belongs in a room, so a new one is placed deliberately (or added here, with why).
RUNNER_TOP = {"__init__", "agent_files", "command_line", "config", "errors", "rooms", "terminal"}
ROOMS = ("tasks", "suites", "attempts", "agents", "specs", "sandbox", "grading")
LAZY_ROOMS = ("tasks", "suites", "attempts", "agents")
# What code outside runner/ may import: a room (its surface, never a module inside it), or a
# shared module. `from runner import X` takes only the package's own names (__version__).
SURFACE = {f"runner.{room}" for room in ROOMS} | {
    f"runner.{name}" for name in RUNNER_TOP - {"__init__", "rooms"}
}
OUTSIDERS = ("orchestration", "warehouse", "app")


def test_runner_keeps_only_its_shared_modules_at_the_top():
    top = {p.stem for p in (REPO_ROOT / "runner").glob("*.py")}
    rooms = {p.parent.name for p in (REPO_ROOT / "runner").glob("*/__init__.py")}
    assert top == RUNNER_TOP, f"runner/ gained or lost a top module: {sorted(top ^ RUNNER_TOP)}"
    assert rooms == {*ROOMS}, f"runner/'s rooms changed: {sorted(rooms ^ {*ROOMS})}"


def surface_violations(path: Path) -> Iterator[str]:
    where = path.relative_to(REPO_ROOT)
    for line, module, names in imports(path):
        if module != "runner" and not module.startswith("runner."):
            continue
        if module == "runner":
            inside = [f"runner.{name}" for name in names if name != "__version__"]
        elif module not in SURFACE:
            inside = [module]
        else:
            inside = [f"{module}.{name}" for name in names if is_module(f"{module}.{name}")]
        for dotted in inside:
            yield f"{where}:{line}: imports {dotted}; import its room's surface (runner.<room>) instead"


def test_outside_code_imports_runner_only_through_its_rooms_surfaces():
    files = sorted(p for top in OUTSIDERS for p in (REPO_ROOT / top).rglob("*.py"))
    found = [problem for path in files for problem in surface_violations(path)]
    # The check reads real imports: the Dagster assets take the bench from its room.
    assert any(
        module == "runner.suites" and "Bench" in names
        for path in files
        for _, module, names in imports(path)
    )
    assert not found, "\n".join(found)


def test_each_surface_name_resolves_and_importing_a_room_loads_none_of_its_modules():
    """A room's surface (its TYPE_CHECKING imports) names real things, and importing the room
    imports nothing of it until a name is asked for: the CLI and the Dagster code location pay
    only for the modules they use."""
    from runner.rooms import surface_of

    probe = (
        "import json, sys\n"
        f"rooms = {[f'runner.{room}' for room in LAZY_ROOMS]!r}\n"
        "for room in rooms: __import__(room)\n"
        "print(json.dumps(sorted(m for m in sys.modules for r in rooms if m.startswith(r + '.'))))"
    )
    loaded = json.loads(subprocess.check_output([sys.executable, "-c", probe], text=True))
    assert loaded == [], f"importing a room imported {loaded}"

    for room in (*LAZY_ROOMS, "specs"):
        package = importlib.import_module(f"runner.{room}")
        assert package.__file__ is not None
        for name, module in surface_of(Path(package.__file__)).items():
            assert getattr(package, name) is getattr(importlib.import_module(module), name)
    with pytest.raises(AttributeError, match="no attribute 'not_on_the_surface'"):
        _ = importlib.import_module("runner.suites").not_on_the_surface


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


# tests/README.md's layout: a test file sits under the path of what it tests, so every folder of
# tests holding test modules names a folder of the repository (tests/runner/agents/gateway/ for
# runner/agents/gateway/, tests/agents/ for the shipped agents in agents/). The exceptions test a
# behaviour no one folder anchors (the README says why).
BEHAVIOUR_FOLDERS = {"adversarial"}


def test_every_folder_of_tests_mirrors_a_folder_of_the_repository():
    tests = REPO_ROOT / "tests"
    folders = {p.parent.relative_to(tests) for p in tests.rglob("test_*.py")} - {Path()}
    assert Path("runner/agents/gateway") in folders, "the layout check found no test folders"
    stray = sorted(
        f"tests/{folder}/"
        for folder in folders
        if folder.parts[0] not in BEHAVIOUR_FOLDERS and not (REPO_ROOT / folder).is_dir()
    )
    assert not stray, (
        f"{', '.join(stray)}: no such folder in the repository; move each test file to "
        "tests/<path of the module it tests>"
    )
    # every test folder is a package, so two files may share a basename in different folders
    unpackaged = sorted(f"tests/{f}/" for f in folders if not (tests / f / "__init__.py").is_file())
    assert not unpackaged, f"{', '.join(unpackaged)}: no __init__.py"
