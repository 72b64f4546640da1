"""Views: host folders shown to a sandbox through mounts that name no host path (for real)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from runner.sandbox.views import Views, private_dir, release, tmpfs_dir, views_problem


@pytest.fixture(autouse=True)
def _needs_views() -> None:
    problem = views_problem()
    if problem:
        pytest.fail(f"views must work here (root, overlayfs): {problem}")


def mount_line(target: Path) -> str:
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        if line.split()[4] == str(target):
            return line
    raise AssertionError(f"{target} is not a mountpoint")


def test_a_view_shows_the_folder_read_only_and_names_no_host_path(tmp_path: Path):
    folder = tmp_path / "agent-code"
    folder.mkdir()
    (folder / "agent.py").write_text("print('hi')\n")
    with Views(tmp_path / "views") as views:
        shown = views.view(folder)
        assert shown != folder and views.view(folder) == shown  # one view per folder
        assert (shown / "agent.py").read_text() == "print('hi')\n"
        with pytest.raises(OSError):
            (shown / "new").write_text("x")
        line = mount_line(shown)
        assert line.split()[3] == "/"
        assert str(tmp_path) not in line.split(" - ")[1]  # the overlay's options neither
    assert not (tmp_path / "views").exists()
    assert (folder / "agent.py").is_file()


def test_folders_with_sockets_and_tmpfs_folders_are_bound_as_they_are(tmp_path: Path):
    sockets = tmp_path / "control"
    sockets.mkdir()
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sockets / "s.sock"))
    private = private_dir("tmlbench-test-")
    try:
        with Views(tmp_path / "views") as views:
            assert views.view(sockets) == sockets  # connect() fails through an overlay
            assert views.view(private) == private
    finally:
        server.close()
        private.rmdir()


def test_private_dirs_live_on_a_tmpfs():
    assert tmpfs_dir() == "/dev/shm"
    folder = private_dir("tmlbench-test-")
    try:
        assert str(folder).startswith("/dev/shm/tmlbench-test-")
        assert oct(folder.stat().st_mode & 0o777) == "0o700"
    finally:
        folder.rmdir()


def test_release_clears_views_a_dead_harness_left(tmp_path: Path):
    folder = tmp_path / "venv"
    folder.mkdir()
    views = Views(tmp_path / "views")
    shown = views.view(folder)
    assert os.path.ismount(shown)
    # The harness dies here: nobody closes the views.
    release(tmp_path / "views")
    assert not os.path.ismount(shown) and not (tmp_path / "views").exists()
    release(tmp_path / "views")  # nothing left: a no-op


def test_disabled_views_bind_folders_as_they_are(tmp_path: Path):
    with Views(tmp_path / "views", enabled=False) as views:
        assert views.view(tmp_path) == tmp_path.resolve()
    assert not (tmp_path / "views").exists()
