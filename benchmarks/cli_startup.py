"""How long an agent CLI waits before its first model call, and how much of that is tmlbench.

    uv run python benchmarks/cli_startup.py [--runs 3] [--agents codex-qwen3-coder-480b ...]

Each attempt runs in the bwrap sandbox against a scripted provider on loopback that answers
"done" at once; the time is taken from the moment the harness is asked to run the attempt to
the moment the provider receives the first model request.

* ``curl`` (the harness's own share): a stand-in CLI that is nothing but ``curl`` POSTing one
  chat completion to ``{gateway_url}``, minus the same ``curl`` run directly on the host
  against the provider. What remains is what tmlbench adds before a CLI's own start-up:
  workspace, proxy and gateway, bwrap, the in-sandbox forwarder, the gateway hop.
* every installed CLI template: attempt start → first model request (the CLI's start-up
  included).

Target (issue 11): tmlbench adds at most 1 s before the CLI's own start-up.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from machine import describe_machine  # benchmarks/machine.py

from runner.agents.check import point_at
from runner.agents.installs import find_installed
from runner.agents.scripted_provider import ScriptedProvider, repeat, reply
from runner.attempts.attempt import AttemptContext, AttemptPlan, run_attempt
from runner.config import REPO_ROOT
from runner.sandbox import get_sandbox
from runner.specs import AgentSpec
from runner.specs.registry import list_agents, load_task, task_spec_sha256
from runner.tasks.preparation import prepare_twin

TASK = "bank-customer-churn-ict-u-ai"
KEY_ENV = "TMLBENCH_BENCH_PROVIDER_KEY"
KEY = "sk-bench-0123456789abcdef"
CURL = [
    "curl", "-s", "-o", "/dev/null", "-H", "Content-Type: application/json",
    "-H", "Authorization: Bearer {gateway_key}",
    "-d", '{"model": "m", "messages": [{"role": "user", "content": "hi"}]}',
    "{gateway_url}/chat/completions",
]  # fmt: skip
CURL_AGENT = AgentSpec.model_validate(
    {
        "id": "curl-cli",
        "kind": "command",
        "title": "curl as a CLI",
        "harness": "curl",
        "model": {"model_id": "m"},
        "gateway": {"protocol": "openai-chat", "base_url": "http://127.0.0.1:1/v1"},
        "command": CURL,
    }
)


class FirstRequest:
    """A script step that notes when the first request arrived, then answers "done"."""

    def __init__(self) -> None:
        self.at: float | None = None

    def __call__(self, _request) -> dict:
        if self.at is None:
            self.at = time.monotonic()
        return reply("done", usage=(10, 1))


def time_to_first_request(agent: AgentSpec, work: Path, index: int, budget: int) -> float | None:
    task = load_task(REPO_ROOT / "tasks", TASK)
    prepared = prepare_twin(task, REPO_ROOT / "tasks", work / "data", rows=500)
    first = FirstRequest()
    os.environ[KEY_ENV] = KEY
    model = agent.model.model_id or "m"
    with ScriptedProvider([repeat(first)], api_key=KEY, model=model, any_model=True) as provider:
        ctx = AttemptContext(
            prepared=prepared,
            runs_dir=work / "runs",
            sandbox=get_sandbox("bwrap"),
            agent_code_dir=None,
            task_spec_sha256=task_spec_sha256(REPO_ROOT / "tasks", TASK),
        )
        plan = AttemptPlan(point_at(agent, provider.base_url, KEY_ENV), task, budget, index)
        started = time.monotonic()
        run_attempt(plan, ctx)
    return None if first.at is None else first.at - started


def time_direct_curl(runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        first = FirstRequest()
        with ScriptedProvider([repeat(first)], api_key=KEY, model="m") as provider:
            argv = [
                part.replace("{gateway_key}", KEY).replace("{gateway_url}", provider.base_url)
                for part in CURL
            ]
            started = time.monotonic()
            subprocess.run(argv, check=True)
            out.append(first.at - started)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--agents", nargs="*", help="agent ids (default: one per CLI)")
    args = parser.parse_args()
    print(describe_machine())
    clis = [a for a in list_agents(REPO_ROOT / "agents").specs if a.kind == "command" and a.cli]
    one_per_cli = {a.harness: a for a in reversed(clis)}
    chosen = [a for a in clis if a.id in args.agents] if args.agents else one_per_cli.values()
    with tempfile.TemporaryDirectory(prefix="tmlbench-cli-startup-") as tmp:
        work = Path(tmp)
        direct = time_direct_curl(args.runs * 3)
        via = [time_to_first_request(CURL_AGENT, work, i, 30) for i in range(args.runs * 3)]
        added = statistics.median(v for v in via if v is not None) - statistics.median(direct)
        print(
            f"curl directly: median {statistics.median(direct) * 1000:.0f} ms; in tmlbench: "
            f"median {statistics.median(v for v in via if v is not None) * 1000:.0f} ms "
            f"-> tmlbench adds {added * 1000:.0f} ms (target <= 1000 ms)"
        )
        for agent in chosen:
            if find_installed(agent.cli) is None:
                print(f"{agent.id}: CLI not installed (tmlbench agents install {agent.id})")
                continue
            times = [time_to_first_request(agent, work, i, 120) for i in range(args.runs)]
            shown = ", ".join("none" if t is None else f"{t:.2f}" for t in times)
            print(f"{agent.harness:<14} attempt start -> first model request: {shown} s")


if __name__ == "__main__":
    main()
