"""tools.cpu_per_test in a pytest run of its own: a test's figure holds the CPU of what it
started, a grandchild that outlived its parent too, and the worker's cgroup is gone after."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runner.config import REPO_ROOT
from tools.cpu_per_test import GROUP, own_cgroup

# sandbox: it makes cgroups (as root, on cgroup v1)
pytestmark = pytest.mark.sandbox

TESTS = """
import os, subprocess, sys, time
from pathlib import Path

BURN = "import time\\nwhile time.process_time() < 1.0: pass\\nopen(%r, 'w').close()"

def test_burns_in_an_orphaned_grandchild(tmp_path):
    Path(os.environ["PID_FILE"]).write_text(str(os.getpid()))
    done = tmp_path / "done"
    # sh exits at once: the burning python is reparented, never waited for by this process
    subprocess.run(["sh", "-c", f"{sys.executable} -c \\"$0\\" &", BURN % str(done)], check=True)
    while not done.exists():
        time.sleep(0.05)

def test_sleeps():
    time.sleep(0.5)
"""


def test_a_tests_cpu_holds_what_it_started_and_the_cgroup_goes_after(tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text(TESTS)
    log, pid_file = tmp_path / "cpu.jsonl", tmp_path / "pid"
    started = time.time()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider",
         "-p", "tools.cpu_per_test", "--cpu-log", str(log), str(tmp_path / "test_inner.py")],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
        # as a worker of make test's starts it: $PYTEST_XDIST_WORKER set, and not its own
        env={**os.environ, "PYTEST_XDIST_WORKER": "gw9", "PID_FILE": str(pid_file)},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    cpu = {line["test"].split("::")[1]: line["cpu"] for line in lines}
    assert cpu["test_burns_in_an_orphaned_grandchild"] >= 0.95, cpu  # the grandchild's 1 s
    assert cpu["test_sleeps"] < 0.3, cpu
    # when each ended (the run's timeline across workers): in the run, in the order they ran
    ended = [line["ended"] for line in lines]
    assert started < ended[0] - lines[0]["wall"] <= ended[0] <= ended[1] < time.time(), lines
    assert "CPU of 2 tests" in result.stdout and "test_inner.py" in result.stdout, result.stdout
    # the run started in this process's cgroup, and made its own below it
    made = own_cgroup() / GROUP / f"main-{pid_file.read_text()}"
    assert made.parent.is_dir() and not made.exists()
