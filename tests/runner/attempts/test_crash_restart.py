"""Crashes for real: ``kill -9`` of the harness mid-bench and mid-load, a full disk under a record."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from runner.attempts.records import (
    RECORD_FILE,
    TEMP_PREFIX,
    load_records,
    read_record,
    write_record,
)
from runner.attempts.run_folder import STARTED_FILE, died_mid_attempt
from runner.config import REPO_ROOT
from runner.errors import TmlbenchError
from runner.sandbox import cgroups
from runner.suites.benchmark_settings import next_attempt_indices
from tools.records import make_record
from warehouse.db import apply_ddl, connect
from warehouse.loader import load_runs

BANK = "bank-customer-churn-ict-u-ai"
SLOW_AGENT = """
import os, shutil, sys, time
# a grandchild in its own session that would outlive a careless kill
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(600)
    os._exit(0)
os.wait()
open("alive", "w").write(str(os.getpid()))
time.sleep(4)
shutil.copy("sample_submission.csv", "submission.csv")
"""


def tmlbench(env: dict[str, str], *args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "runner.command_line", *args],
        env=env,
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kwargs,
    )


def process_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) of every process on the host."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
            table[int(entry.name)] = (int(fields[1]), fields[0])
    return table


def descendants(pid: int) -> set[int]:
    table = process_table()
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, (ppid, _) in table.items() if ppid in frontier} - found
        found |= frontier
    return found


def alive(pids: set[int]) -> set[int]:
    table = process_table()
    return {p for p in pids if p in table and table[p][1] != "Z"}


def wait_for(condition, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@pytest.fixture
def crash_env(tmp_path: Path) -> dict[str, str]:
    """A one-setting suite (a slow scripted agent, 2 successes wanted, at most 2 of its own
    attempts) with its own suites/agents folders, so nothing of the repo's is touched."""
    suites, agents = tmp_path / "suites", tmp_path / "agents"
    (agents / "slow").mkdir(parents=True)
    suites.mkdir()
    (agents / "slow" / "agent.py").write_text(textwrap.dedent(SLOW_AGENT))
    agent = {
        "id": "slow",
        "kind": "command",
        "title": "sleeps, then submits the sample",
        "harness": "test",
        "command": ["{python}", "{agent_dir}/agent.py"],
        "code_dir": "slow",
    }
    (agents / "slow.yaml").write_text(yaml.safe_dump(agent))
    suite = {
        "id": "crash",
        "title": "crash suite",
        "tasks": [BANK],
        "agents": ["slow"],
        "budgets": [60],
        "attempts": 2,
        "max_attempts": 2,  # a harness_error counted against the agent would leave it short
        "concurrency": 1,
        "twin_rows": 400,
        "data_subdir": "crash",
        "runs_subdir": "crash",
    }
    (suites / "crash.yaml").write_text(yaml.safe_dump(suite))
    return {
        **os.environ,
        "TMLBENCH_SUITES_DIR": str(suites),
        "TMLBENCH_AGENTS_DIR": str(agents),
        "TMLBENCH_DATA_DIR": str(tmp_path / "data"),
        "TMLBENCH_RUNS_DIR": str(tmp_path / "runs"),
        "COLUMNS": "200",
    }


@pytest.mark.sandbox
@pytest.mark.timeout(300)
def test_kill_9_mid_bench_records_the_interrupted_attempt_and_the_rerun_completes(
    crash_env, tmp_path
):
    runs = tmp_path / "runs" / "crash"
    first_id, second_id, third_id = (f"slow__{BANK}__60s__standard__a{i:02d}" for i in range(3))
    harness = tmlbench(crash_env, "bench", "--suite", "crash", start_new_session=True)
    try:
        wait_for(
            lambda: (
                (runs / first_id / RECORD_FILE).is_file()
                and (runs / second_id / "workspace" / "alive").is_file()
            ),
            120,
            "attempt a00 recorded and a01 running",
        )
        sandboxed = descendants(harness.pid)
        assert sandboxed, "the running attempt has processes"
        finished = (runs / first_id / RECORD_FILE).read_bytes()
        os.kill(harness.pid, signal.SIGKILL)  # a crash: the harness only, nothing else
        harness.wait(10)
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait()
    # bwrap --die-with-parent: the sandbox (setsid'd grandchild included) dies with its harness
    wait_for(lambda: not alive(sandboxed), 10, f"sandboxed processes {alive(sandboxed)} to die")
    assert not (runs / second_id / RECORD_FILE).exists()
    # Its mounts outlived it: the workspace's own filesystem and the views of the agent's code.
    assert os.path.ismount(runs / second_id / "workspace")
    assert list((runs / second_id / ".views").iterdir())
    started = json.loads((runs / second_id / STARTED_FILE).read_text())
    assert started["harness_pid"] == harness.pid

    rerun = tmlbench(crash_env, "bench", "--suite", "crash")
    out, _ = rerun.communicate(timeout=240)
    assert rerun.returncode == 0, out

    assert (runs / first_id / RECORD_FILE).read_bytes() == finished  # finished: untouched
    crashed = read_record(runs / second_id / RECORD_FILE)
    assert crashed.status == "harness_error" and died_mid_attempt(crashed)
    assert str(harness.pid) in crashed.error_message
    assert crashed.created_at.isoformat() == started["created_at"]
    assert crashed.finished_at > crashed.created_at and crashed.score is None
    assert (runs / second_id / "stdout.log").is_file()  # kept for diagnosis
    assert (runs / second_id / "workspace" / "alive").is_file()
    assert not (runs / second_id / "workspace" / "train.csv").exists()
    assert not list((runs / second_id).glob(f"{TEMP_PREFIX}*"))
    # The rerun released what the dead harness had mounted.
    assert str(tmp_path) not in Path("/proc/self/mountinfo").read_text()
    assert not list((runs / second_id).glob(".workspace*"))
    assert not (runs / second_id / ".views").exists()

    records = sorted(load_records(runs), key=lambda r: r.attempt_index)
    assert [(r.run_id, r.status) for r in records] == [
        (first_id, "success"),
        (second_id, "harness_error"),
        (third_id, "success"),
    ]
    # the harness_error did not use up the agent's allowance of 2 attempts: nothing left to run
    assert next_attempt_indices(records, 2, 2) == []

    # no cgroup of the dead harness is left behind
    parents = cgroups.parent_dirs()
    if parents is not None and parents["freezer"].is_dir():
        assert not list(parents["freezer"].glob(f"{harness.pid}-*"))

    # loading twice: every attempt once, nothing duplicated
    con = connect(tmp_path / "wh.duckdb")
    try:
        apply_ddl(con)
        first, second = load_runs(con, tmp_path / "runs"), load_runs(con, tmp_path / "runs")
        assert (first.new, first.unchanged, first.rejected) == (3, 0, [])
        assert (second.new, second.unchanged, second.rejected) == (0, 3, [])
        rows = con.execute(
            "select count(*), count(distinct run_id), count(*) filter (where status = 'success') "
            "from raw.runs"
        ).fetchone()
        assert rows == (3, 3, 2)
    finally:
        con.close()


