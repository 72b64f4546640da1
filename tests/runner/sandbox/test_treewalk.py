"""Bounded passes over agent-made trees: deep, linked, set-id, sparse, flooded; none may raise."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.sandbox.treewalk import Bounds, copy_out, listing, remove_tree, sanitize_in_place

DEPTH = 3000  # far past Python's recursion limit and PATH_MAX (2 bytes per level + slash)


@pytest.fixture(autouse=True)
def _remove_deep_trees(tmp_path: Path):
    """pytest's own clean-up (shutil.rmtree) recurses: deep trees must be gone before it."""
    yield
    for child in tmp_path.iterdir():
        remove_tree(child)


def deep_tree(root: Path, depth: int = DEPTH, *, leaf_mode: int = 0o4755) -> None:
    """``root/d/d/.../d/leaf`` built by descriptors (the path is longer than PATH_MAX)."""
    root.mkdir()
    fd = os.open(root, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = child
    leaf = os.open("leaf", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(leaf, b"x")
    os.fchmod(leaf, leaf_mode)
    os.close(leaf)
    os.close(fd)


def setid_files(root: Path) -> list[str]:
    found = []
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            if os.lstat(os.path.join(top, name)).st_mode & (stat.S_ISUID | stat.S_ISGID):
                found.append(os.path.join(top, name))
    return found


def test_copy_out_of_a_deep_tree_stops_at_the_depth_bound(tmp_path: Path):
    deep_tree(tmp_path / "src")
    (tmp_path / "src" / "top.bin").write_bytes(b"kept")
    report = copy_out(tmp_path / "src", tmp_path / "out", Bounds(max_depth=10))
    assert (tmp_path / "out" / "top.bin").read_bytes() == b"kept"
    assert (tmp_path / "out" / Path(*["d"] * 10)).is_dir()
    assert not (tmp_path / "out" / Path(*["d"] * 11)).exists()
    assert report.skipped["folders (depth bound)"] == 1
    assert any("depth bound" in n for n in report.notes("workspace"))


def test_copy_out_drops_setid_keeps_links_unfollowed_and_fifos(tmp_path: Path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "tool").write_bytes(b"#!/bin/sh\n")
    os.chmod(src / "tool", 0o6755)
    outside = tmp_path / "outside-secret"
    outside.write_text("secret")
    os.symlink(outside, src / "link")
    os.symlink("/", src / "root-link")
    os.mkfifo(src / "pipe")
    os.link(src / "tool", src / "tool-again")
    report = copy_out(src, tmp_path / "out", Bounds())
    out = tmp_path / "out"
    assert not setid_files(out)
    copied = [n for n in ("tool", "tool-again") if (out / n).exists()]
    assert len(copied) == 1 and stat.S_IMODE((out / copied[0]).stat().st_mode) == 0o755
    assert os.readlink(out / "link") == str(outside)  # a link, never its target's bytes
    assert stat.S_ISFIFO(os.lstat(out / "pipe").st_mode)
    assert report.cleared_setid == 1 and report.skipped["extra hard links"] == 1


def test_copy_out_keeps_holes_and_respects_the_byte_bound(tmp_path: Path):
    src = tmp_path / "src"
    src.mkdir()
    with open(src / "sparse", "wb") as f:
        f.truncate(4 << 30)  # 4 GiB apparent, nothing allocated
        f.seek(1 << 30)
        f.write(b"y" * 4096)
    (src / "a").write_bytes(b"a" * 300_000)
    (src / "b").write_bytes(b"b" * 300_000)
    report = copy_out(src, tmp_path / "out", Bounds(max_bytes=400_000))
    out = tmp_path / "out"
    assert (out / "sparse").stat().st_size == 4 << 30
    assert (out / "sparse").stat().st_blocks * 512 < 1 << 20  # the hole stayed a hole
    with open(out / "sparse", "rb") as f:
        f.seek(1 << 30)
        assert f.read(4096) == b"y" * 4096
    assert [(out / n).exists() for n in "ab"].count(True) == 1
    assert report.skipped["files (byte bound)"] == 1


def test_copy_out_stops_at_the_entry_bound(tmp_path: Path):
    src = tmp_path / "src"
    src.mkdir()
    for i in range(50):
        (src / f"f{i}").touch()
    report = copy_out(src, tmp_path / "out", Bounds(max_entries=20))
    assert report.entries == 20 and len(os.listdir(tmp_path / "out")) == 20
    assert report.skipped["entries (entry bound)"] == 1


def test_sanitize_in_place_clears_setid_and_removes_what_is_too_deep(tmp_path: Path):
    root = tmp_path / "ws"
    deep_tree(root, depth=200)
    (root / "suid").write_bytes(b"x")
    os.chmod(root / "suid", 0o4755)
    os.symlink("/etc/passwd", root / "link")
    report = sanitize_in_place(root, Bounds(max_depth=50))
    assert not setid_files(root)
    assert stat.S_IMODE((root / "suid").stat().st_mode) == 0o755
    assert (root / Path(*["d"] * 50)).is_dir()
    assert not (root / Path(*["d"] * 51)).exists()  # unvisited: removed, not left behind
    assert os.readlink(root / "link") == "/etc/passwd"
    assert report.cleared_setid == 1


def test_sanitize_in_place_hands_the_tree_to_an_owner_without_following_links(tmp_path: Path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "f").write_text("x")
    target = tmp_path / "not-ours"
    target.write_text("y")
    os.symlink(target, root / "link")
    sanitize_in_place(root, Bounds(), owner=(65534, 65534))
    assert (root / "f").stat().st_uid == 65534 and root.stat().st_uid == 65534
    assert os.lstat(root / "link").st_uid == 65534
    assert target.stat().st_uid == os.getuid()  # the link's target was not touched


def test_remove_tree_takes_any_depth_and_never_follows_links(tmp_path: Path):
    deep_tree(tmp_path / "ws", depth=2500)
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "precious").write_text("p")
    os.symlink(keep, tmp_path / "ws" / "link-to-keep")
    remove_tree(tmp_path / "ws")
    assert not (tmp_path / "ws").exists()
    assert (keep / "precious").read_text() == "p"


def test_listing_names_the_largest_files(tmp_path: Path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "big").write_bytes(b"b" * 10_000)
    (root / "small").write_bytes(b"s")
    (root / "sub").mkdir()
    (root / "sub" / "mid").write_bytes(b"m" * 100)
    report = listing(root, Bounds(), rows=2)
    assert report.largest == [(10_000, "big"), (100, "sub/mid")]
    assert report.bytes == 10_101


@pytest.mark.parametrize("bounds", [Bounds(max_seconds=0.0), Bounds(max_entries=0)])
def test_a_pass_out_of_budget_reports_instead_of_raising(tmp_path: Path, bounds: Bounds):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "f").touch()
    report = copy_out(root, tmp_path / "out", bounds)
    assert report.entries == 0 and sum(report.skipped.values()) == 1


