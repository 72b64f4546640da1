"""Every dashboard page (and the router) renders over a real snapshot and over none."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from markdown_it import MarkdownIt
from streamlit.testing.v1 import AppTest

from runner.config import REPO_ROOT
from tools.dashboard_snapshot import ALPHA_COST, LATE_DAY, run_id_of

# integration: every page run by Streamlit's AppTest on app_snapshot (a dbt build)
pytestmark = pytest.mark.integration

APP_DIR = REPO_ROOT / "app"
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
def test_page_renders_with_runs(script: str, app_snapshot: Path, monkeypatch):
    at = _run(script, app_snapshot, monkeypatch)
    assert "make run" not in _text(at)
    assert at.dataframe, "every page shows at least one table"


@pytest.mark.parametrize("script", SCRIPTS)
def test_page_without_snapshot_explains_make_run(script: str, tmp_path: Path, monkeypatch):
    at = _run(script, tmp_path / "missing.duckdb", monkeypatch)
    assert "make run" in _text(at)
    assert not at.dataframe


def test_leaderboard_shows_the_agents_and_switches_variant(app_snapshot: Path, monkeypatch):
    at = _run("router.py", app_snapshot, monkeypatch)
    board = at.dataframe[0].value
    assert list(board["agent_id"]) == ["alpha", "beta"]
    assert list(board.columns) == [  # what people came for, first; the rest in the expander
        "rank", "agent_id", "score", "score_interval", "p_rank_1", "success_rate",
        "mean_rank_sd", "coverage", "contamination", "duplicates",
    ]  # fmt: skip
    assert "Spec metadata" in at.expander[0].label
    assert not _frames(at, "harness")  # the expander's content runs once it is opened
    at.session_state["leaderboard_details"] = True
    at.run()
    (details,) = _frames(at, "harness", "provider", "model_id")
    assert list(details["agent_id"]) == ["alpha", "beta"]
    at.selectbox(key="variant").set_value("largest_budget").run()
    assert not at.exception
    board = at.dataframe[0].value
    assert list(board["agent_id"]) == ["alpha", "beta"]
    assert "p_rank_1" not in board.columns  # the bootstrap is of the primary variant only
    (coverage,) = _frames(at, "badge")
    coverage = coverage.set_index("agent_id")
    assert coverage.loc["gamma", "badge"].startswith("✗")  # not ranked


def _frames(at: AppTest, *columns: str) -> list:
    """The tables of the page that have these columns."""
    return [d.value for d in at.dataframe if set(columns) <= set(d.value.columns)]


def test_leaderboard_badges_replayed_submissions(app_snapshot: Path, monkeypatch):
    at = _run("app_pages/leaderboard.py", app_snapshot, monkeypatch)
    board = at.dataframe[0].value.set_index("agent_id")
    assert board.loc["alpha", "duplicates"] == "⚠ 1 setting(s) replayed"
    assert board.loc["beta", "duplicates"] == "↔ 1 attempt(s) shared"
    text = _text(at)
    assert "**duplicates**" in text and "not independent" in text  # the badge's meaning
    assert "Duplicate submissions" in [h.value for h in at.subheader]
    (duplicated,) = _frames(at, "duplicated_counted")
    assert duplicated[["agent_id", "task_id", "budget_seconds"]].values.tolist() == [
        ["alpha", "t3", 600]
    ]


def _record_tables(at: AppTest) -> list:
    """The run explorer's table of the opened attempt's record (it has a run_id row)."""
    return [t for t in _frames(at, "field", "value") if "run_id" in set(t["field"])]


def _source_fields(at: AppTest) -> list:
    """The run explorer's table of an imported attempt's source_fields."""
    return [t for t in _frames(at, "field", "value") if "run_id" not in set(t["field"])]


def _open(at: AppTest, run_id: str) -> AppTest:
    at.selectbox(key="run_id").set_value(run_id).run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_run_explorer_shows_an_attempts_twins(app_snapshot: Path, monkeypatch):
    at = _run("app_pages/run_explorer.py", app_snapshot, monkeypatch)
    _open(at, run_id_of("alpha", "t3", 600, 1))
    warning = " ".join(str(w.value) for w in at.warning)
    assert "Twins: 1 other attempt(s) of this task submitted the same answer" in warning
    assert "1 of them in the same setting: a replayed or cached answer" in warning
    (twins,) = _frames(at, "relation")
    assert twins["run_id"].tolist() == [run_id_of("alpha", "t3", 600, 0)]
    assert "total" not in twins.columns

    _open(at, run_id_of("beta", "t1", 60, 0))
    (twins,) = _frames(at, "relation")
    assert twins[["agent_id", "relation"]].values.tolist() == [["gamma", "another agent"]]
    assert "same setting" not in " ".join(str(w.value) for w in at.warning)

    _open(at, run_id_of("alpha", "t1", 60, 0))
    assert not _frames(at, "relation")
    assert "Twins: none." in _text(at)
    _open(at, run_id_of("beta", "t1", 60, 7))  # a timeout: no submission, no fingerprint
    assert "this attempt has no submission fingerprint" in _text(at)


def test_run_explorer_shows_source_fields_of_imported_runs(app_snapshot: Path, monkeypatch):
    from app import queries

    at = _run("app_pages/run_explorer.py", app_snapshot, monkeypatch)
    assert not _source_fields(at)  # a tmlbench run has none
    real_record = queries.run_record
    fields = {"mode": "agent", "temperature": 0.2, "secondary_r2": 0.41, "long": "x" * 5000}
    monkeypatch.setattr(
        queries,
        "run_record",
        lambda con, space, run_id: (
            real_record(con, space, run_id) | {"source_fields": json.dumps(fields)}
        ),
    )
    at = _run("app_pages/run_explorer.py", app_snapshot, monkeypatch)
    (table,) = _source_fields(at)
    shown = dict(table.values.tolist())
    assert shown["mode"] == "agent" and shown["temperature"] == "0.2"
    assert shown["secondary_r2"] == "0.41"
    assert shown["long"].startswith("x" * 2000) and "3,000 more characters" in shown["long"]
    assert "source_fields" in _text(at)


def test_run_explorer_filters_and_opens_an_attempt(app_snapshot: Path, monkeypatch):
    at = _run("app_pages/run_explorer.py", app_snapshot, monkeypatch)
    total = len(at.dataframe[0].value)
    at.multiselect(key="statuses").select("success").run()
    assert not at.exception
    successes = at.dataframe[0].value
    assert 0 < len(successes) < total and set(successes["status"]) == {"success"}
    assert at.selectbox[0].value == successes["run_id"].iloc[0]
    assert at.subheader[0].value == f"` {successes['run_id'].iloc[0]} `"  # literally
    (record,) = _record_tables(at)
    fields = record.set_index("field")["value"]
    assert fields["run_id"] == successes["run_id"].iloc[0] and fields["status"] == "success"
    assert not at.json, "the record is a table, not a collapsed JSON"


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


def test_run_explorer_shows_a_gateway_transcript_as_text(app_snapshot: Path, monkeypatch):
    from app import run_files

    monkeypatch.setattr(run_files, "run_transcript", lambda record: GATEWAY_TRANSCRIPT)
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


def test_run_explorer_without_a_transcript_explains_who_has_one(app_snapshot: Path, monkeypatch):
    at = _run("app_pages/run_explorer.py", app_snapshot, monkeypatch)
    assert "command agents that reach their model through the harness's gateway" in _text(at)


def _open_filters(at: AppTest) -> AppTest:
    """Open the sidebar's Filters expander (its widgets are drawn only while it is open)."""
    at.session_state["filters_open"] = True
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_router_filters_apply_across_pages(app_snapshot: Path, monkeypatch):
    at = _open_filters(_run("router.py", app_snapshot, monkeypatch))
    assert list(at.dataframe[0].value["agent_id"]) == ["alpha", "beta"]
    assert "not recomputed" in " ".join(str(c.value) for c in at.sidebar.caption)
    at.sidebar.multiselect(key="filter_agents").set_value(["beta"]).run()
    assert not at.exception
    assert list(at.dataframe[0].value["agent_id"]) == ["beta"]
    at.session_state["leaderboard_coverage"] = True  # all ranked: the coverage is behind
    at.run()  # its expander, whose content runs once it is opened
    assert list(at.dataframe[1].value["agent_id"]) == ["beta"]  # coverage too
    assert "agents: ` beta `" in _text(at)  # an id from a spec file: literally
    for page in ("reliability", "rank_stability", "time_scaling", "cost"):
        at.switch_page(f"app_pages/{page}.py").run()
        assert not at.exception, page
        assert at.sidebar.multiselect(key="filter_agents").value == ["beta"], page
        assert set(at.dataframe[0].value["agent_id"]) == {"beta"}, page
    at.switch_page("app_pages/settings.py").run()
    at.sidebar.multiselect(key="filter_tasks").set_value(["t2"]).run()
    assert at.selectbox(key="task").options == ["t2"]  # the table is of the task chosen here
    assert set(at.dataframe[1].value["agent_id"]) == {"beta"}  # the counted attempts
    at.session_state["filters_open"] = False  # closed: no filter widget drawn, the filters stay
    at.switch_page("app_pages/leaderboard.py").run()
    assert not at.exception and not at.sidebar.multiselect
    assert list(at.dataframe[0].value["agent_id"]) == ["beta"]
    assert "agents: ` beta `" in _text(at) and "tasks: ` t2 `" in _text(at)


