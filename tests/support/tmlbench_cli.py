"""``tmlbench`` run for real: a fresh ``python -m runner.command_line`` process in the repository."""

from __future__ import annotations

import subprocess
import sys

from runner.config import REPO_ROOT


def tmlbench(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "runner.command_line", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=REPO_ROOT,
    )
