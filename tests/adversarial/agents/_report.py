"""Shared by the adversarial agents: run one try, note what happened, print the JSON report.

Each agent prints one line ``TMLBENCH-ADVERSARIAL-REPORT {json}`` (the last such line
counts), so the tests can compare what the agent *tried and got* with what the harness
recorded. Standard library only: this runs inside the sandbox.
"""

import json
import shutil
import sys

PREFIX = "TMLBENCH-ADVERSARIAL-REPORT "


def outcome(action) -> str:
    """'ok' if ``action()`` worked, else the error's class and errno, e.g. 'PermissionError:13'."""
    try:
        action()
    except OSError as exc:
        return f"{type(exc).__name__}:{exc.errno}"
    except Exception as exc:
        return f"{type(exc).__name__}"
    return "ok"


def read(path: str, n: int = 4096) -> bytes:
    with open(path, "rb") as f:
        return f.read(n)


def emit(report: dict, stream=None) -> None:
    stream = stream or sys.stdout
    stream.write(PREFIX + json.dumps(report, default=str) + "\n")
    stream.flush()


def submit_sample() -> None:
    """The honest fallback: a constant submission (AUC exactly 0.5 on a binary task)."""
    shutil.copyfile("sample_submission.csv", "submission.csv")
