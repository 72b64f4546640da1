"""The non-isolating backend refuses adversarial agents: there every attack would succeed."""

from __future__ import annotations

import pytest

from runner.attempts.attempt import run_attempt
from runner.errors import TmlbenchError
from runner.sandbox import get_sandbox
from tests.support.adversarial_arena import Arena

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(60)]


@pytest.mark.parametrize("script", ["exfiltrate.py", "forkbomb.py", "tamper.py"])
def test_process_backend_refuses_an_untrusted_agent_without_the_unsafe_flag(
    arena: Arena, script: str
):
    agent = arena.agent(script)
    assert not agent.trusted
    plan = arena.plan(agent, 10)
    with pytest.raises(TmlbenchError, match="unsafe-no-isolation"):
        run_attempt(plan, arena.context(get_sandbox("process")))
    assert not (arena.paths.runs_dir / plan.run_id).exists()  # refused before anything ran
    assert arena.sandbox.isolated  # the arena's own backends all isolate
    arena.assert_host_unchanged()
