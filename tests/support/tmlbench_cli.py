"""``tmlbench`` run for real: in a fresh ``python -m runner.command_line`` process, or in this one.

``tmlbench`` is what a test runs when it asserts on the command as a person starts it (its exit
status, its start-up, its imports); ``invoke`` when the command's work is only the way in, and
a second interpreter's imports would buy nothing.
"""

from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner, Result

from runner.command_line import cli
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


def invoke(env: dict[str, str], *args: str) -> Result:
    """``tmlbench ARGS`` in this process, with ``env`` added to the environment for the call.

    What the command exits with (a usage error, a failed check's status) is the result's
    ``exit_code``. Any exception propagates: a refusal as its ``TmlbenchError`` (the command
    line's ``main`` is what prints it and exits 1 for a person; ``pytest.raises`` asserts it
    here), a crash with its traceback, never read as a plain exit 1."""
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
