"""Every dashboard page (and the router) renders over a real snapshot and over none."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.test_app_queries import app_snapshot  # noqa: F401  (the session fixture)

APP_DIR = Path(__file__).resolve().parents[1] / "app"
PAGES = ["leaderboard", "settings", "reliability", "rank_stability", "time_scaling", "run_explorer"]
SCRIPTS = ["streamlit_app.py", *(f"app_pages/{page}.py" for page in PAGES)]


def _run(script: str, snapshot: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("TMLBENCH_SNAPSHOT", str(snapshot))
    at = AppTest.from_file(str(APP_DIR / script), default_timeout=30)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def _text(at: AppTest) -> str:
    parts = [e.value for e in (*at.markdown, *at.info, *at.caption, *at.warning, *at.title)]
    return "\n".join(str(p) for p in parts)


@pytest.mark.parametrize("script", SCRIPTS)
def test_page_renders_with_runs(script: str, app_snapshot: Path, monkeypatch):  # noqa: F811
    at = _run(script, app_snapshot, monkeypatch)
    assert "make run" not in _text(at)
    assert at.dataframe, "every page shows at least one table"


@pytest.mark.parametrize("script", SCRIPTS)
def test_page_without_snapshot_explains_make_run(script: str, tmp_path: Path, monkeypatch):
    at = _run(script, tmp_path / "missing.duckdb", monkeypatch)
    assert "make run" in _text(at)
    assert not at.dataframe


def test_leaderboard_shows_the_agents_and_switches_variant(app_snapshot: Path, monkeypatch):  # noqa: F811
    at = _run("streamlit_app.py", app_snapshot, monkeypatch)
    board = at.dataframe[0].value
    assert list(board["agent_id"]) == ["alpha", "beta"]
    assert "success_rate" in board.columns
    at.selectbox(key="variant").set_value("largest_budget").run()
    assert not at.exception
    board = at.dataframe[0].value
    assert list(board["agent_id"]) == ["alpha", "beta"]
    assert "p_rank_1" not in board.columns
    coverage = at.dataframe[1].value.set_index("agent_id")
    assert not bool(coverage.loc["gamma", "is_ranked"])


def test_run_explorer_filters_and_opens_an_attempt(app_snapshot: Path, monkeypatch):  # noqa: F811
    at = _run("app_pages/run_explorer.py", app_snapshot, monkeypatch)
    total = len(at.dataframe[0].value)
    at.multiselect[3].select("success").run()  # the status filter
    assert not at.exception
    successes = at.dataframe[0].value
    assert 0 < len(successes) < total and set(successes["status"]) == {"success"}
    assert at.selectbox[0].value == successes["run_id"].iloc[0]
    assert at.subheader[0].value == successes["run_id"].iloc[0]
    assert at.json, "the opened attempt shows its record"
