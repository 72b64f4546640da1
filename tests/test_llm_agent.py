"""The built-in llm agent through real bwrap attempts, against a scripted provider on loopback.

Nothing here calls a real provider: ``runner.scripted_provider`` plays recorded conversations
with the OpenAI chat-completions protocol, and the attempts run in the real sandbox and are
graded on the private answers like any other.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from runner.errors import TmlbenchError
from runner.llm.session import ELIDED, _fit_context
from runner.records import RunRecord
from runner.scripted_provider import (
    ScriptedProvider,
    call,
    error,
    hang,
    load_conversation,
    reply,
)
from runner.specs import AgentSpec
from tests.test_attempt import attempt
from warehouse.db import apply_ddl, connect
from warehouse.loader import load_runs
from warehouse.marts import build_marts
from warehouse.snapshot import publish_snapshot

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(180)]

TASK = "bank-customer-churn-ict-u-ai"
KEY_ENV = "TMLBENCH_TEST_PROVIDER_KEY"
KEY = "sk-test-key"
PRICE_IN, PRICE_OUT = 2.0, 8.0  # USD per million tokens
CONVERSATION = Path(__file__).parent / "conversations" / "valid_submission.json"


def llm_agent(provider: ScriptedProvider, **llm: object) -> AgentSpec:
    return AgentSpec.model_validate(
        {
            "id": "llm-stub",
            "kind": "llm",
            "title": "built-in agent against the scripted provider",
            "harness": "tmlbench-llm",
            "model": {"provider": "stub", "model_id": provider.model},
            "llm": {
                "base_url": provider.base_url,
                "api_key_env": KEY_ENV,
                "prices": {"input_per_mtok": PRICE_IN, "output_per_mtok": PRICE_OUT},
                "max_retries": 3,
                **llm,
            },
        }
    )


def run(
    paths, provider: ScriptedProvider, budget: int = 120, backend: str = "bwrap", **llm: object
) -> RunRecord:
    return attempt(paths, llm_agent(provider, **llm), TASK, budget, backend=backend)


def transcript(paths, record: RunRecord) -> list[dict]:
    path = paths.runs_dir / record.run_id / record.transcript_path
    return [json.loads(line) for line in path.read_text().splitlines()]


def conversation(*, loose_start: bool = False) -> list[dict]:
    steps = load_conversation(CONVERSATION)
    if loose_start:  # the recorded first step expects to answer the task message itself
        steps = copy.deepcopy(steps)
        steps[0]["expect"].pop("last_message_role")
    return steps


def expected_cost(provider: ScriptedProvider) -> float:
    tokens_in, tokens_out = provider.usage_totals()
    return (tokens_in * PRICE_IN + tokens_out * PRICE_OUT) / 1e6


@pytest.fixture(autouse=True)
def provider_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


def test_a_recorded_conversation_reaches_a_scored_submission(small_paths):
    peek = reply(
        tool_calls=[call("run", {"command": "env; cat /proc/1/environ; ls /run/tmlbench/tools"})]
    )
    with ScriptedProvider([peek, *conversation(loose_start=True)], api_key=KEY) as provider:
        record = run(small_paths, provider)
    assert provider.mismatches == []
    assert record.status == "success", (record.error_message, record.validation_message)
    assert 0.5 < record.score <= 1.0
    assert record.local_validation_score is not None
    assert (record.agent_kind, record.provider, record.model_id) == ("llm", "stub", provider.model)
    tokens_in, tokens_out = provider.usage_totals()
    assert (record.tokens_in, record.tokens_out) == (tokens_in, tokens_out) and tokens_in > 0
    assert record.cost_usd == pytest.approx(expected_cost(provider), rel=1e-12)
    assert (record.requests, record.retries, record.steps) == (4, 0, 4)
    assert record.provider_seconds > 0 and record.tool_seconds > 0
    assert record.provider_seconds + record.tool_seconds <= record.wall_seconds + 1
    events = transcript(small_paths, record)
    assert [e["event"] for e in events][:2] == ["start", "request"]
    assert events[-1] == {**events[-1], "event": "end", "reason": "the model called finish"}
    tools = [e for e in events if e["event"] == "tool"]
    assert [t["name"] for t in tools] == ["run", "write_file", "run", "finish"]
    # The key stays in the harness: not in the sandbox's environment, nor anywhere on disk.
    assert KEY_ENV not in tools[0]["result"] and KEY not in tools[0]["result"]
    assert "tools.sock" in tools[0]["result"]
    run_dir = small_paths.runs_dir / record.run_id
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_the_built_in_agent_works_the_same_in_the_docker_sandbox(small_paths):
    with ScriptedProvider(conversation(), api_key=KEY) as provider:
        record = run(small_paths, provider, backend="docker")
    assert provider.mismatches == []
    assert record.sandbox_backend == "docker"
    assert record.status == "success", (record.error_message, record.validation_message)
    assert (record.tokens_in, record.tokens_out) == provider.usage_totals()
    assert record.local_validation_score is not None


def test_a_429_is_retried_after_its_retry_after(small_paths):
    script = [error(429, "slow down", code="rate_limit_exceeded", retry_after=0.5), *conversation()]
    with ScriptedProvider(script, api_key=KEY) as provider:
        record = run(small_paths, provider)
    assert provider.mismatches == []
    assert record.status == "success", record.error_message
    assert (record.requests, record.retries, record.steps) == (4, 1, 3)
    assert (record.tokens_in, record.tokens_out) == provider.usage_totals()
    assert record.provider_seconds >= 0.5
    retries = [e for e in transcript(small_paths, record) if e["event"] == "retry"]
    assert retries == [{**retries[0], "status": 429, "wait": 0.5}]


def test_no_credit_is_a_provider_error(small_paths):
    script = [error(402, "Insufficient balance", code="insufficient_quota")]
    with ScriptedProvider(script, api_key=KEY) as provider:
        record = run(small_paths, provider)
    assert provider.mismatches == []
    assert record.status == "provider_error"
    assert "HTTP 402" in record.error_message and "Insufficient balance" in record.error_message
    assert (record.requests, record.retries, record.steps) == (1, 0, 0)
    assert record.score is None and record.wall_seconds < 30


def test_a_wrong_key_is_a_provider_error_that_never_shows_the_key(small_paths, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-wrong-key-123")
    with ScriptedProvider([], api_key=KEY) as provider:
        record = run(small_paths, provider)
    assert record.status == "provider_error" and "HTTP 401" in record.error_message
    run_dir = small_paths.runs_dir / record.run_id
    assert all(b"sk-wrong-key-123" not in p.read_bytes() for p in run_dir.rglob("*") if p.is_file())


def test_persistent_server_errors_give_up_after_the_retries(small_paths):
    script = [error(503, "overloaded", retry_after=0.1)] * 3
    with ScriptedProvider(
        script, api_key=KEY, then=error(503, "overloaded", retry_after=0.1)
    ) as provider:
        record = run(small_paths, provider, max_retries=2)
    assert record.status == "provider_error"
    assert "gave up after 2 retries" in record.error_message and "HTTP 503" in record.error_message
    assert (record.requests, record.retries) == (3, 2)


def test_malformed_tool_calls_are_explained_and_the_agent_goes_on(small_paths):
    script = [
        reply(tool_calls=[call("run", '{"command": "ls"')], usage=(100, 10)),
        reply(
            tool_calls=[call("delete_everything", {}), call("run", {"cmd": "ls"})],
            usage=(150, 12),
            expect={"last_message_role": "tool", "last_message_contains": "not valid JSON"},
        ),
        *conversation(loose_start=True),
    ]
    with ScriptedProvider(script, api_key=KEY) as provider:
        record = run(small_paths, provider)
    assert provider.mismatches == []
    assert record.status == "success", record.error_message
    malformed = [e for e in transcript(small_paths, record) if e["event"] == "malformed_tool_call"]
    assert [m["error"].split(";")[0] for m in malformed] == [
        "the arguments of run are not valid JSON (Expecting ',' delimiter: line 1 column 17 (char 16))",
        "there is no tool 'delete_everything'",
        "run needs the argument(s) command",
    ]
    assert (record.tokens_in, record.tokens_out) == provider.usage_totals()


def test_a_model_that_never_finishes_times_out(small_paths):
    forever = reply(tool_calls=[call("run", {"command": "sleep 1"})], usage=(10, 5))
    with ScriptedProvider([], api_key=KEY, then=forever) as provider:
        record = run(small_paths, provider, budget=6)
    assert record.status == "timeout"
    assert record.wall_seconds < 6 + 3
    assert record.steps >= 2 and record.requests == record.steps
    assert (record.tokens_in, record.tokens_out) == provider.usage_totals()


def test_the_budget_ending_during_a_model_call_is_a_timeout(small_paths):
    with ScriptedProvider([hang(60)], api_key=KEY) as provider:
        record = run(small_paths, provider, budget=4)
    assert record.status == "timeout"
    assert record.wall_seconds < 4 + 3
    assert (record.requests, record.steps, record.tokens_in) == (1, 0, 0)
    end = transcript(small_paths, record)[-1]
    assert end["event"] == "end" and "out of time" in end["reason"]


def test_the_budget_ending_during_a_tool_is_a_timeout(small_paths):
    script = [reply(tool_calls=[call("run", {"command": "sleep 600"})], usage=(10, 5))]
    # The command is stopped just before the budget ends; a last model call may still start.
    with ScriptedProvider(script, api_key=KEY, then=hang(60)) as provider:
        record = run(small_paths, provider, budget=5)
    assert provider.mismatches == []
    assert record.status == "timeout" and record.wall_seconds < 5 + 3


def test_an_invalid_submission_is_graded_as_one(small_paths):
    script = [
        reply(
            tool_calls=[call("write_file", {"path": "submission.csv", "content": "id,x\n1,2\n"})]
        ),
        reply(tool_calls=[call("finish", {"summary": "done"})]),
    ]
    with ScriptedProvider(script, api_key=KEY) as provider:
        record = run(small_paths, provider)
    assert provider.mismatches == []
    assert record.status == "invalid_submission"
    assert record.validation_code is not None and record.validation_message


def test_a_model_that_stops_using_tools_is_nudged_then_stopped(small_paths):
    script = [reply("I think I am done."), reply("Really."), reply("Yes.")]
    with ScriptedProvider(script, api_key=KEY) as provider:
        record = run(small_paths, provider)
    assert provider.mismatches == []
    assert record.status == "no_submission" and record.steps == 3
    assert provider.requests[1].body["messages"][-1]["role"] == "user"  # the nudge


def test_old_tool_outputs_are_elided_when_the_context_grows(small_paths):
    big = reply(
        tool_calls=[call("run", {"command": "python -c \"print('x' * 5000)\""})], usage=(1, 1)
    )
    script = [
        big,
        big,
        big,
        reply(tool_calls=[call("finish", {})], expect={"message_chars_at_most": 12_000}),
    ]
    with ScriptedProvider(script, api_key=KEY) as provider:
        record = run(small_paths, provider, context_chars=12_000)
    assert provider.mismatches == []
    assert record.status == "no_submission"
    assert ELIDED in json.dumps(provider.requests[-1].body["messages"])


def test_a_context_length_error_cuts_the_context_and_retries(small_paths):
    script = [
        error(
            400,
            "This model's maximum context length is 8192 tokens",
            code="context_length_exceeded",
        ),
        reply(tool_calls=[call("finish", {})]),
    ]
    with ScriptedProvider(script, api_key=KEY) as provider:
        record = run(small_paths, provider)
    assert provider.mismatches == []
    assert record.status == "no_submission" and record.requests == 2
    events = [e["event"] for e in transcript(small_paths, record)]
    assert "context_too_long" in events


def test_a_missing_key_stops_before_anything_runs(small_paths, monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    with ScriptedProvider([], api_key=KEY) as provider, pytest.raises(TmlbenchError) as err:
        run(small_paths, provider)
    assert KEY_ENV in str(err.value)
    assert provider.requests == []
    assert not any(small_paths.runs_dir.rglob("record.json"))


def test_fit_context_keeps_the_task_and_the_latest_exchange():
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "task"},
    ]
    for i in range(6):
        args = json.dumps({"path": f"f{i}.py", "content": "y" * 1000})
        messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "write_file", "arguments": args}}
        ]})  # fmt: skip
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "z" * 1000})
    _fit_context(messages, 5_000)
    assert messages[1]["content"] == "task"
    assert messages[-1]["content"] == "z" * 1000  # the newest result is kept whole
    assert messages[2]["tool_calls"][0]["function"]["arguments"] == json.dumps(
        {"path": "f0.py", "content": ELIDED}
    )
    assert messages[3]["content"] == ELIDED
    total = sum(len(m["content"]) for m in messages) + sum(
        len(m["tool_calls"][0]["function"]["arguments"]) for m in messages if "tool_calls" in m
    )
    assert total <= 5_000


def test_usage_flows_into_the_warehouse_the_marts_and_the_run_explorer(
    small_paths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    with ScriptedProvider(conversation(), api_key=KEY) as provider:
        record = run(small_paths, provider)
    assert record.status == "success", record.error_message
    warehouse = tmp_path / "wh.duckdb"
    con = connect(warehouse)
    try:
        apply_ddl(con)
        assert load_runs(con, small_paths.runs_dir).new == 1
    finally:
        con.close()
    build_marts(warehouse, dbt_vars={"bootstrap_replicates": 5}, artifacts_dir=tmp_path / "dbt")
    snapshot = tmp_path / "snapshot.duckdb"
    publish_snapshot(warehouse, snapshot)
    con = connect(snapshot, read_only=True)
    try:
        row = con.execute(
            "select tokens_in_total, tokens_out_total, cost_total_usd, requests_total, "
            "retries_total from marts.setting_costs where agent_id = 'llm-stub'"
        ).fetchone()
    finally:
        con.close()
    tokens_in, tokens_out = provider.usage_totals()
    assert row[:2] == (tokens_in, tokens_out) and row[3:] == (3, 0)
    assert row[2] == pytest.approx(expected_cost(provider), rel=1e-9)

    monkeypatch.setenv("TMLBENCH_SNAPSHOT", str(snapshot))
    page = Path(__file__).resolve().parents[1] / "app" / "app_pages" / "run_explorer.py"
    at = AppTest.from_file(str(page), default_timeout=30).run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.selectbox(key="run_id").value == record.run_id
    assert any(f"tokens in: {tokens_in:,}" in c.value for c in at.caption)
    messages = at.get("chat_message")
    assert len(messages) == 2 * 3  # three model replies, three tool results
    assert any("local_validation_score" in c.value for c in at.code)
    assert any("end: the model called finish" in i.value for i in at.info)
