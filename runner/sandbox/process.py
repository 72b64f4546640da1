"""``process`` backend: no isolation, same deadline, kill, caps, env and log handling.

Only for trusted built-in baselines or runs with an explicit unsafe flag; that policy is
the caller's. The agent sees real host paths and the harness's own Python.
"""

from __future__ import annotations

import sys
from pathlib import Path

from runner.sandbox.base import Bind, Sandbox, SandboxPaths, SandboxRequest
from runner.sandbox.lifecycle import Ended
from runner.sandbox.supervise import Launch, supervise
from runner.sandbox.workspace import Workspace


class ProcessSandbox(Sandbox):
    name = "process"
    isolated = False

    def paths(self, workspace: Path, agent_dir: Path) -> SandboxPaths:
        return SandboxPaths(
            workspace=str(Path(workspace).resolve()),
            agent_dir=str(Path(agent_dir).resolve()),
            python=sys.executable,
        )

    def bind_path(self, bind: Bind) -> str:
        return str(Path(bind.host).resolve())

    def execute(self, request: SandboxRequest, workspace: Workspace) -> Ended:
        launch = Launch(
            argv=list(request.command),
            cwd=Path(request.workspace).resolve(),
            keep_pwd="PWD" in request.env,
            notes=["process backend: no isolation (filesystem, network and env of the host)"],
        )
        return supervise(self.name, request, launch, workspace)
