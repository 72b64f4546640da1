"""A room's public surface, each name loaded from its module on first use.

``runner`` is split into rooms (``runner.tasks``, ``runner.suites``, ``runner.attempts``,
``runner.agents``, beside ``runner.specs``, ``runner.sandbox``, ``runner.grading``); code outside
``runner/`` (``orchestration/``, ``warehouse/``, ``app/``) imports a room, never a module inside
it (tests/test_layout.py holds them to it). A room's ``__init__`` names its surface once, as
imports under ``if TYPE_CHECKING:`` (what mypy and a reader see), and sets
``__getattr__ = lazy_surface(__name__)``: importing the room costs nothing, and a name brings in
only its own module. That keeps ``tmlbench --help`` and the Dagster code location as light as
the modules they really use (``from runner.suites import setting_key`` does not import the bench).
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def surface_of(init_file: Path) -> dict[str, str]:
    """name → defining module, from the ``if TYPE_CHECKING:`` imports of a room's ``__init__``."""
    tree = ast.parse(init_file.read_text(encoding="utf-8"), filename=str(init_file))
    names: dict[str, str] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Name)
            and node.test.id == "TYPE_CHECKING"
        ):
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
                    for alias in stmt.names:
                        names[alias.asname or alias.name] = stmt.module
    return names


def lazy_surface(package: str) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: its surface's names, imported when first asked."""
    surface: dict[str, str] | None = None

    def __getattr__(name: str) -> Any:
        nonlocal surface
        if surface is None:
            init_file = sys.modules[package].__file__
            assert init_file is not None, f"{package} has no __init__ file"
            surface = surface_of(Path(init_file))
        module = surface.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # asked once: a plain attribute from now on
        return value

    return __getattr__
