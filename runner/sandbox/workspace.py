"""The attempt's workspace on the host, with a disk cap the kernel enforces.

As root (the harness's normal case), the prepared workspace is packed into a fresh ext4
image of exactly the disk cap and the inode cap (``mkfs.ext4 -d``: no copy step of ours) and
loop-mounted over the workspace folder ``nosuid,nodev``. The kernel then refuses the byte
or the file past the cap (ENOSPC) however it is written: ``fallocate``, sparse files and
floods of empty files included, with no watcher to outrun. When the attempt is over (every
process gone), what the agent left is copied out with bounded passes
(:func:`treewalk.copy_out`: no set-id bit, no fifo, no link followed, no tree deeper than
the bound), the filesystem is unmounted and its image deleted; whatever else the agent did
in there disappears with it. Inside, the workspace's mount shows ``/`` of its own device,
not a host path. A workspace the cap ended the attempt in is not copied out at all: its
listing (largest entries, with sizes) is kept beside the logs.

Without root (or without loop devices) the workspace stays a host folder: its size is
polled (:class:`DiskWatch`) and it is cleaned in place afterwards
(:func:`treewalk.sanitize_in_place`). The result's notes say which one an attempt had.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from runner.errors import HarnessError
from runner.sandbox import treewalk
from runner.sandbox.mounts import find_tool, run_tool, try_once, unmount

IMAGE_NAME = ".workspace.ext4"
STAGING_NAME = ".workspace.out"
LISTING_NAME = "workspace-listing.tsv"
MOUNT_OPTIONS = "loop,nosuid,nodev,noatime"
BYTES_PER_INODE = 8192  # never more inodes than this allows: small caps still get a valid fs
ROOM_PROBE = 1024 * 1024  # a workspace that cannot take one more MiB has reached its cap
LISTING_ROWS = 200


@dataclass
class Usage:
    """What the workspace held when the attempt ended."""

    bytes: int | None = None
    files: int | None = None
    reached_cap: bool = False  # bytes or inodes at the cap


@functools.cache
def filesystem_problem() -> str | None:
    """None if per-attempt filesystems work here; else why (then the disk cap is polled)."""
    if os.geteuid() != 0:
        return "the harness is not root (loop mounts need root)"
    for tool in ("mkfs.ext4", "mount", "umount"):
        if find_tool(tool) is None:
            return f"{tool} not found (Debian: e2fsprogs, mount)"
    if not os.path.exists("/dev/loop-control"):
        return "no /dev/loop-control (loop devices unavailable)"

    def trial(scratch: Path) -> None:
        (scratch / "workspace").mkdir()  # its image goes beside it, in the scratch folder
        fs = Filesystem(scratch / "workspace", size=4 << 20, inodes=64, owner=None)
        fs.create()
        fs.release()

    return try_once("tmlbench-fsprobe-", trial)


class Filesystem:
    """One ext4 image of ``size`` bytes and ``inodes`` files, mounted over ``mountpoint``."""

    def __init__(self, mountpoint: Path, *, size: int, inodes: int, owner: tuple[int, int] | None):
        self.mountpoint = mountpoint
        self.image = mountpoint.parent / IMAGE_NAME
        self.size = size // 4096 * 4096
        self.inodes = max(64, min(inodes, self.size // BYTES_PER_INODE))
        self.owner = owner

    def create(self) -> None:
        """Pack the mountpoint's current contents into the image and mount it there."""
        inputs = workspace_bytes(self.mountpoint)  # the harness's files: data, HOME's config
        if inputs > self.size * 0.9:
            raise HarnessError(
                f"the workspace's inputs ({inputs} bytes) do not fit its disk cap "
                f"({self.size} bytes); raise the agent's limits.disk_gb"
            )
        with open(self.image, "wb") as f:
            f.truncate(self.size)  # sparse: the host pays for what is written
        root_owner = "{}:{}".format(*(self.owner or (os.getuid(), os.getgid())))
        try:
            run_tool(
                "mkfs.ext4", "-q", "-F", "-m", "0", "-N", str(self.inodes),
                "-O", "^has_journal,^resize_inode",
                "-E", f"lazy_itable_init=1,nodiscard,root_owner={root_owner}",
                "-d", str(self.mountpoint), str(self.image),
            )  # fmt: skip
            # Now in the image; the folder becomes its mountpoint.
            for entry in os.scandir(self.mountpoint):
                treewalk.remove_tree(Path(entry.path))
            run_tool("mount", "-o", MOUNT_OPTIONS, str(self.image), str(self.mountpoint))
        except BaseException:
            self.image.unlink(missing_ok=True)
            raise
        with contextlib.suppress(OSError):
            (self.mountpoint / "lost+found").rmdir()
        if self.owner is not None:  # the harness's own prepared files (HOME's config too)
            treewalk.sanitize_in_place(self.mountpoint, treewalk.Bounds(), owner=self.owner)

    def usage(self) -> Usage:
        st = os.statvfs(self.mountpoint)
        return Usage(
            bytes=(st.f_blocks - st.f_bfree) * st.f_frsize,
            files=st.f_files - st.f_ffree,
            reached_cap=not self._has_room(),
        )

    def _has_room(self) -> bool:
        """Could one more file of ``ROOM_PROBE`` bytes be written? Asked of the kernel itself.

        Free-space counts mislead near the cap: ext4 keeps clusters in reserve for its own
        metadata, so writes fail (ENOSPC) while statvfs still shows megabytes free.
        """
        probe = self.mountpoint / f".tmlbench-room-{secrets.token_hex(8)}"
        try:
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            return exc.errno not in (errno.ENOSPC, errno.EDQUOT)
        try:
            os.posix_fallocate(fd, 0, ROOM_PROBE)
            return True
        except OSError as exc:
            return exc.errno not in (errno.ENOSPC, errno.EDQUOT)
        finally:
            os.close(fd)
            probe.unlink(missing_ok=True)

    def collect(self, bounds: treewalk.Bounds) -> treewalk.WalkReport:
        """Copy what the agent left out of the image; then the workspace is a plain folder."""
        staging = self.mountpoint.parent / STAGING_NAME
        if staging.exists():
            treewalk.remove_tree(staging)
        report = treewalk.copy_out(self.mountpoint, staging, bounds)
        self.release()
        os.rmdir(self.mountpoint)
        os.rename(staging, self.mountpoint)
        return report

    def release(self) -> None:
        """Unmount (lazily if something still holds it) and delete the image."""
        unmount(self.mountpoint)
        self.image.unlink(missing_ok=True)


