"""Resource exhaustion: processes, memory, disk, output. Caps end the attempt, not the harness."""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from runner.attempts.attempt import run_attempt
from runner.specs.registry import agent_code_dir, load_agent
from tests.support.adversarial_arena import DISK_CAP, LIMITS, MIB, Arena, tree_bytes

# exclusive: fork, memory and disk bombs load the whole host, and the deadlines are asserted
# within 2 s of the budget: no other test beside them
pytestmark = [pytest.mark.sandbox, pytest.mark.exclusive, pytest.mark.timeout(120)]
LOG_CAP = 5 * MIB  # SandboxRequest's default log cap


def test_fork_bomb_hits_the_pids_cap_and_is_cleaned_up(arena: Arena):
    out = arena.run("forkbomb.py", "--seconds", "2", budget=10)
    report = out.report()
    assert report["refused"] > 0 and "BlockingIOError:11" in report["errors"], report
    assert report["forks"] < LIMITS.pids
    assert out.record.status == "runtime_error"
    assert out.record.exit_code == 3  # the bomb's own exit, not a kill
    assert out.record.limit_exceeded == "pids"
    assert out.record.wall_seconds < 10  # its lingering children did not hold the attempt open
    arena.assert_host_unchanged()


@pytest.mark.parametrize("mode", ["heap", "tmpfs"])
def test_memory_bomb_is_killed_at_the_memory_cap(arena: Arena, mode: str):
    out = arena.run("membomb.py", mode, budget=15)
    report = out.report()
    cap = LIMITS.memory_gb * 1024**3
    assert out.record.status == "runtime_error"
    assert out.record.limit_exceeded == "memory"
    assert out.record.exit_code == 128 + 9
    assert out.record.peak_memory_bytes <= cap * 1.02
    allocated = (report["heap_mib"] + sum(report["files_mib"].values())) * MIB
    assert allocated >= cap * 0.5, report  # it really tried
    if mode == "tmpfs":
        assert report["errors"].get("/dev/shm") == "OSError:28", report  # tmpfs full: ENOSPC
    arena.assert_host_unchanged()


def test_filling_the_disk_stops_at_the_cap_and_leaves_nothing(arena: Arena):
    """The kernel refuses the byte past the cap (ENOSPC); an agent that keeps trying until
    its budget runs out times out, its workspace at the cap, which is then not kept."""
    budget = 8
    out = arena.run("diskfill.py", budget=budget)
    report = out.report()
    assert report["errors"]["/tmp"] == "OSError:28"  # sandbox /tmp is small and private
    assert report["tmpfs_mib"]["/tmp"] * MIB <= DISK_CAP + 4096  # its size, page-rounded
    assert report["errors"]["workspace"] == "OSError:28"  # the workspace's own cap
    assert report["workspace_mib"] * MIB <= DISK_CAP + 8 * MIB  # one 8 MiB block in flight
    assert out.record.status == "timeout"
    assert out.record.limit_exceeded == "disk"
    assert out.record.wall_seconds <= budget + 2
    assert os.listdir(out.workspace) == []  # nothing past the cap stays on the host
    assert tree_bytes(out.run_dir) < 16 * MIB
    arena.assert_host_unchanged()


def test_ten_gib_of_stdout_is_capped_and_the_attempt_ends(arena: Arena):
    """The harness drains and drops what is over the log cap: the log stays small, and the
    attempt ends either way (the agent finishes writing, or the deadline stops it)."""
    budget = 8
    out = arena.run("flood.py", "--gib", "10", budget=budget)
    stdout = out.log("stdout.log")
    assert LOG_CAP <= len(stdout) <= LOG_CAP + 200
    assert stdout.startswith(b"y" * 1023 + b"\n")
    assert b"log truncated at" in stdout[LOG_CAP:]
    assert len(out.log("stderr.log")) < 4096
    progress = json.loads((out.workspace / "progress.json").read_text())
    print(
        f"stdout accepted: {progress['stdout_bytes'] / MIB:.0f} MiB in {out.record.wall_seconds:.1f} s"
    )
    # Far more was written than kept (progress is noted every 256 MiB; docker's attach path
    # carries ~40-80 MB/s on 2 busy cores, bwrap's pipe gigabytes).
    assert progress["stdout_bytes"] >= 50 * LOG_CAP
    if out.record.status == "success":  # the harness kept up with all 10 GiB
        assert out.report() == {"stdout_bytes": 10 * 1024**3, "finished": True}
        assert out.record.wall_seconds < budget
    else:
        assert out.record.status == "timeout", out.record
        assert out.record.wall_seconds <= budget + 2
    assert out.returned - out.started <= budget + 2 + 1  # deadline + kill + grading
    arena.assert_host_unchanged()


def test_a_benign_attempt_runs_beside_a_fork_bomb_and_a_memory_bomb(arena: Arena):
    benign = load_agent(arena.paths.agents_dir, "baseline-constant")
    benign_ctx = arena.context(agent_code_dir=agent_code_dir(arena.paths.agents_dir, benign))
    with ThreadPoolExecutor(3) as pool:
        bombs = [
            pool.submit(arena.run, "forkbomb.py", "--seconds", "60", budget=6),
            pool.submit(arena.run, "membomb.py", "heap", budget=6),
        ]
        time.sleep(0.5)  # let the bombs go off first
        good = pool.submit(run_attempt, arena.plan(benign, 60), benign_ctx).result()
        fork, mem = (b.result() for b in bombs)
    assert good.status == "success", (good.error_message, good.validation_message)
    assert good.wall_seconds < 30
    assert fork.record.status == "timeout" and fork.record.limit_exceeded == "pids"
    assert mem.record.status == "runtime_error" and mem.record.limit_exceeded == "memory"
    assert os.getloadavg()  # the harness process is alive and well
    arena.assert_host_unchanged()