def test_suite_and_date_filters(app_snapshot: Path, monkeypatch):
    at = _open_filters(_run("router.py", app_snapshot, monkeypatch))
    picker = at.selectbox(key="filter_suite")  # at the top of the page, not in the sidebar
    assert not at.sidebar.selectbox and picker.value == "demo"  # the default suite
    # every suite file, the one never run too (marked so)
    assert picker.options == ["demo · demo", "idle · idle (no runs yet)", "other · other"]
    picker.set_value("other").run()
    assert not at.exception
    assert at.warning, "nobody of suite 'other' is ranked"
    assert list(at.dataframe[0].value["agent_id"]) == ["gamma"]  # the coverage table only
    at.selectbox(key="filter_suite").set_value("demo").run()
    at.switch_page("app_pages/run_explorer.py").run()
    everything = len(at.dataframe[0].value)
    at.sidebar.date_input(key="filter_dates").set_value((LATE_DAY, LATE_DAY)).run()
    assert not at.exception
    late = at.dataframe[0].value
    assert len(late) == 1 < everything and late["status"].tolist() == ["no_submission"]


def test_cost_page_shows_known_and_unknown_cost(app_snapshot: Path, monkeypatch):
    at = _run("app_pages/cost.py", app_snapshot, monkeypatch)
    agents = at.dataframe[0].value.set_index("agent_id")
    assert agents.loc["alpha", "cost_mean_usd"] == pytest.approx(ALPHA_COST)
    assert agents["cost_total_usd"][["beta", "gamma"]].isna().all()  # unknown, not $0
    assert "Cost unknown for: ` beta `, ` gamma `" in _text(at)
    assert len(_charts(at)) == 2  # points per dollar, tokens
    settings = at.dataframe[1].value
    assert {"points_per_dollar", "cost_per_success_usd", "cost_mean_usd"} <= set(settings)


