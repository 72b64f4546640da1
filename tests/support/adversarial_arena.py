"""The arena adversarial agents run in: real attempts, real sandboxes, a host that is watched.

Every attack is a real agent program (``tests/adversarial/agents/*.py``, standard library
only) run through :func:`runner.attempts.attempt.run_attempt` exactly like a benchmarked agent: an
untrusted ``kind: baseline`` spec with small caps, a fresh workspace, grading on the private
answers, a record. The agent is told where the secrets are (host paths as arguments) and
prints a JSON report of what it tried and got; the tests check that report, the record,
and that the host is unchanged afterwards (:meth:`Arena.assert_host_unchanged`).

``ISOLATING_BACKENDS`` lists every backend that must withstand the attacks; tests use only
the record and ``Sandbox.paths()``, never a backend's internals, so a new backend joins by
being added to the list.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import shutil
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from runner.attempts.attempt import AttemptContext, AttemptPlan, run_attempt
from runner.attempts.records import RunRecord
from runner.config import REPO_ROOT, Paths
from runner.sandbox import Sandbox
from runner.specs import AgentLimits, AgentSpec
from runner.specs.registry import load_task, task_spec_sha256
from tests.support.prepared_tasks import prepared

ISOLATING_BACKENDS = ["bwrap", "docker"]
AGENTS = REPO_ROOT / "tests" / "adversarial" / "agents"
TASK_ID = "bank-customer-churn-ict-u-ai"  # binary, AUC: a constant submission scores 0.5
REPORT_PREFIX = "TMLBENCH-ADVERSARIAL-REPORT "
MIB = 1024**2
GIB = 1024**3
LIMITS = AgentLimits(cpus=1, memory_gb=0.25, pids=64, disk_gb=0.2)
DISK_CAP = int(LIMITS.disk_gb * GIB)
# What an attempt may legitimately leave on the host disk: its capped workspace and logs.
DISK_MARGIN = 2 * DISK_CAP + 64 * MIB
SECRET_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TMLBENCH_ADVERSARIAL_TOKEN")
PWNED = "adversarial-pwned"  # every file an attacker tries to plant has this in its name
_counter = itertools.count()


def sha256_tree(root: Path) -> dict[str, str]:
    """Relative path → sha256 (or 'dir'/'link:target') of everything under ``root``."""
    out: dict[str, str] = {}
    if root.is_file():
        return {".": hashlib.sha256(root.read_bytes()).hexdigest()}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = f"link:{os.readlink(path)}"
            elif path.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def tree_bytes(root: Path) -> int:
    """Disk blocks used under ``root``, symlinks not followed."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
    return total


def marked_processes(marker: str) -> list[int]:
    """Host pids of live processes with ``marker`` in their environment or command line."""
    needle = marker.encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        for part in ("environ", "cmdline"):
            try:
                with open(f"/proc/{name}/{part}", "rb") as f:
                    if needle in f.read():
                        found.append(int(name))
                        break
            except OSError:
                continue
    return found


@dataclass
class Outcome:
    """One finished attempt: its record, where it lives, and when it ran (host clock)."""

    record: RunRecord
    run_dir: Path
    started: float  # time.time() just before run_attempt
    returned: float  # time.time() when run_attempt returned

    @property
    def workspace(self) -> Path:
        return self.run_dir / "workspace"

    def log(self, name: str = "stdout.log") -> bytes:
        path = self.run_dir / name
        return path.read_bytes() if path.is_file() else b""

    def report(self) -> dict:
        """The agent's last JSON report, from its stdout or stderr log."""
        for name in ("stdout.log", "stderr.log"):
            lines = [
                line
                for line in self.log(name).decode(errors="replace").splitlines()
                if line.startswith(REPORT_PREFIX)
            ]
            if lines:
                return json.loads(lines[-1][len(REPORT_PREFIX) :])
        raise AssertionError(
            f"the agent printed no report; record: {self.record.status} "
            f"{self.record.error_message}; stderr: {self.log('stderr.log')[-2000:]!r}"
        )


@dataclass
class HostSnapshot:
    checksums: dict[str, dict[str, str]]
    free: dict[str, int]
    env: dict[str, str]
    sysctls: dict[str, str | None]
    planted: list[str] = field(default_factory=list)


