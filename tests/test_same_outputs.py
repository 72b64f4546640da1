"""The renovation changed no result: the demo's marts and terminal leaderboard match tests/golden."""

from __future__ import annotations

import json

import pytest

from tests.support.demo_outputs import (
    LEADERBOARD_FILE,
    MARTS_FILE,
    build_demo,
    demo_agents,
    demo_paths,
    read_marts,
    terminal_leaderboard,
)
from tests.support.workers import shared_session_dir

# integration: the demo suite run for real and its marts built by dbt
# xdist_group: its module fixtures (the demo run and its dbt build) are built once, on one worker, not on each
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("same_outputs")]


@pytest.fixture(scope="session")
def demo(tmp_path_factory):
    root = shared_session_dir(tmp_path_factory, "demo", build_demo)
    return demo_paths(root), root / "warehouse.duckdb"


def test_every_mart_has_the_rows_it_had(demo):
    paths, warehouse = demo
    before = json.loads(MARTS_FILE.read_text())
    after = read_marts(warehouse, demo_agents(paths))
    missing = sorted(set(before) - set(after))
    assert not missing, f"marts gone: {missing}"
    for name, rows in before.items():
        assert after[name] == rows, f"marts.{name} changed"


def test_the_terminal_leaderboard_prints_what_it_printed(demo):
    paths, warehouse = demo
    assert terminal_leaderboard(paths, warehouse) == LEADERBOARD_FILE.read_text()
