"""Every dashboard page (and the router) renders over a real snapshot and over none."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.test_app_queries import (  # noqa: F401  (app_snapshot: the session fixture)
    ALPHA_COST,
    LATE_DAY,
    app_snapshot,
)

APP_DIR = Path(__file__).resolve().parents[1] / "app"
PAGES = [
    "leaderboard",
    "settings",
    "reliability",
    "rank_stability",
    "time_scaling",
    "cost",
    "run_explorer",
]
SCRIPTS = ["router.py", *(f"app_pages/{page}.py" for page in PAGES)]


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
    at = _run("router.py", app_snapshot, monkeypatch)
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
    at.multiselect(key="statuses").select("success").run()
    assert not at.exception
    successes = at.dataframe[0].value
    assert 0 < len(successes) < total and set(successes["status"]) == {"success"}
    assert at.selectbox[0].value == successes["run_id"].iloc[0]
    assert at.subheader[0].value == successes["run_id"].iloc[0]
    assert at.json, "the opened attempt shows its record"


def _charts(at: AppTest) -> list:
    return at.get("vega_lite_chart")


GATEWAY_TRANSCRIPT = [
    {"event": "gateway_start", "t": 0.0, "protocol": "openai-chat", "base_url": "https://p/v1"},
    {"event": "request", "t": 0.2, "method": "GET", "path": "/v1/models", "status": 200, "seconds": 0.1},
    {
        "event": "model_call", "t": 1.5, "protocol": "openai-chat", "method": "POST",
        "path": "/v1/chat/completions", "status": 200, "seconds": 1.2, "stream": True,
        "usage": {"input": 1200, "output": 85},
        "request": {"model": "m", "n_messages": 7, "tools": ["bash"], "messages": [
            {"role": "tool", "tool_call_id": "c1", "content": "train.csv test.csv"}]},
        "reply": {"text": "**Training** [now](http://evil.example)", "tool_calls": [
            {"name": "bash", "arguments": '{"command": "python train.py"}'}]},
    },
    {
        "event": "model_call", "t": 3.0, "protocol": "openai-chat", "method": "POST",
        "path": "/v1/chat/completions", "status": 429, "seconds": 0.1, "stream": False,
        "usage": None, "request": None, "reply": {"error": "(rate_limit) slow down"},
    },
    {"event": "gateway_stop", "t": 9.0, "stats": {"requests": 2}},
]  # fmt: skip


def test_run_explorer_shows_a_gateway_transcript_as_text(app_snapshot: Path, monkeypatch):  # noqa: F811
    from app import queries

    monkeypatch.setattr(queries, "run_transcript", lambda record: GATEWAY_TRANSCRIPT)
    at = _run("app_pages/run_explorer.py", app_snapshot, monkeypatch)
    texts = [str(t.value) for t in at.text]
    shown = "\n".join(texts)
    assert "[tool, message 7] train.csv test.csv" in texts  # the last input
    assert "**Training** [now](http://evil.example)" in texts  # the reply, not rendered
    assert "1.5 s · POST /v1/chat/completions · HTTP 200 · 1.2 s · tokens in 1200, out 85" in shown
    assert "HTTP 429 · 0.1 s · usage unknown" in shown and "error: (rate_limit) slow down" in shown
    assert "GET /v1/models · HTTP 200" in shown and "gateway for openai-chat" in shown
    assert 'bash({"command": "python train.py"})' in [c.value for c in at.code]
    assert "evil.example" not in _text(at)  # never as markdown


def test_run_explorer_without_a_transcript_explains_who_has_one(app_snapshot: Path, monkeypatch):  # noqa: F811
    at = _run("app_pages/run_explorer.py", app_snapshot, monkeypatch)
    assert "command agents that reach their model through the harness's gateway" in _text(at)


def test_router_filters_apply_across_pages(app_snapshot: Path, monkeypatch):  # noqa: F811
    at = _run("router.py", app_snapshot, monkeypatch)
    assert list(at.dataframe[0].value["agent_id"]) == ["alpha", "beta"]
    assert "not recomputed" in " ".join(str(c.value) for c in at.sidebar.caption)
    at.sidebar.multiselect(key="filter_agents").set_value(["beta"]).run()
    assert not at.exception
    assert list(at.dataframe[0].value["agent_id"]) == ["beta"]
    assert list(at.dataframe[1].value["agent_id"]) == ["beta"]  # coverage too
    assert "agents: beta" in _text(at)
    for page in ("reliability", "rank_stability", "time_scaling", "cost"):
        at.switch_page(f"app_pages/{page}.py").run()
        assert not at.exception, page
        assert at.sidebar.multiselect(key="filter_agents").value == ["beta"], page
        assert set(at.dataframe[0].value["agent_id"]) == {"beta"}, page
    at.switch_page("app_pages/settings.py").run()
    at.sidebar.multiselect(key="filter_tasks").set_value(["t2"]).run()
    assert set(at.dataframe[0].value["task_id"]) == {"t2"}
    assert set(at.dataframe[1].value["agent_id"]) == {"beta"}  # the counted attempts


def test_suite_and_date_filters(app_snapshot: Path, monkeypatch):  # noqa: F811
    at = _run("router.py", app_snapshot, monkeypatch)
    at.sidebar.multiselect(key="filter_suites").set_value(["other"]).run()
    assert not at.exception
    assert at.warning, "nobody of suite 'other' is ranked"
    assert list(at.dataframe[0].value["agent_id"]) == ["gamma"]  # the coverage table only
    at.sidebar.multiselect(key="filter_suites").set_value([]).run()
    at.switch_page("app_pages/run_explorer.py").run()
    everything = len(at.dataframe[0].value)
    at.sidebar.date_input(key="filter_dates").set_value((LATE_DAY, LATE_DAY)).run()
    assert not at.exception
    late = at.dataframe[0].value
    assert len(late) == 1 < everything and late["status"].tolist() == ["no_submission"]


def test_cost_page_shows_known_and_unknown_cost(app_snapshot: Path, monkeypatch):  # noqa: F811
    at = _run("app_pages/cost.py", app_snapshot, monkeypatch)
    agents = at.dataframe[0].value.set_index("agent_id")
    assert agents.loc["alpha", "cost_mean_usd"] == pytest.approx(ALPHA_COST)
    assert agents["cost_total_usd"][["beta", "gamma"]].isna().all()  # unknown, not $0
    assert "Cost unknown for: beta, gamma" in _text(at)
    assert len(_charts(at)) == 2  # points per dollar, tokens
    settings = at.dataframe[1].value
    assert {"points_per_dollar", "cost_per_success_usd", "tokens_in_mean"} <= set(settings)


def test_settings_page_plots_counted_attempts(app_snapshot: Path, monkeypatch):  # noqa: F811
    at = _run("app_pages/settings.py", app_snapshot, monkeypatch)
    assert at.selectbox(key="task").value == "t1" and at.selectbox(key="budget").value == 60
    counted = at.dataframe[1].value
    assert counted.groupby("agent_id").size().to_dict() == {"alpha": 5, "beta": 5, "gamma": 1}
    assert len(_charts(at)) == 2
    at.selectbox(key="budget").set_value(600).run()
    assert set(at.dataframe[1].value["budget_seconds"]) == {600}


def test_reliability_and_time_scaling_extras(app_snapshot: Path, monkeypatch):  # noqa: F811
    at = _run("app_pages/reliability.py", app_snapshot, monkeypatch)
    assert len(_charts(at)) == 3  # status, stability, performance vs stability
    assert "Performance vs. stability" in [h.value for h in at.subheader]
    at = _run("app_pages/time_scaling.py", app_snapshot, monkeypatch)
    monotone = at.dataframe[1].value.set_index("agent_id")
    assert monotone.loc["alpha", "monotone"] == "3 / 3"
    assert len(_charts(at)) == 2
