"""Fixtures of the adversarial suite: each isolating backend in turn, and an arena on it
(tests/support/adversarial_arena.py)."""

from __future__ import annotations

import pytest

from runner.config import Paths
from runner.errors import HarnessError
from runner.sandbox import Sandbox, get_sandbox
from runner.sandbox import cgroups as cg
from tests.support.adversarial_arena import ISOLATING_BACKENDS, Arena


@pytest.fixture(params=ISOLATING_BACKENDS)
def backend(request: pytest.FixtureRequest) -> Sandbox:
    """Each isolating backend in turn. Unusable here is a failure, never a skip."""
    ok, why = cg.available()
    if not ok:
        pytest.fail(f"the caps under attack need cgroups (run as root): {why}")
    try:
        return get_sandbox(request.param)
    except HarnessError as exc:
        pytest.fail(f"backend {request.param!r} must work for the adversarial suite: {exc}")


@pytest.fixture
def arena(small_paths: Paths, backend: Sandbox, monkeypatch: pytest.MonkeyPatch) -> Arena:
    return Arena(small_paths, backend, monkeypatch)
