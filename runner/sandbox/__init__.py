"""Sandbox backends: run one agent attempt with a hard deadline and resource caps.

``get_sandbox("bwrap")`` (the default), ``get_sandbox("docker")`` (one container per
attempt from the image ``make docker-image`` builds) or ``get_sandbox("process")`` (no
isolation; trusted baselines or an explicit unsafe flag only). A missing bwrap, Docker
engine or image is reported with what to do about it.
"""

from __future__ import annotations

from runner.errors import HarnessError
from runner.sandbox.base import (
    GIB,
    Bind,
    Sandbox,
    SandboxLimits,
    SandboxPaths,
    SandboxRequest,
    SandboxResult,
)
from runner.sandbox.bwrap import BwrapSandbox, bwrap_available, bwrap_problem
from runner.sandbox.docker import DockerSandbox, docker_problem
from runner.sandbox.process import ProcessSandbox

BACKENDS = ("bwrap", "docker", "process")

__all__ = [
    "BACKENDS",
    "GIB",
    "Bind",
    "BwrapSandbox",
    "DockerSandbox",
    "ProcessSandbox",
    "Sandbox",
    "SandboxLimits",
    "SandboxPaths",
    "SandboxRequest",
    "SandboxResult",
    "bwrap_available",
    "bwrap_problem",
    "docker_problem",
    "get_sandbox",
]


def get_sandbox(name: str) -> Sandbox:
    """The backend called ``name``; HarnessError if it is unknown or cannot work here."""
    if name == "bwrap":
        problem = bwrap_problem()
        if problem:
            raise HarnessError(problem)
        return BwrapSandbox()
    if name == "docker":
        return DockerSandbox()
    if name == "process":
        return ProcessSandbox()
    raise HarnessError(f"unknown sandbox backend {name!r}; choose one of {', '.join(BACKENDS)}")
