"""Sandbox backends: run one agent attempt with a hard deadline and resource caps.

``get_sandbox("bwrap")`` (default on Linux) or ``get_sandbox("process")`` (no isolation;
trusted baselines or an explicit unsafe flag only). ``default_backend()`` picks bwrap and
says how to install it when it is missing.
"""

from __future__ import annotations

import sys

from runner.errors import HarnessError
from runner.sandbox.base import (
    GIB,
    Sandbox,
    SandboxLimits,
    SandboxPaths,
    SandboxRequest,
    SandboxResult,
)
from runner.sandbox.bwrap import BwrapSandbox, bwrap_available, bwrap_problem
from runner.sandbox.process import ProcessSandbox

BACKENDS = ("bwrap", "process", "docker")

__all__ = [
    "BACKENDS",
    "GIB",
    "BwrapSandbox",
    "ProcessSandbox",
    "Sandbox",
    "SandboxLimits",
    "SandboxPaths",
    "SandboxRequest",
    "SandboxResult",
    "bwrap_available",
    "bwrap_problem",
    "default_backend",
    "get_sandbox",
]


def get_sandbox(name: str) -> Sandbox:
    """The backend called ``name``; HarnessError if it is unknown or cannot work here."""
    if name == "bwrap":
        problem = bwrap_problem()
        if problem:
            raise HarnessError(problem)
        return BwrapSandbox()
    if name == "process":
        return ProcessSandbox()
    if name == "docker":
        raise HarnessError("the docker sandbox backend is not implemented yet; use bwrap")
    raise HarnessError(f"unknown sandbox backend {name!r}; choose one of {', '.join(BACKENDS)}")


def default_backend(*, allow_process: bool = False) -> Sandbox:
    """bwrap on Linux when it works. Otherwise HarnessError, or the unisolated ``process``
    backend if the caller explicitly allows it (``allow_process=True``)."""
    problem = bwrap_problem() if sys.platform.startswith("linux") else "not Linux"
    if problem is None:
        return BwrapSandbox()
    if allow_process:
        return ProcessSandbox()
    raise HarnessError(
        f"no isolating sandbox available: {problem}. Install bubblewrap "
        "(`apt-get install bubblewrap`), or run trusted agents only with the unisolated "
        "process backend, which must be requested explicitly"
    )
