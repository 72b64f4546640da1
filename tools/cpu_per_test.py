"""The CPU each test used, counting every process it started: a pytest plugin, opt-in
(``uv run pytest -n 4 --dist loadgroup -p tools.cpu_per_test``; as root, on cgroup v1).

Each pytest process (each xdist worker) moves itself into a cpuacct cgroup of its own, below the
one it started in: what it starts is born there, and a sandboxed attempt's cgroups nest under it
(``runner.sandbox.cgroups`` makes them below its own, found as this plugin finds it), so
``cpuacct.usage`` read around a test counts its servers, dbt builds, agents and attempts, even a
daemon reparented after its parent was killed. pytest's own
``--durations`` and ``os.times()`` miss those. Docker's containers are outside it: they run in
dockerd's cgroups. A test's figure includes the session and module fixtures it was the first to
need.

Every test adds a line to ``--cpu-log`` (JSON: test, cpu and wall seconds, worker, and when it
ended, so the workers' lines make the run's timeline); at the end the run prints where the CPU
went by test file, and the costliest tests. tests/README.md, "Where the time goes", reads it.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections import defaultdict
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from runner.sandbox import cgroups

GROUP = "tmlbench-tests"  # beside the harness's own `tmlbench` cgroups, never inside them
SHOWN = 15


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--cpu-log",
        default=".pytest_cache/cpu-per-test.jsonl",
        help="where tools.cpu_per_test writes one JSON line per test (made anew each run)",
    )


def _worker(config: pytest.Config) -> str:
    """This process's xdist worker id, or "main" (the controller, or a run without workers).
    Asked of xdist, not of $PYTEST_XDIST_WORKER: a pytest that a test starts inherits that."""
    workerinput: dict[str, str] | None = getattr(config, "workerinput", None)
    return workerinput["workerid"] if workerinput else "main"


def _usage(cgroup: Path) -> float:
    """CPU seconds of everything that ran in ``cgroup`` and below it."""
    return int((cgroup / "cpuacct.usage").read_text()) / 1e9


def own_cgroup() -> Path:
    """This process's cpuacct cgroup, where the sandbox makes its attempts' cgroups below it."""
    parents = cgroups.parent_dirs()
    if parents is None:
        _, reason = cgroups.available()
        raise pytest.UsageError(f"tools.cpu_per_test needs cgroup v1: {reason}")
    return parents["cpuacct"].parent


class CpuPerTest:
    """This process's cgroup, and the line it adds to the log for each test it runs."""

    def __init__(self, log: Path, worker: str):
        self.log = log
        self.worker = worker
        self.came_from = own_cgroup()
        self.cgroup = self.came_from / GROUP / f"{worker}-{os.getpid()}"

    def enter(self) -> None:
        try:
            self.cgroup.mkdir(parents=True, exist_ok=True)
            (self.cgroup / "cgroup.procs").write_text(str(os.getpid()))
        except OSError as error:
            raise pytest.UsageError(
                f"tools.cpu_per_test cannot make its cgroup {self.cgroup} (run as root; leave out"
                f" -p tools.cpu_per_test otherwise): {error}"
            ) from error

    def leave(self) -> None:
        """Back to the cgroup it came from; this one and the empty ones below it are removed. One
        that still holds a process (a server that outlived its test) stays, and shows which."""
        (self.came_from / "cgroup.procs").write_text(str(os.getpid()))
        for folder in sorted(self.cgroup.glob("**/"), key=lambda p: -len(p.parts)):
            with contextlib.suppress(OSError):
                folder.rmdir()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, object, object]:
        cpu, wall = _usage(self.cgroup), time.monotonic()
        result = yield
        line = {
            "test": item.nodeid,
            "cpu": round(_usage(self.cgroup) - cpu, 2),
            "wall": round(time.monotonic() - wall, 2),
            "worker": self.worker,
            "ended": round(time.time(), 2),  # when, for the run's timeline across workers
        }
        with self.log.open("a", encoding="utf-8") as out:  # one short append per test
            out.write(json.dumps(line) + "\n")
        return result


_KEY = pytest.StashKey[CpuPerTest]()


def pytest_configure(config: pytest.Config) -> None:
    log = Path(config.getoption("cpu_log"))
    if not log.is_absolute():
        log = config.rootpath / log
    worker = _worker(config)
    if worker == "main":  # the controller, or a run without workers: a fresh log
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("")
    plugin = CpuPerTest(log, worker)
    plugin.enter()
    config.pluginmanager.register(plugin, "cpu_per_test_timer")
    config.stash[_KEY] = plugin


def pytest_unconfigure(config: pytest.Config) -> None:
    plugin = config.stash.get(_KEY, None)
    if plugin is not None:
        plugin.leave()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    plugin = terminalreporter.config.stash.get(_KEY, None)
    if plugin is None or plugin.worker != "main":
        return
    lines = [json.loads(line) for line in plugin.log.read_text(encoding="utf-8").splitlines()]
    if not lines:
        return
    for line in summary(lines):
        terminalreporter.write_line(line)
    terminalreporter.write_line(f"every test: {plugin.log}")


def summary(lines: list[dict[str, Any]]) -> list[str]:
    """The CPU by test file, then the costliest tests (seconds, with the wall time beside)."""
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for line in lines:
        totals = files[line["test"].split("::")[0]]
        totals[0] += line["cpu"]
        totals[1] += line["wall"]
        totals[2] += 1
    total = sum(totals[0] for totals in files.values())
    out = [f"CPU of {len(lines)} tests, with what they started: {total:.0f} s; by file:"]
    for name, (cpu, wall, count) in sorted(files.items(), key=lambda kv: -kv[1][0])[:SHOWN]:
        out.append(f"{cpu:8.1f} s CPU {wall:8.1f} s wall {int(count):4d} tests  {name}")
    out.append("the costliest tests:")
    for line in sorted(lines, key=lambda line: -line["cpu"])[:SHOWN]:
        out.append(f"{line['cpu']:8.1f} s CPU {line['wall']:8.1f} s wall  {line['test']}")
    return out