def test_settings_page_plots_counted_attempts(app_snapshot: Path, monkeypatch):
    at = _run("app_pages/settings.py", app_snapshot, monkeypatch)
    assert at.selectbox(key="task").value == "t1" and at.selectbox(key="budget").value == 60
    counted = at.dataframe[1].value
    assert counted.groupby("agent_id").size().to_dict() == {"alpha": 5, "beta": 5, "gamma": 1}
    assert len(_charts(at)) == 2
    at.selectbox(key="budget").set_value(600).run()
    assert all("__600s__" in run_id for run_id in at.dataframe[1].value["run_id"])


def test_reliability_and_time_scaling_extras(app_snapshot: Path, monkeypatch):
    at = _run("app_pages/reliability.py", app_snapshot, monkeypatch)
    # status, provider faults, pass^k and expected worst points, stability, perf. vs stability
    assert len(_charts(at)) == 6
    assert "Reliability under repetition (pass^k)" in [h.value for h in at.subheader]
    assert "Performance vs. stability" in [h.value for h in at.subheader]
    # alpha's two provider_error attempts are the provider's: apart, not in its success rate
    assert "Provider faults (not the agent's)" in [h.value for h in at.subheader]
    (rates,) = _frames(at, "provider_errors")
    alpha = rates.set_index("agent_id").loc["alpha"]
    assert (alpha["provider_errors"], alpha["agent_failures"], alpha["success_rate"]) == (2, 0, 1.0)
    assert alpha["provider_faults"] == 2 * 2 + 1  # the success's recovered fault too
    at = _run("app_pages/time_scaling.py", app_snapshot, monkeypatch)
    monotone = at.dataframe[1].value.set_index("agent_id")
    assert monotone.loc["alpha", "monotone"] == "3 / 3"
    assert len(_charts(at)) == 2