class Arena:
    """Prepared task, runs folder with another run in it, a watched host, a secret to steal."""

    def __init__(self, paths: Paths, sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch):
        self.paths = paths
        self.sandbox = sandbox
        self.task = load_task(paths.tasks_dir, TASK_ID)
        self.prepared = prepared(paths, TASK_ID)
        self.marker = f"tmlbench-adversarial-{uuid.uuid4().hex}"
        self.secret = f"sk-adversarial-{uuid.uuid4().hex}"
        for var in SECRET_VARS:
            monkeypatch.setenv(var, self.secret)
        paths.runs_dir.mkdir(parents=True, exist_ok=True)
        self.other_run = paths.runs_dir / "someone-else__other-task__60s__standard__a00"
        (self.other_run / "workspace").mkdir(parents=True)
        (self.other_run / "record.json").write_text('{"status": "success", "score": 0.9}\n')
        (self.other_run / "workspace" / "submission.csv").write_text("id,Exited\n1,0.9\n")
        self.repo_files = [
            REPO_ROOT / "tasks" / TASK_ID / "task.yaml",
            REPO_ROOT / "runner" / "grading.py",
            AGENTS,
        ]
        self.site_packages = Path(next((Path(sys.prefix) / "lib").glob("python3*/site-packages")))
        self.before = self.snapshot()

    # -- running ------------------------------------------------------------------------------
    def agent(self, script: str, limits: AgentLimits = LIMITS) -> AgentSpec:
        """An untrusted agent that runs ``agents/<script>`` (unique id: a fresh run each time)."""
        return AgentSpec(
            id=f"adversarial-{Path(script).stem}-{next(_counter)}",
            kind="baseline",
            title=f"adversarial agent {script}",
            harness="tmlbench-adversarial",
            command=("{python}", f"{{agent_dir}}/{script}", "{workspace}"),
            code_dir="agents",
            limits=limits,
            trusted=False,
        )

    def context(
        self, sandbox: Sandbox | None = None, agent_code_dir: Path | None = AGENTS, **kw
    ) -> AttemptContext:
        return AttemptContext(
            prepared=self.prepared,
            runs_dir=self.paths.runs_dir,
            sandbox=sandbox or self.sandbox,
            agent_code_dir=agent_code_dir,
            task_spec_sha256=task_spec_sha256(self.paths.tasks_dir, TASK_ID),
            **kw,
        )

    def plan(self, agent: AgentSpec, budget: int) -> AttemptPlan:
        return AttemptPlan(agent, self.task, budget, 0)

    def run(
        self, script: str, *args: str, budget: int = 15, limits: AgentLimits = LIMITS
    ) -> Outcome:
        """Run ``agents/<script> <workspace> <args...> --marker M`` as a benchmarked attempt."""
        base = self.agent(script, limits)
        agent = base.model_copy(update={"command": (*base.command, *args, "--marker", self.marker)})
        started = time.time()
        record = run_attempt(self.plan(agent, budget), self.context())
        return Outcome(record, self.paths.runs_dir / record.run_id, started, time.time())

    def survivors(self) -> list[int]:
        return marked_processes(self.marker)

    def targets(self) -> list[str]:
        """Host paths an attacker goes after, passed to agents as arguments."""
        return [
            "--answers",
            str(self.prepared.answers_path),
            "--public",
            str(self.prepared.public),
            "--other-run",
            str(self.other_run),
            "--repo-file",
            str(self.repo_files[0]),
            "--runs-dir",
            str(self.paths.runs_dir),
        ]

    # -- the host -------------------------------------------------------------------------------
    def snapshot(self) -> HostSnapshot:
        watched = {
            "answers": self.prepared.answers_path,
            "private": self.prepared.private,
            "public": self.prepared.public,
            "other_run": self.other_run,
            **{f"repo:{p.relative_to(REPO_ROOT)}": p for p in self.repo_files},
        }
        planted = [
            str(p)
            for root in (self.site_packages, AGENTS, Path(sys.base_prefix) / "lib", Path("/tmp"))
            for p in root.glob(f"*{PWNED}*")
        ]
        sysctls = {
            name: path.read_text() if path.exists() else None
            for name in ("kernel/core_pattern", "kernel/modprobe", "vm/overcommit_memory")
            for path in [Path("/proc/sys") / name]
        }
        return HostSnapshot(
            checksums={name: sha256_tree(path) for name, path in watched.items()},
            sysctls=sysctls,
            free={
                str(p): shutil.disk_usage(p).free for p in (self.paths.runs_dir, Path("/dev/shm"))
            },
            env={k: os.environ.get(k, "") for k in SECRET_VARS},
            planted=planted,
        )

    def assert_host_unchanged(self, *, settle: float = 3.0) -> None:
        """Files, processes, disk and the harness's own environment are as they were."""
        end = time.monotonic() + settle
        while self.survivors() and time.monotonic() < end:
            time.sleep(0.05)
        assert not self.survivors(), f"processes of the attack survived: {self.survivors()}"
        after = self.snapshot()
        for name, sums in self.before.checksums.items():
            assert after.checksums[name] == sums, f"{name} was modified by the attack"
        assert after.planted == self.before.planted, f"files were planted: {after.planted}"
        assert after.env == self.before.env
        assert after.sysctls == self.before.sysctls, "host kernel settings were changed"
        for where, free in self.before.free.items():
            lost = free - after.free[where]
            assert lost <= DISK_MARGIN, f"{where}: {lost / MIB:.0f} MiB of free space gone"
        # The harness still works: it can start processes and write files.
        assert os.system("true") == 0
