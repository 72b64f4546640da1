"""The built-in llm agent through real bwrap attempts, against a scripted provider on loopback.

Nothing here calls a real provider: ``runner.agents.scripted_provider`` plays recorded conversations
with the OpenAI chat-completions protocol, and the attempts run in the real sandbox and are
graded on the private answers like any other.
"""

from __future__ import annotations

import contextlib
import copy
import http.server
import json
import shutil
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from runner.agents import drivers
from runner.agents.llm.conversation import ELIDED, fit_context
from runner.agents.llm.tools import (
    FRAME_SLACK,
    ProtocolViolation,
    ToolHostChannel,
    ToolHostGone,
    frame_cap,
)
from runner.agents.scripted_provider import (
    ScriptedProvider,
    call,
    error,
    hang,
    load_conversation,
    reply,
)
from runner.attempts.records import RunRecord
from runner.config import REPO_ROOT, Paths
from runner.errors import TmlbenchError
from runner.tasks.metrics import get_metric
from tests.support.attempts import attempt
from tests.support.llm_attempts import KEY, KEY_ENV, PRICE_IN, PRICE_OUT, TASK, llm_agent, run
from tests.support.prepared_tasks import shared_paths
from tools.dbt_in_process import run_in_process
from tools.dbt_warehouse import SCENARIO_EXCLUDE, SCENARIO_VARS, count_every_setting
from warehouse.db import apply_ddl, connect
from warehouse.loader import load_runs
from warehouse.marts import build_marts
from warehouse.snapshot import publish_snapshot

# xdist_group: its module fixtures (the recorded conversation's attempt) run once, on one worker, not on each
pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(180), pytest.mark.xdist_group("llm_agent")]

CONVERSATION = REPO_ROOT / "tests" / "conversations" / "valid_submission.json"


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


@dataclass
class Recorded:
    """The recorded conversation's one attempt (what it left), read by two tests."""

    paths: Paths
    record: RunRecord
    provider: ScriptedProvider