def test_leaderboard_and_settings_mark_settings_stopped_at_the_ceiling(
    app_snapshot: Path,
    monkeypatch,
):
    at = _run("app_pages/leaderboard.py", app_snapshot, monkeypatch)
    (coverage,) = _frames(at, "badge")
    coverage = coverage.set_index("agent_id")
    assert coverage.loc["gamma", "badge"].endswith("⊘ 1 stopped at the harness-error ceiling")
    assert coverage.loc["gamma", "harness_errors"] == 3
    warning = " ".join(str(w.value) for w in at.warning)
    # gamma never completes: the suite is provisional, and says so above the table
    assert "**Provisional**: 12 of 18 settings complete" in warning
    assert "among the 2 of 3 agents complete" in warning
    assert "1 setting(s) stopped at the harness-error ceiling" in warning
    assert "harness_error_ceiling" in warning and "Run explorer" in warning
    # recovering is an action, never an edit of the suite file
    assert "tmlbench resume --suite" in warning and "resume_stopped: true" in warning
    assert "suite file" not in warning
    (stopped,) = _frames(at, "missing")
    assert stopped[["agent_id", "task_id", "budget_seconds"]].values.tolist() == [
        ["gamma", "t2", 600]
    ]
    assert stopped["harness_errors"].tolist() == ["⊘ 3 of 3: stopped at the ceiling"]

    at = _run("app_pages/settings.py", app_snapshot, monkeypatch)
    assert not any("harness-error ceiling" in str(w.value) for w in at.warning)  # t1: none
    at.selectbox(key="task").set_value("t2").run()
    assert not at.exception
    (stopped_here,) = [str(w.value) for w in at.warning if "of this task stopped" in str(w.value)]
    assert "1 setting(s) of this task stopped at the harness-error" in stopped_here
    assert "tmlbench resume --suite" in stopped_here
    table = at.dataframe[0].value.set_index(["agent_id", "budget_seconds"])
    assert table.loc[("gamma", 600), "harness_errors"] == "⊘ 3 of 3: stopped at the ceiling"
    assert table.loc[("alpha", 600), "harness_errors"] == "0 of 3"


# Text an agent controls, with everything Streamlit's Markdown would render: an image (fetched
# at once), a javascript: link, raw HTML, a heading (on its own line), a code span's backtick,
# a colour directive, LaTeX and an emoji shortcode.
HOSTILE = (
    "![x](http://127.0.0.1:9/pixel.png) [click](javascript:alert(1)) "
    "<img src=x onerror=alert(1)>\n# Heading from the agent\n`tick` :red[red] $x^2$ :smile:"
)
HOSTILE_MARKERS = ("127.0.0.1:9", "javascript:", "onerror", "Heading from the agent", ":red[")
HOSTILE_TRANSCRIPT = [
    {"event": "start", "t": 0.0, "model": HOSTILE, "base_url": HOSTILE, "budget_seconds": HOSTILE,
     "system": HOSTILE, "instructions": HOSTILE},
    {"event": "response", "t": 1.0, "seconds": HOSTILE, "usage": {"note": HOSTILE},
     "message": {"role": "assistant", "content": HOSTILE}},
    {"event": "tool", "t": 1.5, "name": HOSTILE, "seconds": 0.1, "arguments": {"command": HOSTILE},
     "result": HOSTILE},
    {"event": "malformed_tool_call", "t": 2.0, "raw": HOSTILE},
    {"event": "end", "t": 3.0, "reason": HOSTILE, "provider_error": HOSTILE},
]  # fmt: skip
# every element whose body Streamlit renders as Markdown
MARKDOWN_ELEMENTS = (
    "markdown", "caption", "title", "header", "subheader", "error", "warning", "info", "success",
    "toast",
)  # fmt: skip


def _markdown_problems(at: AppTest) -> list[str]:
    """What a CommonMark parser finds in the Markdown bodies of the page: images, links or raw
    HTML at all, and agent text outside a code span (where GFM autolinks, Streamlit's directives,
    emoji and LaTeX would apply)."""
    parser = MarkdownIt("commonmark", {"html": True})
    problems = []
    for name in MARKDOWN_ELEMENTS:
        for element in getattr(at, name):
            body = str(element.value)
            for token in parser.parse(body):
                if token.type in ("html_block", "heading_open") and any(
                    m in body for m in HOSTILE_MARKERS
                ):
                    problems.append(f"{name}: {token.type} in {body!r}")
                for child in token.children or []:
                    if child.type in ("image", "link_open", "html_inline"):
                        problems.append(f"{name}: {child.type} in {body!r}")
                    if child.type == "text" and any(m in child.content for m in HOSTILE_MARKERS):
                        problems.append(f"{name}: agent text outside a code span in {body!r}")
    return problems


