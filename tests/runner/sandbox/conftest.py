"""Fixtures of the sandbox backends' tests."""

from __future__ import annotations

import pytest

from runner.sandbox import DockerSandbox, docker_problem, get_sandbox


@pytest.fixture(scope="module")
def docker() -> DockerSandbox:
    """The docker backend; its tests fail (never skip) when the engine or image is missing."""
    problem = docker_problem()
    if problem:
        pytest.fail(f"the docker backend is required for these tests: {problem}")
    sb = get_sandbox("docker")
    assert isinstance(sb, DockerSandbox)
    return sb
