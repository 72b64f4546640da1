"""The CLI answers at once: a command imports only what it uses.

``--help`` loads every command module, the plugins' included, so a heavy import at the top of
any of them shows up here. (The leaderboard on built marts: tests/warehouse/test_warehouse_cli.py.)
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from tests.support.cli_imports import HEAVY, imported_by


@pytest.mark.parametrize(
    "args",
    [("--help",), ("tasks", "--help"), ("warehouse", "build", "--help"), ("leaderboard", "--help")],
)
def test_help_imports_nothing_heavy(args):
    assert not imported_by(*args) & HEAVY


def test_help_reads_no_spec():
    """Specs (YAML into pydantic models) are read by the commands that use them."""
    loaded = imported_by("--help")
    assert "pydantic" not in loaded and "yaml" not in loaded


@pytest.mark.parametrize("args", [("sql", "select 1"), ("leaderboard",)])
def test_warehouse_commands_import_duckdb_and_nothing_heavier(args, tmp_path: Path):
    """On an empty warehouse file: ``leaderboard`` stops at the missing marts, after the
    imports its reading needs."""
    warehouse = tmp_path / "w.duckdb"
    duckdb.connect(str(warehouse)).close()
    loaded = imported_by(*args, warehouse=warehouse)
    assert "duckdb" in loaded
    assert not loaded & (HEAVY - {"duckdb"})