def test_run_explorer_shows_agent_text_as_text(app_snapshot: Path, monkeypatch):
    from app import queries, run_files

    real_record = queries.run_record

    def hostile_record(con, space, run_id):
        record = real_record(con, space, run_id)
        return record | {
            "validation_code": "wrong_columns",
            "validation_message": f"the header is {HOSTILE!r}",
            "error_message": HOSTILE,
            "egress_denied_hosts": {f"{HOSTILE}:443": 2},
            "source_fields": json.dumps({HOSTILE: HOSTILE}),
        }

    monkeypatch.setattr(queries, "run_record", hostile_record)
    monkeypatch.setattr(run_files, "run_transcript", lambda record: HOSTILE_TRANSCRIPT)
    monkeypatch.setattr(run_files, "run_file_preview", lambda record, field, limit=0: HOSTILE)
    at = _run("app_pages/run_explorer.py", app_snapshot, monkeypatch)

    assert _markdown_problems(at) == []
    assert not at.image and not at.html and not at.latex
    codes = [str(c.value) for c in at.code]
    texts = [str(t.value) for t in at.text]
    assert f"the header is {HOSTILE!r}" in codes  # the validation message, verbatim
    assert codes.count(HOSTILE) >= 3 + 4  # error, stdout, stderr, submission; transcript
    assert texts.count(HOSTILE) == 1  # the model's reply
    assert any("wrong_columns" in str(e.value) for e in at.error)
    usage = " ".join(str(c.value) for c in at.caption)
    assert "egress denied hosts" in usage and "127.0.0.1:9" in usage  # shown, but as code
    (fields,) = _source_fields(at)  # an import's fields: table cells, not Markdown
    assert fields.values.tolist() == [[HOSTILE, HOSTILE]]

    # the checker itself: the old rendering (Markdown straight from the record) is caught
    from streamlit.testing.v1 import AppTest as Fresh

    naive = Fresh.from_string(f"import streamlit as st\nst.error({HOSTILE!r})")
    naive.run()
    problems = _markdown_problems(naive)
    assert any("image" in p for p in problems) and any("html" in p for p in problems)


def test_literal_survives_backticks_and_line_breaks():
    from app.app_pages._common import literal

    parser = MarkdownIt("commonmark", {"html": True})
    for text in (HOSTILE, "``x``", "`", " lead", "a\r\n# b", "x" * 400):
        shown = literal(text)
        tokens = parser.parse(f"before {shown} after")
        assert [t.type for t in tokens] == ["paragraph_open", "inline", "paragraph_close"]
        kinds = [c.type for c in tokens[1].children]
        assert kinds == ["text", "code_inline", "text"], (text, kinds)
    assert literal("") == "" and literal(None) == ""


# Columns a page never shows: the suite is the picker's, run_space an internal key.
NEVER_SHOWN = {"suite_id", "run_space", "total", "variant"}


def _labels(at: AppTest) -> list[tuple[str, str]]:
    """(column, label) of every column of every table the page drew."""
    pairs = []
    for table in at.dataframe:
        config = json.loads(table.proto.columns or "{}")
        for column in table.value.columns:
            pairs.append((column, config.get(column, {}).get("label")))
    return pairs


@pytest.mark.parametrize("page", PAGES)
def test_every_table_has_human_labels_and_empty_cells(page: str, app_snapshot: Path, monkeypatch):
    """Every column of every table (the expanders opened) has a label from app/columns.py,
    none is an internal name (snake_case, or the raw name itself), no suite_id column is shown,
    and missing values are drawn as empty cells."""
    monkeypatch.setenv("TMLBENCH_SNAPSHOT", str(app_snapshot))
    at = AppTest.from_file(str(APP_DIR / f"app_pages/{page}.py"), default_timeout=30)
    for key in ("leaderboard_details", "leaderboard_coverage", "cost_more", "run_columns_all"):
        at.session_state[key] = True
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    pairs = _labels(at)
    assert pairs, page
    assert not {column for column, _ in pairs} & NEVER_SHOWN, pairs
    unlabelled = [(c, lab) for c, lab in pairs if not lab or lab == c or "_" in lab]
    assert not unlabelled, unlabelled
    assert all(table.proto.placeholder == "" for table in at.dataframe)
    assert all(table.proto.HasField("placeholder") for table in at.dataframe)