@pytest.fixture(scope="module")
def recorded(small_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """The recorded conversation, after a first call that peeks at what the sandbox shows, run
    once: the scored submission's test and the warehouse's (marts, run explorer) read it."""
    paths = shared_paths(small_data, tmp_path_factory.mktemp("recorded") / "runs")
    peek = reply(
        tool_calls=[call("run", {"command": "env; cat /proc/1/environ; ls /run/tmlbench/tools"})]
    )
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv(KEY_ENV, KEY)
        with ScriptedProvider([peek, *conversation(loose_start=True)], api_key=KEY) as provider:
            record = run(paths, provider)
    return Recorded(paths, record, provider)


def test_a_recorded_conversation_reaches_a_scored_submission(recorded: Recorded):
    record, provider = recorded.record, recorded.provider
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
    events = transcript(recorded.paths, record)
    assert [e["event"] for e in events][:2] == ["start", "request"]
    assert events[-1] == {**events[-1], "event": "end", "reason": "the model called finish"}
    tools = [e for e in events if e["event"] == "tool"]
    assert [t["name"] for t in tools] == ["run", "write_file", "run", "finish"]
    # The key stays in the harness: not in the sandbox's environment, nor anywhere on disk.
    assert KEY_ENV not in tools[0]["result"] and KEY not in tools[0]["result"]
    assert "tools.sock" in tools[0]["result"]
    run_dir = recorded.paths.runs_dir / record.run_id
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
    assert (record.provider_faults, record.interrupted_calls) == (1, 0)
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


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_text_that_is_not_unicode_gets_tool_errors_and_the_attempt_goes_on(small_paths, backend):
    hostile = [
        call("run", {"command": "echo \ud800"}),  # sent escaped, as JSON allows
        call("write_file", {"path": "notes\ud800.txt", "content": "x"}),
        call("write_file", {"path": "notes.txt", "content": "\0\udfff"}),
        call("read_file", '{"path": "\ud800\\u0000"}'),  # a surrogate itself, a NUL escaped
        call("run", {"command": "echo " + "x" * 300_000}),  # past the kernel's argument cap
    ]
    script = [reply(tool_calls=hostile, usage=(100, 10)), *conversation(loose_start=True)]
    with ScriptedProvider(script, api_key=KEY) as provider:
        record = run(small_paths, provider, backend=backend)
    assert provider.mismatches == []
    assert record.status == "success", record.error_message
    results = tool_results(small_paths, record)
    assert [r.split(":")[0] for r in results[:5]] == ["Error"] * 5, results[:5]
    assert "lone surrogate" in results[0] and "lone surrogate" in results[2]
    assert "OSError" in results[4] or "Argument list too long" in results[4]
    workspace = small_paths.runs_dir / record.run_id / "workspace"
    assert not (workspace / "notes.txt").exists()  # refused before the file was touched
    stdout = (small_paths.runs_dir / record.run_id / "stdout.log").read_text()
    assert "$ echo \\ud800" in stdout  # the tool host logged the command, escaped


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
    assert (record.interrupted_calls, record.provider_faults) == (1, 0)  # the budget's cut
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
    fit_context(messages, 5_000)
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


#: What the test below reads, and what it is built from (23 of the 60 models): the costs mart,
#: and the display models the run explorer's page reads (app/queries.py: the suite picker, the
#: runs, one run's record, its twins; has_runs counts reliability_display).
READ_BELOW = (
    "+setting_costs +filter_options +runs_display +submission_twins_display +reliability_display"
)


def test_usage_flows_into_the_warehouse_the_marts_and_the_run_explorer(
    recorded: Recorded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    record, provider = recorded.record, recorded.provider
    assert record.status == "success", record.error_message
    warehouse = tmp_path / "warehouse.duckdb"
    con = connect(warehouse)
    try:
        apply_ddl(con)
        assert load_runs(con, recorded.paths.runs_dir).new == 1
    finally:
        con.close()
    count_every_setting(warehouse)  # a suite of the runs folder, listing the attempt's setting
    build_marts(
        warehouse,
        select=READ_BELOW,
        dbt_vars=SCENARIO_VARS,
        artifacts_dir=tmp_path / "dbt",
        exclude=SCENARIO_EXCLUDE,
        run=run_in_process,
    )
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
    assert row[:2] == (tokens_in, tokens_out) and row[3:] == (4, 0)
    assert row[2] == pytest.approx(expected_cost(provider), rel=1e-9)

    monkeypatch.setenv("TMLBENCH_SNAPSHOT", str(snapshot))
    page = REPO_ROOT / "app" / "app_pages" / "run_explorer.py"
    at = AppTest.from_file(str(page), default_timeout=30).run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.selectbox(key="run_id").value == record.run_id
    assert any(f"tokens in: {tokens_in:,}" in c.value for c in at.caption)
    messages = at.get("chat_message")
    assert len(messages) == 2 * 4  # four model replies, four tool results
    assert any("local_validation_score" in c.value for c in at.code)
    # the reason is the session's words, shown literally (as a code span)
    assert any("end: `" in i.value and "the model called finish" in i.value for i in at.info)


# --------------------------------------------------------------------------- the tool host protocol
#
# The sandbox is the agent's, the tool host with it: whatever arrives on the harness's end of
# the connection, the attempt is the agent's runtime_error with a message saying what broke,
# never a harness_error, and the harness reads at most its frame cap.

TAKEN_OVER = REPO_ROOT / "tests" / "adversarial" / "agents" / "toolhost_taken_over.py"
DEFAULT_CAP = frame_cap(8_000, 50_000)


class Peer:
    """The sandbox's end of a socketpair, answering each request with scripted bytes."""

    def __init__(self, *replies: bytes, cap: int = 1000, hang_up: bool = False):
        self.ours, self.theirs = socket.socketpair()
        self.channel = ToolHostChannel(self.ours, cap)
        self.replies = list(replies)
        self.hang_up = hang_up  # close its end after the last reply
        self.received: list[dict] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        stream = self.theirs.makefile("rb")
        with contextlib.suppress(OSError):
            for reply in self.replies:
                line = stream.readline()
                if not line:
                    return
                self.received.append(json.loads(line))
                self.theirs.sendall(reply)
            if self.hang_up:
                if not self.replies:  # hang up on the first request
                    stream.readline()
                self.theirs.shutdown(socket.SHUT_WR)

    def request(self, op: str = "run", timeout: float = 5.0) -> dict:
        return self.channel.request({"op": op}, timeout)

    def close(self) -> None:
        self.ours.close()
        self.thread.join(5)
        self.theirs.close()


def line(**fields: object) -> bytes:
    return json.dumps(fields).encode() + b"\n"


RUN_OK = {"exit_code": 0, "timed_out": False, "output": "hi", "seconds": 0.5}


def test_frame_cap_is_the_largest_reply_of_an_honest_tool_host(tmp_path, monkeypatch):
    """Worst cases of the real tool host's code: every output byte escaped as \\uXXXX."""
    monkeypatch.syspath_prepend(str(REPO_ROOT / "runner" / "agents" / "llm" / "toolhost"))
    import toolhost

    assert DEFAULT_CAP == 6 * 50_000 + 32 * 1024 == 332_768
    cap = frame_cap(8_000, 50_000)
    worst = []
    for byte in (b"\x01", b"\xff", "\U0001f600".encode()):
        out = tmp_path / "out"
        out.write_bytes(byte * 200_000)  # far more than max_chars: head, marker and tail
        with out.open("rb") as fh:
            text = toolhost._head_and_tail(fh, out.stat().st_size, 8_000)
        run = {"exit_code": -9, "timed_out": True, "output": text, "output_bytes": 10**12}
        worst.append(json.dumps({"id": 10**9, **run, "seconds": 12345.678}).encode())
        read = toolhost.read_file(str(out), 50_000)
        worst.append(json.dumps({"id": 10**9, **read}).encode())
    # an error naming a path of nearly PATH_MAX bytes, each escaped as 6: the slack's case
    deep = tmp_path.joinpath(*["\x01" * 250] * ((4000 - len(str(tmp_path))) // 251))
    deep.mkdir(parents=True)
    (deep / "bin").write_bytes(b"\x00")
    error = toolhost.read_file(str(deep / "bin"), 50_000)
    assert "binary file" in error["error"] and len(error["error"]) > 3700
    worst.append(json.dumps({"id": 10**9, **error}).encode())
    assert len(worst[-1]) <= FRAME_SLACK  # fits even with the smallest max_chars and max_bytes
    assert max(len(w) for w in worst) <= cap
    assert len(worst[1]) > 0.9 * 6 * 50_000  # the read of \x01 is close to the bound
    for frame in worst[:-1]:
        peer = Peer(frame + b"\n", cap=cap)
        op = "run" if b'"output"' in frame else "read"
        peer.channel._last_id = 10**9 - 1
        assert peer.request(op)
        peer.close()


def test_a_reply_is_checked_and_the_request_carries_its_id():
    peer = Peer(line(id=1, **RUN_OK), line(id=2, bytes=3), line(id=3, content="x", truncated=True))
    assert peer.request("run") == RUN_OK
    assert peer.request("write") == {"bytes": 3}
    assert peer.request("read") == {"content": "x", "truncated": True}
    assert [r["id"] for r in peer.received] == [1, 2, 3]
    peer.close()


def test_an_error_reply_is_fine_for_any_operation():
    peer = Peer(line(id=1, error="PermissionError: denied"))
    assert peer.request("write") == {"error": "PermissionError: denied"}
    peer.close()


@pytest.mark.parametrize(
    ("frame", "words"),
    [
        (b"\x00\xff garbage\n", ["is not UTF-8", r"b'\x00\xff garbage'"]),
        (b"not json at all\n", ["is not JSON (Expecting value", "b'not json at all'"]),
        (b"[1, 2]\n", ["is a JSON list, not an object"]),
        (b'"just a string"\n', ["is a JSON str, not an object"]),
        (b"[" * 100_000 + b"\n", ["is not JSON"]),  # RecursionError
        (
            line(id=1, **{**RUN_OK, "exit_code": "0"}),
            ["'exit_code' = \"0\", not an integer or null"],
        ),
        (
            line(id=1, **{**RUN_OK, "exit_code": True}),
            ["'exit_code' = true, not an integer or null"],
        ),
        (line(id=1, **{**RUN_OK, "timed_out": 0}), ["'timed_out' = 0, not true or false"]),
        (line(id=1, **{**RUN_OK, "output": None}), ["'output' = null, not a string"]),
        (line(id=1, **{**RUN_OK, "seconds": "1"}), ["'seconds'"]),
        (line(id=1, **{**RUN_OK, "seconds": -1}), ["negative 'seconds'"]),
        (
            b'{"id": 1, "exit_code": 0, "timed_out": false, "output": "", "seconds": NaN}\n',
            ["NaN is not JSON"],
        ),
        (
            b'{"id": 1, "exit_code": 0, "timed_out": false, "output": "", "seconds": 1e999}\n',
            ["'seconds' = Infinity, not an integer or a number"],
        ),
        (
            b'{"id": 1, "exit_code": ' + b"9" * 5000 + b', "timed_out": false}\n',
            ["is not JSON", "digits"],
        ),
        (line(id=1, exit_code=0, timed_out=False, output=""), ["lacks the field 'seconds'"]),
        (line(id=1, **RUN_OK, shell="/bin/sh"), ["unexpected field(s) 'shell'"]),
        (line(**RUN_OK), ["has no 'id'"]),
        (line(id=7, **RUN_OK), ["a reply to request 7 came while request 1 (run) was waiting"]),
        (line(id="1", **RUN_OK), ["a reply to nothing"]),
        (line(id=1, error=["x"]), ["'error' = [\"x\"], not a string"]),
        (line(id=1, error="x", output="y"), ["unexpected field(s) 'output'"]),
    ],
)
def test_a_reply_breaking_the_schema_is_a_protocol_violation(frame, words):
    peer = Peer(frame, cap=2_000_000)
    with pytest.raises(ProtocolViolation) as info:
        peer.request("run")
    for word in words:
        assert word in str(info.value), (word, str(info.value))
    assert len(str(info.value)) < 400
    peer.close()


def test_the_cap_is_exact_and_nothing_more_is_buffered():
    cap = 1000
    body = b'{"id": 1, "bytes": 5}'
    exact = body + b" " * (cap - len(body)) + b"\n"  # JSON may carry spaces: cap bytes in all
    peer = Peer(exact, body + b" " * (cap + 1 - len(body)) + b"\n", cap=cap)
    assert peer.request("write") == {"bytes": 5}
    with pytest.raises(ProtocolViolation, match="longer than the 1,000-byte cap"):
        peer.request("write")
    assert len(peer.channel._buf) == cap + 1
    peer.close()


def test_a_flood_stops_at_the_cap_and_breaks_the_channel():
    peer = Peer(b"x" * (8 << 20), line(id=2, bytes=1), cap=4096)
    with pytest.raises(ProtocolViolation, match=r"4,096-byte cap.*b'xxxx"):
        peer.request("write")
    assert len(peer.channel._buf) <= 4097
    with pytest.raises(ProtocolViolation):  # broken: nothing is sent any more
        peer.request("write")
    assert len(peer.received) == 1
    peer.close()


def test_two_replies_to_one_request_or_an_unasked_one_are_violations():
    peer = Peer(line(id=1, bytes=1) + line(id=1, bytes=1))
    with pytest.raises(ProtocolViolation, match="more than one reply to write request 1"):
        peer.request("write")
    peer.close()

    peer = Peer(line(id=1, bytes=1), line(id=2, bytes=1))
    assert peer.request("write") == {"bytes": 1}
    peer.theirs.sendall(b"surprise\n")
    time.sleep(0.05)
    with pytest.raises(ProtocolViolation, match="bytes nobody asked for: b'surprise"):
        peer.request("write")
    assert len(peer.received) == 1  # refused before the request went out
    peer.close()


def test_a_closed_connection_or_a_silent_tool_host_is_gone_not_a_violation():
    peer = Peer(hang_up=True)
    with pytest.raises(ToolHostGone, match="closed the connection"):
        peer.request()
    peer.close()
    peer = Peer(b'{"id": 1, "by', hang_up=True)
    with pytest.raises(ToolHostGone, match="in the middle of a reply"):
        peer.request("write")
    peer.close()
    ours, theirs = socket.socketpair()
    with pytest.raises(ToolHostGone, match="no reply from the tool host within 0 s"):
        ToolHostChannel(ours, 1000).request({"op": "run"}, 0.2)
    ours.close()
    theirs.close()


# -- the model's own commands against the tool host, in the real sandbox ----------------------

ATTACK = r'''
"""What a model's command can try against the harness's connection to the tool host."""
import ctypes, os, signal, socket, stat, sys


def tool_host() -> tuple[int, str]:
    """The nearest ancestor running toolhost.py (python toolhost.py SOCKET)."""
    pid = os.getppid()
    while pid > 1:
        argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        if len(argv) > 2 and argv[1].endswith(b"toolhost.py"):
            return pid, argv[2].decode()
        pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    raise SystemExit("no tool host among my ancestors")


def pose(path: str) -> None:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
        s.sendall(b"garbage\n" + b"x" * (1 << 20))
        print("connected and sent", flush=True)
    except OSError as exc:
        print("connect refused:", type(exc).__name__, flush=True)


pid, path = tool_host()
if sys.argv[1] == "connect":  # a second connection, posing as the tool host
    pose(path)
elif sys.argv[1] == "steal":  # take the tool host's own connection
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = os.pidfd_open(pid)
    for n in range(3, 32):  # its fd list may be unreadable: try them all
        fd = libc.syscall(438, pidfd, n, 0)  # pidfd_getfd
        if fd >= 0 and stat.S_ISSOCK(os.fstat(fd).st_mode):
            print("stolen", flush=True)
            os.write(fd, b"\x00\xff garbage\n")
            break
    else:
        print("steal refused: errno", ctypes.get_errno(), flush=True)
elif sys.argv[1] == "mem":  # rewrite the tool host's memory, as its own uid may
    for how in ("rb", "r+b"):
        try:
            open(f"/proc/{pid}/mem", how).close()
            print("mem opened", how, flush=True)
        except OSError as exc:
            print("mem refused", how, exc.errno, flush=True)
elif sys.argv[1] == "kill":  # kill the tool host, then pose as it
    os.kill(pid, signal.SIGKILL)
    pose(path)
'''


def attack(mode: str) -> list[dict]:
    return [
        reply(tool_calls=[call("write_file", {"path": "attack.py", "content": ATTACK})]),
        reply(tool_calls=[call("run", {"command": f"python attack.py {mode}"})]),
    ]


ISOLATING = ["bwrap", "docker"]  # a model's commands attack from inside either sandbox


def tool_results(paths, record: RunRecord) -> list[str]:
    return [e["result"] for e in transcript(paths, record) if e["event"] == "tool"]


@pytest.mark.parametrize("backend", ISOLATING)
def test_a_command_posing_as_a_second_tool_host_is_refused(small_paths, backend):
    with ScriptedProvider([*attack("connect"), *conversation(loose_start=True)], api_key=KEY) as p:
        record = run(small_paths, p, backend=backend)
    assert p.mismatches == []
    assert record.status == "success", (record.error_message, record.validation_message)
    assert "connect refused: ConnectionRefusedError" in tool_results(small_paths, record)[1]


@pytest.mark.parametrize("backend", ISOLATING)
def test_a_command_stealing_the_tool_hosts_connection_never_confuses_the_harness(
    small_paths, backend
):
    with ScriptedProvider([*attack("steal"), *conversation(loose_start=True)], api_key=KEY) as p:
        record = run(small_paths, p, backend=backend)
    stdout = (small_paths.runs_dir / record.run_id / "stdout.log").read_text()
    if "stolen" in stdout:  # a sandbox that allows pidfd_getfd: the garbage is the agent's
        assert_protocol_violation(record, "is not UTF-8", r"b'\x00\xff garbage'")
    else:  # the seccomp filter denies pidfd_getfd (EPERM): the attempt goes on
        assert "steal refused: errno 1" in tool_results(small_paths, record)[1]
        assert record.status == "success", (record.error_message, record.validation_message)


@pytest.mark.parametrize("backend", ISOLATING)
def test_a_command_cannot_open_the_tool_hosts_memory(small_paths, backend):
    """Same uid, no Yama: only the tool host being non-dumpable keeps /proc/PID/mem shut."""
    with ScriptedProvider([*attack("mem"), *conversation(loose_start=True)], api_key=KEY) as p:
        record = run(small_paths, p, backend=backend)
    said = tool_results(small_paths, record)[1]
    assert "mem refused rb" in said and "mem refused r+b" in said, said
    assert "mem opened" not in said
    assert record.status == "success", (record.error_message, record.validation_message)


@pytest.mark.parametrize("backend", ISOLATING)
def test_a_command_killing_the_tool_host_ends_the_attempt_as_a_runtime_error(small_paths, backend):
    with ScriptedProvider(attack("kill"), api_key=KEY) as provider:
        record = run(small_paths, provider, backend=backend)
    assert record.status == "runtime_error", (record.status, record.error_message)
    assert "exited with code" in record.error_message and record.wall_seconds < 30
    end = transcript(small_paths, record)[-1]
    assert end["event"] == "end" and end["reason"].startswith("sandbox ended"), end


# -- a tool host taken over by the agent, in the real sandbox ---------------------------------


@pytest.fixture
def taken_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The llm agent's tool host replaced by TAKEN_OVER (the real one beside it as honest.py)."""
    folder = tmp_path / "toolhost"
    folder.mkdir()
    shutil.copyfile(drivers.TOOLHOST_DIR / "toolhost.py", folder / "honest.py")
    shutil.copyfile(TAKEN_OVER, folder / "toolhost.py")
    monkeypatch.setattr(drivers, "TOOLHOST_DIR", folder)
    return folder


def hostile(mode: str, after: int = 0) -> list[dict]:
    steps = [reply(tool_calls=[call("run", {"command": "echo honest so far"})])]
    steps.append(reply(tool_calls=[call("run", {"command": f"hostile {mode}"})]))
    return steps + [reply(tool_calls=[call("run", {"command": "echo after"})])] * after


def assert_protocol_violation(record: RunRecord, *words: str) -> None:
    assert record.status == "runtime_error", (record.status, record.error_message)
    message = record.error_message or ""
    assert message.startswith("the sandbox's tool host broke the protocol: "), message
    for word in words:
        assert word in message, (word, message)
    assert "Traceback" not in message and len(message) < 600


@pytest.mark.parametrize(
    ("mode", "words"),
    [
        ("garbage", ["its reply to run request 2 is not UTF-8", r"b'\x00\xff this is not JSON"]),
        ("shape", ["its reply to run request 2 has 'exit_code' = \"zero\", not an integer"]),
        ("noid", ["its reply to run request 2 has no 'id'"]),
        ("nan", ["its reply to run request 2 is not JSON (NaN is not JSON)"]),
        ("deep", ["its reply to run request 2 is not JSON"]),
    ],
)
@pytest.mark.parametrize("backend", ISOLATING)
def test_a_taken_over_tool_host_is_the_agents_runtime_error(
    small_paths, taken_over, mode, words, backend
):
    with ScriptedProvider(hostile(mode), api_key=KEY) as provider:
        record = run(small_paths, provider, budget=60, backend=backend)
    assert provider.mismatches == []
    assert_protocol_violation(record, *words)
    assert record.wall_seconds < 30  # the tool host exits once the harness hangs up
    events = transcript(small_paths, record)
    assert [e["event"] for e in events][-2:] == ["protocol_violation", "end"]
    assert "honest so far" in tool_results(small_paths, record)[0]


def test_two_replies_to_one_command_are_a_protocol_violation(small_paths, taken_over):
    with ScriptedProvider(hostile("twice", after=1), api_key=KEY) as provider:
        record = run(small_paths, provider, budget=60)
    assert_protocol_violation(record)
    message = record.error_message
    assert "more than one reply to run request 2" in message or "nobody asked for" in message


@pytest.mark.parametrize("backend", ISOLATING)
def test_a_1_gib_line_stops_at_the_cap_while_a_benign_attempt_beside_succeeds(
    small_paths, taken_over, backend
):
    """The harness reads at most its frame cap of the line; a parallel attempt is unharmed."""
    get_metric("auc").score([0, 1], [0.2, 0.8])  # the grader's lazy imports, before measuring
    before = peak_rss()
    benign: dict[str, RunRecord] = {}

    def run_benign() -> None:  # the taken-over tool host serves it honestly
        with ScriptedProvider(conversation(), api_key=KEY) as provider:
            agent = llm_agent(provider).model_copy(update={"id": "llm-benign"})
            benign["record"] = attempt(small_paths, agent, TASK, 120, backend=backend)

    beside = threading.Thread(target=run_benign)
    beside.start()
    with ScriptedProvider(hostile("huge"), api_key=KEY) as provider:
        record = run(small_paths, provider, budget=60, backend=backend)
    beside.join(timeout=150)
    assert_protocol_violation(record, f"longer than the {DEFAULT_CAP:,}-byte cap", "b'xxxxxxxx")
    assert benign["record"].status == "success", benign["record"].error_message
    grown = peak_rss() - before
    assert grown < 200 * 1024**2, f"the harness's peak RSS grew by {grown / 1024**2:.0f} MiB"
    stdout = (small_paths.runs_dir / record.run_id / "stdout.log").read_text()
    assert "the harness hung up: BrokenPipeError" in stdout  # long before the 1 GiB was out


def peak_rss() -> int:
    for row in Path("/proc/self/status").read_text().splitlines():
        if row.startswith("VmHWM:"):
            return int(row.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/self/status")


class MalformedProvider(http.server.ThreadingHTTPServer):
    """Answers every chat completion 200, complete, with a reply whose tool_calls is not a list."""

    model = "malformed-model"

    def __init__(self):
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                message = {"role": "assistant", "content": "x", "tool_calls": "not a list"}
                choice = {"message": message, "finish_reason": "stop"}
                body = json.dumps({"choices": [choice], "usage": {}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server_address[1]}/v1"


def test_a_malformed_provider_reply_is_a_provider_error(small_paths):
    with MalformedProvider() as provider:
        threading.Thread(target=provider.serve_forever, daemon=True).start()
        record = run(small_paths, provider)  # type: ignore[arg-type]
        provider.shutdown()
    assert record.status == "provider_error", (record.status, record.error_message)
    assert record.error_message == (
        "the provider's reply is malformed: the message's tool_calls is not a list"
    )
