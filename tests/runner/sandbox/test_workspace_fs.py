"""The per-attempt workspace filesystem, for real: loop-mounted ext4, kernel-enforced caps.

These need root and loop devices (the harness's normal case; `make test` runs as root).
Unusable here is a failure, never a skip: the fallback is tested on purpose below.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from runner.errors import HarnessError
from runner.sandbox import workspace as ws_module
from runner.sandbox.workspace import (
    IMAGE_NAME,
    LISTING_NAME,
    Workspace,
    filesystem_problem,
    recover,
)

MIB = 1024**2


@pytest.fixture(autouse=True)
def _needs_filesystems() -> None:
    problem = filesystem_problem()
    if problem:
        pytest.fail(f"per-attempt filesystems must work here (root, loop devices): {problem}")


def mount_line(path: Path) -> str | None:
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        if line.split()[4] == str(path):
            return line
    return None


def opened(tmp_path: Path, *, disk: int = 16 * MIB, inodes: int = 1000, **kw) -> Workspace:
    path = tmp_path / "run" / "workspace"
    path.mkdir(parents=True)
    (path / "train.csv").write_text("id,y\n1,0\n")
    ws = Workspace(path, disk, inodes, **kw)
    ws.open()
    return ws


def test_the_workspace_becomes_its_own_nosuid_nodev_filesystem(tmp_path: Path):
    ws = opened(tmp_path)
    try:
        line = mount_line(ws.path)
        assert line is not None, "the workspace is not a mountpoint"
        fields = line.split()
        assert fields[3] == "/"  # inside a sandbox, the mount table shows no host path
        assert {"nosuid", "nodev"} <= set(fields[5].split(","))
        assert (ws.path / "train.csv").read_text() == "id,y\n1,0\n"
        assert sorted(os.listdir(ws.path)) == ["train.csv"]  # no lost+found
        assert any("own ext4 filesystem" in n for n in ws.notes)
    finally:
        ws.close(failed=False)
    assert mount_line(ws.path) is None
    assert not (ws.path.parent / IMAGE_NAME).exists()
    assert (ws.path / "train.csv").read_text() == "id,y\n1,0\n"


def test_fallocate_cannot_outrun_the_cap(tmp_path: Path):
    ws = opened(tmp_path, disk=32 * MIB)
    try:
        fd = os.open(ws.path / "big", os.O_CREAT | os.O_WRONLY)
        with pytest.raises(OSError) as exc:
            os.posix_fallocate(fd, 0, 64 * MIB)
        os.close(fd)
        assert exc.value.errno == errno.ENOSPC
        used = sum(st.st_blocks * 512 for st in map(os.lstat, ws.path.iterdir()))
        assert used <= 32 * MIB  # ext4 kept what it could allocate: up to the cap, not past
    finally:
        hit = ws.close(failed=True)
    assert hit and ws.removed  # it filled the cap and failed: none of it stays on the host
    assert os.listdir(ws.path) == []


def test_a_flood_of_empty_files_stops_at_the_inode_cap(tmp_path: Path):
    ws = opened(tmp_path, disk=64 * MIB, inodes=500)
    made = 0
    try:
        with pytest.raises(OSError) as exc:
            for made in range(10_000):
                (ws.path / f"e{made}").touch()
        assert exc.value.errno == errno.ENOSPC
        inodes = os.statvfs(ws.path).f_files  # ext4 rounds up to whole inode tables
        assert 500 <= inodes <= 1024 and made <= inodes
    finally:
        hit = ws.close(failed=True)
    assert hit and ws.removed
    assert os.listdir(ws.path) == []  # nothing of the flood reached the host
    listing = (ws.path.parent / LISTING_NAME).read_text()
    assert listing.startswith("# ") and "entries" in listing


def test_an_agent_that_finished_at_the_cap_keeps_its_workspace(tmp_path: Path):
    ws = opened(tmp_path, disk=8 * MIB)
    with pytest.raises(OSError), open(ws.path / "fill", "wb") as f:
        f.write(b"z" * 16 * MIB)
    (ws.path / "fill").unlink()
    (ws.path / "submission.csv").write_text("id,y\n1,0.5\n")
    with open(ws.path / "fill", "wb") as f, pytest.raises(OSError):  # at the cap again
        f.write(b"z" * 16 * MIB)
    assert ws.close(failed=False) is False
    assert (ws.path / "submission.csv").read_text() == "id,y\n1,0.5\n"


def test_nothing_set_id_reaches_the_host(tmp_path: Path):
    ws = opened(tmp_path)
    (ws.path / "tool").write_bytes(b"\x7fELF")
    os.chmod(ws.path / "tool", 0o6755)
    (ws.path / "sub").mkdir()
    os.chmod(ws.path / "sub", 0o2775)
    ws.close(failed=False)
    assert stat.S_IMODE((ws.path / "tool").stat().st_mode) == 0o755
    assert not (ws.path / "sub").stat().st_mode & (stat.S_ISUID | stat.S_ISGID)
    assert any("cleared setuid/setgid" in n for n in ws.notes)


def test_the_workspace_is_handed_to_the_sandbox_user_and_back(tmp_path: Path):
    path = tmp_path / "run" / "workspace"
    (path / ".config" / "cli").mkdir(parents=True)  # a CLI's HOME config, written beforehand
    (path / ".config" / "cli" / "config.json").write_text("{}")
    (path / "train.csv").write_text("id,y\n1,0\n")
    ws = Workspace(path, 16 * MIB, 1000, owner=(65534, 65534))
    ws.open()
    assert ws.path.stat().st_uid == 65534
    assert (ws.path / "train.csv").stat().st_uid == 65534
    assert (ws.path / ".config" / "cli" / "config.json").stat().st_uid == 65534
    assert (ws.path / ".config" / "cli" / "config.json").read_text() == "{}"
    (ws.path / "made").write_text("x")
    os.chown(ws.path / "made", 65534, 65534)
    ws.close(failed=False)
    assert (ws.path / "made").stat().st_uid == os.getuid()
    assert ws.path.stat().st_uid == os.getuid()


def test_inputs_that_do_not_fit_the_cap_are_a_clear_error(tmp_path: Path):
    path = tmp_path / "run" / "workspace"
    path.mkdir(parents=True)
    (path / "train.csv").write_bytes(b"x" * 8 * MIB)
    with pytest.raises(HarnessError, match=r"do not fit its disk cap.*limits\.disk_gb"):
        Workspace(path, 4 * MIB, 100).open()
    assert (path / "train.csv").stat().st_size == 8 * MIB  # the inputs are untouched
    assert not (path.parent / IMAGE_NAME).exists()


def test_a_workspace_left_mounted_by_a_dead_harness_is_recovered(tmp_path: Path):
    ws = opened(tmp_path)
    (ws.path / "made-by-agent").write_text("kept")
    # The harness dies here: nothing closes the workspace.
    notes = recover(ws.path, ws.disk_bytes, ws.inodes)
    assert any("dead harness" in n for n in notes)
    assert mount_line(ws.path) is None
    assert not (ws.path.parent / IMAGE_NAME).exists()
    assert (ws.path / "made-by-agent").read_text() == "kept"
    assert recover(ws.path, ws.disk_bytes, ws.inodes) == []  # nothing left to do


def test_without_root_the_cap_is_polled_and_the_notes_say_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(ws_module, "filesystem_problem", lambda: "disabled by test")
    ws = opened(tmp_path, disk=1 * MIB)
    assert mount_line(ws.path) is None
    assert any("polled" in n and "disabled by test" in n for n in ws.notes)
    ws.watch(on_exceed=None)
    (ws.path / "big").write_bytes(b"q" * 2 * MIB)
    assert ws.poll is not None
    ws.poll.exceeded.wait(5)
    assert ws.exceeded
    assert ws.close(failed=True) is True and ws.removed
    assert os.listdir(ws.path) == []