def test_run_explorer_leads_with_status_score_and_setting(app_snapshot: Path, monkeypatch):
    at = _run("app_pages/run_explorer.py", app_snapshot, monkeypatch)
    columns = list(at.dataframe[0].value.columns)
    assert columns[:5] == ["status", "score", "agent_id", "task_id", "budget_seconds"]
    assert columns[-1] == "run_id"  # the wide id last
    (record,) = _record_tables(at)  # the record view leads with how the attempt ended
    assert record["field"].iloc[0] == "status"


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_suite_without_runs_says_how_to_run_it(script: str, app_snapshot: Path, monkeypatch):
    """A suite file never run is in the picker on every page; chosen, the page says how to run
    it (its Dagster asset group, the command) and shows nothing else."""
    monkeypatch.setenv("TMLBENCH_SNAPSHOT", str(app_snapshot))
    at = AppTest.from_file(str(APP_DIR / "router.py"), default_timeout=30)
    at.run()
    if script != "router.py":
        at.switch_page(script).run()
    at.selectbox(key="filter_suite").set_value("idle").run()
    assert not at.exception, [e.message for e in at.exception]
    hint = " ".join(str(i.value) for i in at.info)
    assert "Suite ` idle ` has no runs yet" in hint
    assert "` suite_idle `" in hint and "orchestration.materialize --suite idle" in hint
    assert not at.dataframe


def _cells(at: AppTest) -> set[str]:
    return {str(v) for frame in at.dataframe for v in frame.value.to_numpy().ravel()}


def test_router_reads_a_newly_published_snapshot_on_its_next_run(
    app_snapshot: Path, tmp_path: Path, monkeypatch
):
    """A session's next run reads the snapshot published since its last, with the first one's
    connection still held in the process (queries.SnapshotReader; the cached query results are
    keyed on the snapshot file's identity)."""
    path = tmp_path / "snapshot.duckdb"
    staging = tmp_path / "staging.duckdb"
    staging.write_bytes(app_snapshot.read_bytes())
    with duckdb.connect(str(staging)) as writer:  # an older state: before beta's runs
        tables = writer.execute(
            "select table_schema, table_name from information_schema.columns "
            "where column_name = 'agent_id'"
        ).fetchall()
        for schema, table in tables:
            writer.execute(f'delete from "{schema}"."{table}" where agent_id = \'beta\'')
    staging.replace(path)
    at = _run("router.py", path, monkeypatch)
    assert "alpha" in _cells(at) and "beta" not in _cells(at)
    staging.write_bytes(app_snapshot.read_bytes())
    staging.replace(path)  # published as publish_snapshot does: a new file swapped in
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert {"alpha", "beta"} <= _cells(at)


def test_leaderboard_offers_the_suites_report_bundle_as_a_zip(app_snapshot: Path, monkeypatch):
    """The button's file is made on click (a deferred callable of Streamlit's media file manager,
    recorded here as the page registers it), from the page's snapshot, and kept per snapshot."""
    import io
    import zipfile

    from streamlit.runtime.media_file_manager import MediaFileManager

    from app import queries
    from app.app_pages import _common
    from warehouse.report.figures import FIGURES

    deferred = {}
    register = MediaFileManager.add_deferred

    def recording(self, data, *args, **kwargs):
        file_id = register(self, data, *args, **kwargs)
        deferred[file_id] = data
        return file_id

    monkeypatch.setattr(MediaFileManager, "add_deferred", recording)
    at = _run("app_pages/leaderboard.py", app_snapshot, monkeypatch)
    button = at.download_button(key="download-report")
    assert button.label == "Download the report (zip)"
    make = deferred[button.proto.deferred_file_id]

    built = []
    pack = queries.report_zip
    monkeypatch.setattr(queries, "report_zip", lambda *a: built.append(a[1:]) or pack(*a))
    _common._report_zip.clear()
    data = make()
    assert make() == data and built == [("demo",)]  # the second click: the same zip, kept
    names = set(zipfile.ZipFile(io.BytesIO(data)).namelist())
    expected = {"demo/report.html", "demo/LEADERBOARD.md", "demo/manifest.json"}
    expected |= {f"demo/figures/{f.name}.{ext}" for f in FIGURES for ext in ("png", "svg", "csv")}
    assert expected <= names, sorted(expected - names)