# -- kill -9 during a warehouse load -------------------------------------------------------

LOAD_DRIVER = """
import sys, time
from pathlib import Path
from warehouse import loader
from warehouse.db import connect

real_insert = loader._insert_runs
hold = sys.argv[3] == "hold"

def insert(con, table):
    print("inserting", flush=True)
    real_insert(con, table)
    print("inserted", flush=True)
    if hold:  # the rows are in, the transaction is not committed: the worst moment to die
        time.sleep(120)

loader._insert_runs = insert
con = connect(Path(sys.argv[1]))
report = loader.load_runs(con, Path(sys.argv[2]))
con.close()
print("loaded", report.new, flush=True)
"""


def write_raw_records(runs: Path, n: int, start: int = 0) -> None:
    """``n`` small valid record files, written directly (no fsync per file: fast)."""
    template = make_record().model_dump(mode="json")
    for i in range(start, start + n):
        run_id = f"r{i:06d}"
        (runs / run_id).mkdir(parents=True)
        (runs / run_id / RECORD_FILE).write_text(
            json.dumps(template | {"run_id": run_id, "attempt_index": i, "seed": i})
        )


def warehouse_counts(path: Path) -> tuple[int, int]:
    con = connect(path)
    try:
        return con.execute("select count(*), count(distinct run_id) from raw.runs").fetchone()
    finally:
        con.close()


# integration: a real warehouse load in a subprocess, killed and run again
@pytest.mark.integration
@pytest.mark.timeout(300)
def test_kill_9_during_a_warehouse_load_leaves_the_warehouse_unchanged(tmp_path):
    runs, wh = tmp_path / "runs", tmp_path / "wh.duckdb"
    write_raw_records(runs / "before", 200)
    con = connect(wh)
    apply_ddl(con)
    assert load_runs(con, runs).new == 200
    con.close()
    write_raw_records(runs / "more", 20_000, start=200)
    driver = tmp_path / "load_driver.py"
    driver.write_text(LOAD_DRIVER)

    def start(mode: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, str(driver), str(wh), str(runs), mode],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )

    # killed while reading and validating, at the start of the insert, and after the insert
    # but before the commit (the loader holds the transaction open there)
    kills = [("delay", 0.8), ("delay", 1.6), ("at", "inserting"), ("at", "inserted")]
    for kind, when in kills:
        proc = start("hold")
        try:
            if kind == "delay":
                time.sleep(when)
            else:
                for line in proc.stdout:
                    if line.strip() == when:
                        break
            assert proc.poll() is None, f"the load ended before the kill ({kind} {when})"
            proc.send_signal(signal.SIGKILL)
            assert proc.wait(10) == -signal.SIGKILL
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert warehouse_counts(wh) == (200, 200), f"after a kill ({kind} {when})"

    proc = start("go")
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode == 0 and "loaded 20000" in out, out
    assert warehouse_counts(wh) == (20_200, 20_200)


# -- a full disk under write_record ---------------------------------------------------------


@pytest.fixture
def tiny_disk(tmp_path: Path):
    """A 128 KiB tmpfs (needs root, as the harness does for cgroups)."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=128k", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def fill(directory: Path) -> Path:
    filler = directory / "filler"
    with filler.open("wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"x" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


def test_a_full_disk_leaves_no_partial_record_and_no_temp_file(tiny_disk):
    run_dir = tiny_disk / "run"
    run_dir.mkdir()
    (run_dir / "stdout.log").write_text("log")
    filler = fill(tiny_disk)
    record = make_record()
    with pytest.raises(TmlbenchError, match="No space left on device") as caught:
        write_record(run_dir, record)
    assert str(run_dir / RECORD_FILE) in str(caught.value)
    assert sorted(p.name for p in run_dir.iterdir()) == ["stdout.log"]

    filler.unlink()  # with room again the same record is written whole
    path = write_record(run_dir, record)
    assert read_record(path) == record
    assert sorted(p.name for p in run_dir.iterdir()) == [RECORD_FILE, "stdout.log"]