def workspace_bytes(root: Path) -> int:
    """Disk blocks used under ``root`` (symlinks not followed, hard links counted once)."""
    total = 0
    seen: set[tuple[int, int]] = set()
    stack = [str(root)]
    while stack:
        top = stack.pop()
        try:
            it = os.scandir(top)
        except OSError:
            continue
        with it:
            for entry in it:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if st.st_nlink > 1 and not entry.is_dir(follow_symlinks=False):
                    key = (st.st_dev, st.st_ino)
                    if key in seen:
                        continue
                    seen.add(key)
                total += st.st_blocks * 512
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
    return total


class DiskWatch(threading.Thread):
    """Polls the workspace size; over the cap, sets ``exceeded`` and calls ``on_exceed`` at once.

    The fallback without a filesystem of the attempt's own: a poll can be outrun (fallocate
    allocates gigabytes in milliseconds) and empty files cost it nothing, which is why
    root harnesses use :class:`Filesystem`. The poll is frequent (``interval``, backed off to
    ``busy`` times the last scan's duration) and ``on_exceed`` (freezing the attempt) stops
    the writing at once instead of after a SIGTERM grace period.
    """

    def __init__(
        self,
        root: Path,
        limit: int,
        interval: float = 0.05,
        on_exceed: Callable[[], None] | None = None,
        busy: float = 20.0,
    ):
        super().__init__(name="tmlbench-diskwatch", daemon=True)
        self.root, self.limit, self.interval = root, limit, interval
        self.on_exceed, self.busy = on_exceed, busy
        self.stop = threading.Event()
        self.exceeded = threading.Event()
        self.peak = 0

    def run(self) -> None:
        wait = self.interval
        while not self.stop.wait(wait):
            started = time.monotonic()
            used = workspace_bytes(self.root)
            self.peak = max(self.peak, used)
            if used > self.limit:
                # Flag first: ``on_exceed`` may end the attempt at once (docker kills the
                # writers), and whoever sees it end must already know why.
                self.exceeded.set()
                if self.on_exceed is not None and not self.stop.is_set():
                    with contextlib.suppress(Exception):
                        self.on_exceed()
                return
            wait = max(self.interval, self.busy * (time.monotonic() - started))


