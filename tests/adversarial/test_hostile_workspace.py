"""Hostile workspaces: whatever an agent leaves behind is its outcome, never a harness fault.

The attacks aim at the harness's passes over the workspace after an attempt (a tree deeper
than any recursion, set-id files, fifos, sockets, hard-link multiplication) and at its disk
cap (fallocate, floods of empty files). Each must end as the agent's own outcome, leave
nothing set-id, mounted or over the cap on the host, and leave the harness working.
"""

from __future__ import annotations

import os
import stat
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from runner.attempts.attempt import run_attempt
from runner.specs.registry import agent_code_dir, load_agent
from tests.support.adversarial_arena import DISK_CAP, MIB, Arena, tree_bytes

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(180)]


def assert_nothing_left_on_the_host(arena: Arena, run_dir: Path) -> None:
    """No set-id file, no mount, no filesystem image, nothing over the cap."""
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(arena.paths.runs_dir) not in mounts, "a workspace is still mounted"
    assert not list(run_dir.glob(".workspace*")), "a workspace image or staging folder stayed"
    for top, dirs, files in os.walk(run_dir):
        for name in dirs + files:
            mode = os.lstat(os.path.join(top, name)).st_mode
            assert not mode & (stat.S_ISUID | stat.S_ISGID), f"set-id on the host: {top}/{name}"
    assert tree_bytes(run_dir / "workspace") <= DISK_CAP


def test_a_tree_deeper_than_any_recursion_is_the_agents_and_is_cleaned(arena: Arena):
    out = arena.run("hostile_workspace.py", "deep", *arena.targets(), budget=60)
    assert out.report()["levels"] == 1500
    assert out.record.status == "success", (out.record.status, out.record.error_message)
    assert not (out.workspace / "train.csv").exists()  # the copied inputs were dropped
    assert_nothing_left_on_the_host(arena, out.run_dir)
    arena.assert_host_unchanged()


@pytest.mark.parametrize("mode", ["fallocate", "inodes"])
def test_the_disk_cap_cannot_be_outrun(arena: Arena, mode: str):
    out = arena.run("hostile_workspace.py", mode, *arena.targets(), budget=60)
    report = out.report()
    key = "fallocate" if mode == "fallocate" else "flood"
    assert report["tries"][key] == "OSError:28", report  # ENOSPC from the kernel, at the cap
    if mode == "fallocate":
        assert report["allocated_mib"] * MIB <= DISK_CAP
    assert out.record.status == "runtime_error"
    assert out.record.limit_exceeded == "disk"
    # The over-cap workspace is gone; its listing stayed beside the logs.
    assert os.listdir(out.workspace) == []
    assert (out.run_dir / "workspace-listing.tsv").read_text().startswith("# ")
    assert_nothing_left_on_the_host(arena, out.run_dir)
    arena.assert_host_unchanged()


def test_an_agent_that_meets_the_inode_cap_and_copes_still_succeeds(arena: Arena):
    out = arena.run("hostile_workspace.py", "inodes-then-submit", *arena.targets(), budget=60)
    assert out.report()["tries"]["flood"] == "OSError:28"
    assert out.record.status == "success", (out.record.status, out.record.error_message)
    assert out.record.limit_exceeded is None
    assert_nothing_left_on_the_host(arena, out.run_dir)
    arena.assert_host_unchanged()


def test_fifos_sockets_hard_links_and_setid_are_not_carried_out(arena: Arena):
    out = arena.run("hostile_workspace.py", "specials", *arena.targets(), budget=60)
    report = out.report()
    assert report["hard_links"] == 500
    assert report["tries"]["chmod_setuid"] == "ok"  # inside it may set the bit (nosuid mount)
    assert out.record.status == "success", (out.record.status, out.record.error_message)
    ws = out.workspace
    assert not (ws / "listening.sock").exists()
    assert stat.S_ISFIFO(os.lstat(ws / "pipe").st_mode)  # harmless, and kept for diagnosis
    assert os.readlink(ws / "shadow") == "/etc/shadow"  # a link, never its target
    # One 40 MiB blob, however many names it had: hard links are not multiplied on the host.
    assert tree_bytes(ws) < 60 * MIB
    assert_nothing_left_on_the_host(arena, out.run_dir)
    arena.assert_host_unchanged()


@pytest.mark.parametrize(("mode", "status"), [("fallocate", "runtime_error"), ("deep", "success")])
def test_a_benign_attempt_runs_beside_a_hostile_workspace(arena: Arena, mode: str, status: str):
    benign = load_agent(arena.paths.agents_dir, "baseline-constant")
    benign_ctx = arena.context(agent_code_dir=agent_code_dir(arena.paths.agents_dir, benign))
    with ThreadPoolExecutor(2) as pool:
        hostile = pool.submit(arena.run, "hostile_workspace.py", mode, budget=60)
        time.sleep(0.3)
        good = pool.submit(run_attempt, arena.plan(benign, 60), benign_ctx).result()
        bad = hostile.result()
    assert good.status == "success", (good.error_message, good.validation_message)
    assert bad.record.status == status, (bad.record.status, bad.record.error_message)
    assert_nothing_left_on_the_host(arena, bad.run_dir)
    arena.assert_host_unchanged()


LONG_TARGET = "/" + "a" * 300  # a name component past NAME_MAX: ENAMETOOLONG when followed


def test_inputs_the_harness_cannot_follow_leave_a_valid_submission_a_success(arena: Arena):
    """Links at the dropped inputs' names are the agent's (a note), never a harness fault."""
    out = arena.run("hostile_workspace.py", "unfollowable-inputs", *arena.targets(), budget=30)
    report = out.report()
    assert report["train.csv"] == LONG_TARGET and report["test.csv"] == "test.csv", report
    record = out.record
    assert record.status == "success", (record.status, record.error_message)
    assert record.score == 0.5 and record.submission_sha256 is not None
    notes = record.sandbox_notes or []
    for name in ("train.csv", "test.csv"):
        assert f"workspace: {name} kept: the agent left a symbolic link there" in notes, notes
    assert os.readlink(out.workspace / "train.csv") == LONG_TARGET  # kept as a link, unfollowed
    assert_nothing_left_on_the_host(arena, out.run_dir)
    arena.assert_host_unchanged()


def test_a_submission_the_harness_cannot_follow_is_invalid(arena: Arena):
    """A submission link to a 300-byte name is refused with its reason, never a harness fault."""
    out = arena.run("hostile_workspace.py", "unfollowable-submission", *arena.targets(), budget=30)
    assert out.report()["submission.csv"] == LONG_TARGET
    record = out.record
    assert record.status == "invalid_submission", (record.status, record.error_message)
    assert record.validation_code == "not_regular_file"
    assert "submission.csv is a symbolic link" in (record.validation_message or "")
    assert record.submission_path == "workspace/submission.csv"
    assert record.submission_sha256 is None
    assert not (out.workspace / "train.csv").exists()  # the regular inputs are still dropped
    assert (out.workspace / "my-submission.csv").is_file()
    assert_nothing_left_on_the_host(arena, out.run_dir)
    arena.assert_host_unchanged()