@contextlib.contextmanager
def as_owner_of(root: Path) -> Iterator[None]:
    """Be a harness without root that owns ``root`` (as when it shares its uid with the agent).

    As root: the tree goes to uid 65534 and this process takes that uid as its effective one
    (which drops the capabilities that let root ignore modes) until the block ends.
    """
    if os.geteuid() != 0:
        yield
        return
    for top, dirs, files in os.walk(root):
        for name in [top, *(os.path.join(top, n) for n in dirs + files)]:
            os.chown(name, 65534, 65534, follow_symlinks=False)
    os.setegid(65534)
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


def locked_workspace(root: Path) -> None:
    """What an agent sharing the harness's uid may leave: folders it took every right off."""
    (root / "locked" / "inner").mkdir(parents=True)
    (root / "locked" / "inner" / "f").write_bytes(b"x" * 10)
    (root / "submission.csv").write_bytes(b"id,y\n")
    os.chmod(root / "locked" / "inner", 0)
    os.chmod(root / "locked", 0)
    os.chmod(root, 0)  # the workspace's own folder too


def test_a_harness_without_root_enters_what_the_agent_locked():
    # Not under pytest's tmp_path: its folders are root's alone, out of the owner's reach.
    parent = Path(tempfile.mkdtemp(prefix="tmlbench-locked-"))
    os.chmod(parent, 0o755)
    root = parent / "ws"
    root.mkdir()
    locked_workspace(root)
    try:
        with as_owner_of(parent):
            assert listing(root, Bounds()).bytes == 15  # every file reached
            sanitize_in_place(root, Bounds())
            assert os.listdir(root / "locked" / "inner") == ["f"]
            remove_tree(root)
        assert not root.exists()
    finally:
        with contextlib.suppress(FileNotFoundError):
            remove_tree(root)
        parent.rmdir()