class Workspace:
    """The workspace of one attempt, from before the launch to after the last process died.

    ``open()`` before the sandbox starts, ``watch(on_exceed)`` once it runs (a no-op when the
    kernel enforces the cap), ``close(failed)`` when every process is gone: it decides
    whether the disk cap ended the attempt and leaves a clean host folder (or none of what
    the agent wrote, when the cap ended it).
    """

    def __init__(
        self,
        path: Path,
        disk_bytes: int,
        inodes: int,
        *,
        owner: tuple[int, int] | None = None,
        listing_path: Path | None = None,
    ):
        self.path = Path(path)
        self.disk_bytes, self.inodes = disk_bytes, inodes
        self.owner = owner
        self.listing_path = listing_path or self.path.parent / LISTING_NAME
        self.fs: Filesystem | None = None
        self.poll: DiskWatch | None = None
        self.usage = Usage()
        self.removed = False
        self.listing: Path | None = None  # written when the workspace is removed
        self.notes: list[str] = []

    @property
    def bounds(self) -> treewalk.Bounds:
        return walk_bounds(self.disk_bytes, self.inodes)

    def open(self) -> None:
        problem = filesystem_problem()
        if problem is None:
            self.fs = Filesystem(
                self.path, size=self.disk_bytes, inodes=self.inodes, owner=self.owner
            )
            self.fs.create()
            self.notes.append(
                f"workspace: own ext4 filesystem ({self.fs.size} bytes, {self.fs.inodes} files)"
            )
            return
        self.notes.append(f"workspace: disk cap polled, not enforced by the kernel ({problem})")
        if self.owner is not None:
            treewalk.sanitize_in_place(self.path, self.bounds, owner=self.owner)

    def watch(self, on_exceed: Callable[[], None] | None) -> None:
        """Start the poll of the fallback; the kernel needs no help."""
        if self.fs is None:
            self.poll = DiskWatch(self.path, self.disk_bytes, on_exceed=on_exceed)
            self.poll.start()

    @property
    def exceeded(self) -> bool:
        """Did the poll see the workspace past its cap (the attempt is then ended at once)?"""
        return self.poll is not None and self.poll.exceeded.is_set()

    def close(self, *, failed: bool) -> bool:
        """Settle the workspace once every process is gone; True if the disk cap ended it.

        ``failed``: the agent did not end well (non-zero exit, killed, out of time). Being at
        the cap is then why, as with memory; an agent that met the cap and still finished
        keeps its workspace.
        """
        if self.poll is not None:
            self.poll.stop.set()
        if self.fs is not None:
            return self._close_filesystem(failed)
        hit = self.exceeded
        if hit:
            assert self.poll is not None  # only the poll sees the cap passed
            self.notes.append(f"workspace grew past {self.disk_bytes} bytes ({self.poll.peak})")
            self._write_listing()
            treewalk.remove_tree(self.path)
            self.path.mkdir()
            self.removed = True
        else:
            report = treewalk.sanitize_in_place(
                self.path, self.bounds, owner=(os.getuid(), os.getgid()) if self.owner else None
            )
            self.notes += report.notes("workspace")
            if not self.path.exists():
                self.path.mkdir()
                self.removed = True
        return hit

    def _close_filesystem(self, failed: bool) -> bool:
        assert self.fs is not None
        self.usage = self.fs.usage()
        hit = self.usage.reached_cap and failed
        if hit:
            self.notes.append(
                f"workspace reached its cap ({self.usage.bytes} bytes, {self.usage.files} files "
                f"of {self.fs.size} bytes, {self.fs.inodes} files)"
            )
            self._write_listing()
            self.fs.release()  # nothing the agent wrote is kept
            self.removed = True
            return True
        try:
            report = self.fs.collect(self.bounds)
        except OSError as exc:  # the host's disk, not the agent: never leave the mount behind
            self.fs.release()  # nothing the agent wrote is kept
            raise HarnessError(f"could not copy the workspace out to {self.path}: {exc}") from exc
        self.notes += report.notes("workspace")
        return False

    def _write_listing(self) -> None:
        """The largest entries of a workspace that is about to be removed, with sizes."""
        try:
            report = treewalk.listing(self.path, self.bounds, rows=LISTING_ROWS)
            with open(self.listing_path, "w", encoding="utf-8") as out:
                out.write(f"# {report.entries} entries, {report.bytes} bytes (file sizes)\n")
                out.write("bytes\tpath\n")
                for size, rel in report.largest:
                    out.write(f"{size}\t{rel!r}\n")
            self.listing = self.listing_path
            self.notes.append(f"workspace removed; its listing is in {self.listing_path.name}")
        except OSError as exc:
            self.notes.append(f"workspace removed; no listing ({exc})")

    def abandon(self) -> None:
        """After a harness fault: never leave a mount or an image behind."""
        if self.poll is not None:
            self.poll.stop.set()
        if self.fs is not None:
            try:
                self.fs.collect(self.bounds)
            except (HarnessError, OSError):  # the fault being raised matters more than this
                with contextlib.suppress(HarnessError):
                    self.fs.release()


def walk_bounds(disk_bytes: int, inodes: int) -> treewalk.Bounds:
    """How far a pass over a workspace goes: no more files or bytes than its caps allow."""
    return treewalk.Bounds(max_entries=inodes, max_bytes=disk_bytes)


def recover(path: Path, disk_bytes: int, inodes: int) -> list[str]:
    """A workspace a dead harness left mounted: copy it out and release it (crash recovery)."""
    image, staging = path.parent / IMAGE_NAME, path.parent / STAGING_NAME
    if not path.exists() and staging.is_dir():  # died between unmounting and the rename
        os.rename(staging, path)
    if not os.path.ismount(path) and not image.exists():
        return []
    fs = Filesystem(path, size=disk_bytes, inodes=inodes, owner=None)
    if os.path.ismount(path):
        report = fs.collect(walk_bounds(disk_bytes, inodes))
        return ["recovered a workspace left mounted by a dead harness", *report.notes("workspace")]
    fs.release()
    return ["removed a workspace image left by a dead harness"]
