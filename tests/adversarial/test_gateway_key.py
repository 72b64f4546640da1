"""A provider that reflects the key cannot hand it to the agent, on each isolating backend.

The stand-in CLI (tests/sandbox_agents/key_reflection_cli.py) calls its provider through
the gateway; the hostile upstream (tests/support/hostile_upstream.py) reflects the key the
gateway sends it in every form a reflecting provider produces: in headers, in a JSON body and
in server-sent events, written so that the gateway reads each reflection split at every byte
offset. The CLI keeps everything it got (stdout, the workspace); no file of the run folder may
hold the key in any of those forms. One attempt per backend.
"""

from __future__ import annotations

import json

import pytest

from runner.config import REPO_ROOT
from runner.sandbox import Sandbox
from runner.specs import AgentSpec
from tests.support.attempts import attempt
from tests.support.hostile_upstream import (
    HostileUpstream,
    Received,
    Scripted,
    reflections,
    split_everywhere,
)

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(180)]

TASK = "bank-customer-churn-ict-u-ai"
AGENTS = REPO_ROOT / "tests" / "sandbox_agents"
SECRET_ENV = "TMLBENCH_TEST_REFLECTED_KEY"
KEY = "sk-reflected/KEY_0123-abc"


def reflecting(request: Received) -> Scripted:
    """A chat reply (JSON, or events if asked for a stream) with the key the request carried
    in every reflected form, in its headers and split at every offset of its body."""
    forms = [form.text for form in reflections(request.key)]
    headers = [
        ("x-request-id", request.key),
        ("x-ratelimit-remaining-tokens", forms[-1]),
        ("X-Echo-Authorization", f"Bearer {request.key}"),
    ]
    if json.loads(request.body).get("stream"):
        segment = "".join(
            "data: "
            + json.dumps({"choices": [{"index": 0, "delta": {"content": f"{f} "}}]})
            + "\n\n"
            for f in forms
        ).encode()
        tail = b'data: {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}\n\ndata: [DONE]\n\n'
        _, pieces = split_everywhere(b"", segment, tail)
        headers.append(("Content-Type", "text/event-stream"))
        return Scripted(headers=headers, pieces=pieces, framing="chunked")
    head = b'{"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "'
    tail = b'"}}], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}'
    _, pieces = split_everywhere(head, " ".join(forms).encode(), tail)
    headers.append(("Content-Type", "application/json"))
    return Scripted(headers=headers, pieces=pieces)


def test_a_key_the_provider_reflects_reaches_no_file_of_the_run(
    small_paths, monkeypatch: pytest.MonkeyPatch, backend: Sandbox
):
    monkeypatch.setenv(SECRET_ENV, KEY)
    with HostileUpstream(reflecting) as upstream:
        agent = AgentSpec.model_validate(
            {
                "id": "key-reflection-stub",
                "kind": "command",
                "title": "stand-in CLI whose provider reflects the key",
                "harness": "stub-cli",
                "model": {"provider": "stub", "model_id": "m"},
                "command": ["{python}", "{agent_dir}/key_reflection_cli.py", "{model}"],
                "gateway": {
                    "protocol": "openai-chat",
                    "base_url": upstream.url + "/v1",
                    "api_key_env": SECRET_ENV,
                },
                "env": {"PROVIDER_BASE_URL": "{gateway_url}", "PROVIDER_KEY": "{gateway_key}"},
            }
        )
        record = attempt(small_paths, agent, TASK, backend=backend.name, code_dir=AGENTS)
    run_dir = small_paths.runs_dir / record.run_id
    stdout = (run_dir / "stdout.log").read_text()
    stderr = (run_dir / "stderr.log").read_text()
    assert record.status == "success", (record.error_message, stdout, stderr)
    assert [r.key for r in upstream.received] == [KEY, KEY]  # the provider had the real key
    assert record.sandbox_backend == backend.name
    assert (record.requests, record.steps, record.tokens_in) == (2, 2, 6)
    # The CLI got the replies, the reflections starred out, and kept them where it could.
    assert f"x-request-id: {'*' * len(KEY)}" in stdout.lower()
    assert "x-echo-authorization" not in stdout.lower()
    assert stdout.count("*" * len(KEY)) > 2 * len(reflections(KEY))
    forms = [form.text.encode() for form in reflections(KEY)]
    files = [path for path in run_dir.rglob("*") if path.is_file() and not path.is_symlink()]
    assert any(path.name == "reflected.txt" for path in files)  # the workspace copy
    for path in files:
        data = path.read_bytes()
        for form in forms:
            assert form not in data, (path.relative_to(run_dir), form)
