"""Bounded passes over a tree an agent wrote: copy it out, clean it in place, remove it.

An agent controls everything under its workspace: depth (a thousand nested folders break
any recursive walk: ``os.walk`` and ``shutil.rmtree`` raise ``RecursionError`` in Python
3.11), names, symlinks pointing anywhere, hard links, sparse files, fifos and set-id bits.
Every pass here is iterative, works on directory file descriptors (so no path ever grows
past PATH_MAX and no symlink is ever followed), and is bounded: in depth (the number of
descriptors held open), in entries, in bytes and in time. What a bound cuts off is counted
and reported, never silently lost, and never a reason to raise.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from runner.agent_files import DIR_FLAGS, FILE_FLAGS

SETID = stat.S_ISUID | stat.S_ISGID
COPY_CHUNK = 8 << 20


@dataclass(frozen=True)
class Bounds:
    """How far a pass may go. ``max_bytes`` counts the data a copy writes (holes are free)."""

    max_depth: int = 64
    max_entries: int = 200_000
    max_bytes: int = 1 << 62
    max_seconds: float = 60.0


@dataclass
class WalkReport:
    """What a pass did and what its bounds left out, as counts a person can read."""

    entries: int = 0
    bytes: int = 0
    cleared_setid: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    largest: list[tuple[int, str]] = field(default_factory=list)  # (bytes, relative path)

    def notes(self, what: str) -> list[str]:
        out = []
        if self.cleared_setid:
            out.append(f"{what}: cleared setuid/setgid bits on {self.cleared_setid} file(s)")
        if self.skipped:
            parts = ", ".join(f"{n} {why}" for why, n in sorted(self.skipped.items()))
            out.append(f"{what}: left out {parts}")
        return out

    def _note_size(self, size: int, rel: str, keep: int = 20) -> None:
        self.largest.append((size, rel))
        if len(self.largest) > 4 * keep:
            self.largest = sorted(self.largest, reverse=True)[:keep]


def _entries(dir_fd: int) -> Iterator[os.DirEntry[str]]:
    with contextlib.suppress(OSError), os.scandir(dir_fd) as it:
        yield from it


def open_dir(name: str | Path, dir_fd: int | None = None) -> int:
    """A descriptor of the folder ``name`` (never through a link), entering it as its owner.

    A harness without root shares its uid with the agent, which may have taken every right
    off a folder (``chmod 000``, the workspace's own folder included): the owner may give
    them back, so a pass never stops at (or raises on) what the agent locked.
    """
    try:
        return os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    except PermissionError:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            raise
        os.chmod(name, stat.S_IMODE(st.st_mode) | 0o700, dir_fd=dir_fd, follow_symlinks=False)
        return os.open(name, DIR_FLAGS, dir_fd=dir_fd)


def _open_dir(name: str, dir_fd: int) -> int | None:
    try:
        return open_dir(name, dir_fd)
    except OSError:
        return None


class _Walk:
    """Depth-first over directory descriptors: at most ``max_depth`` + 1 are open at once."""

    def __init__(self, root_fd: int, bounds: Bounds, report: WalkReport):
        self.bounds, self.report = bounds, report
        self.deadline = time.monotonic() + bounds.max_seconds
        self.stack: list[tuple[int, str, Iterator[os.DirEntry[str]]]] = [
            (root_fd, "", _entries(root_fd))
        ]

    def __iter__(self) -> Iterator[tuple[int, str, str, os.stat_result]]:
        """(dir fd, name, relative path, lstat) of every entry, parents before children."""
        while self.stack:
            dir_fd, rel, entries = self.stack[-1]
            entry = next(entries, None)
            if entry is None:
                self.stack.pop()
                if self.stack:  # the root fd belongs to the caller
                    os.close(dir_fd)
                continue
            if time.monotonic() > self.deadline:
                self.report.skipped["entries (time bound)"] += 1
                self._abandon()
                return
            if self.report.entries >= self.bounds.max_entries:
                self.report.skipped["entries (entry bound)"] += 1
                self._abandon()
                return
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            self.report.entries += 1
            path = f"{rel}/{entry.name}" if rel else entry.name
            yield dir_fd, entry.name, path, st

    def descend(self, dir_fd: int, name: str, path: str) -> int | None:
        """Enter ``name`` (a directory just yielded); its fd, or None past the depth bound."""
        if len(self.stack) > self.bounds.max_depth:
            self.report.skipped["folders (depth bound)"] += 1
            return None
        child = _open_dir(name, dir_fd)
        if child is not None:
            self.stack.append((child, path, _entries(child)))
        return child

    def _abandon(self) -> None:
        for fd, _rel, _it in self.stack[1:]:
            os.close(fd)
        self.stack.clear()


def copy_out(src: Path, dst: Path, bounds: Bounds) -> WalkReport:
    """Copy the tree under ``src`` into the new folder ``dst``, safely and within ``bounds``.

    Regular files (holes stay holes), folders, symlinks (as links, never followed) and fifos
    are copied; sockets and devices are not; set-id bits are dropped; a second hard link to
    a copied file is not copied again (a thousand links to one big file must not cost a
    thousand copies). Ownership becomes the harness's. Files past the byte bound (bytes
    allocated) are left out.
    """
    report = WalkReport()
    src_fd = open_dir(src)
    os.mkdir(dst, (stat.S_IMODE(os.fstat(src_fd).st_mode) & 0o777) | 0o700)
    dst_fds: dict[int, int] = {}  # source dir fd -> its copy's fd
    try:
        dst_fds[src_fd] = os.open(dst, DIR_FLAGS)
        walk = _Walk(src_fd, bounds, report)
        seen: set[int] = set()
        for dir_fd, name, path, st in walk:
            _forget_closed(dst_fds, walk)
            out_fd = dst_fds[dir_fd]
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISDIR(st.st_mode):
                child = walk.descend(dir_fd, name, path)
                if child is None:
                    continue
                try:
                    os.mkdir(name, (mode & 0o777) | 0o700, dir_fd=out_fd)
                    dst_fds[child] = os.open(name, DIR_FLAGS, dir_fd=out_fd)
                except OSError:
                    report.skipped["folders (could not copy)"] += 1
                    walk.stack.pop()
                    os.close(child)
            elif stat.S_ISLNK(st.st_mode):
                with contextlib.suppress(OSError):
                    os.symlink(os.readlink(name, dir_fd=dir_fd), name, dir_fd=out_fd)
            elif stat.S_ISREG(st.st_mode):
                if st.st_nlink > 1 and st.st_ino in seen:
                    report.skipped["extra hard links"] += 1
                    continue
                seen.add(st.st_ino)
                if mode & SETID:
                    report.cleared_setid += 1
                report._note_size(st.st_size, path)
                if report.bytes + st.st_blocks * 512 > bounds.max_bytes:
                    report.skipped["files (byte bound)"] += 1
                    continue
                report.bytes += _copy_file(name, dir_fd, out_fd, mode & 0o777, st.st_size)
            elif stat.S_ISFIFO(st.st_mode):  # harmless on the host; the grader refuses it
                with contextlib.suppress(OSError):
                    os.mkfifo(name, mode & 0o777, dir_fd=out_fd)
            else:
                report.skipped["special files (socket, device)"] += 1
    finally:
        for fd in dst_fds.values():
            os.close(fd)
        os.close(src_fd)
    return report


def _forget_closed(dst_fds: dict[int, int], walk: _Walk) -> None:
    """Close the copies of source folders the walk has left (their fds may be reused)."""
    live = {fd for fd, _rel, _it in walk.stack}
    for fd in [fd for fd in dst_fds if fd not in live]:
        os.close(dst_fds.pop(fd))


def _copy_file(name: str, src_dir: int, dst_dir: int, mode: int, size: int) -> int:
    """Copy one regular file by descriptors, holes as holes; the bytes of data copied."""
    try:
        src = os.open(name, FILE_FLAGS, dir_fd=src_dir)
    except OSError:
        return 0
    try:
        dst = os.open(
            name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode, dir_fd=dst_dir
        )
    except OSError:
        os.close(src)
        return 0
    copied = 0
    try:
        for start, end in _data_extents(src, size):
            copied += _copy_range(src, dst, start, end)
        os.ftruncate(dst, size)  # trailing hole, and a file that shrank meanwhile
        os.fchmod(dst, mode)
    except OSError:
        pass
    finally:
        os.close(src)
        os.close(dst)
    return copied


def _copy_range(src: int, dst: int, start: int, end: int) -> int:
    """Copy bytes [start, end) at the same offsets; in-kernel where the filesystems allow."""
    offset = start
    in_kernel = True
    while offset < end:
        count = min(COPY_CHUNK, end - offset)
        if in_kernel:
            try:
                n = os.copy_file_range(src, dst, count, offset, offset)
            except OSError as exc:  # e.g. EXDEV between filesystems of different types
                if exc.errno not in (errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                    raise
                in_kernel = False
                continue
        else:
            data = os.pread(src, count, offset)
            n = os.pwrite(dst, data, offset) if data else 0
        if n <= 0:
            break
        offset += n
    return offset - start


def _data_extents(fd: int, size: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each stretch of data in the file, skipping holes (SEEK_DATA/SEEK_HOLE)."""
    offset = 0
    while offset < size:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # only a hole from here on
                return
            yield offset, size  # no hole support: copy the rest as it is
            return
        end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
        yield start, end
        offset = end


def listing(root: Path, bounds: Bounds, *, rows: int = 200) -> WalkReport:
    """Entries and total file size under ``root``, with the ``rows`` largest files."""
    report = WalkReport()
    root_fd = open_dir(root)
    try:
        walk = _Walk(root_fd, bounds, report)
        for dir_fd, name, path, st in walk:
            if stat.S_ISDIR(st.st_mode):
                walk.descend(dir_fd, name, path)
            elif stat.S_ISREG(st.st_mode):
                report.bytes += st.st_size
                report._note_size(st.st_size, path, keep=rows)
    finally:
        os.close(root_fd)
    report.largest = sorted(report.largest, reverse=True)[:rows]
    return report


def sanitize_in_place(
    root: Path, bounds: Bounds, *, owner: tuple[int, int] | None = None
) -> WalkReport:
    """Clear set-id bits (and, with ``owner``, hand everything to that uid/gid) under ``root``.

    For a workspace that is not on a filesystem of its own. Whatever the bounds do not reach
    (folders below ``max_depth``, entries past the other bounds) is removed, so nothing
    unvisited stays on the host: reported in the ``skipped`` counts.
    """
    report = WalkReport()
    root_fd = open_dir(root)
    try:
        if owner is not None:
            with contextlib.suppress(OSError):
                os.fchown(root_fd, *owner)
        walk = _Walk(root_fd, bounds, report)
        for dir_fd, name, path, st in walk:
            if stat.S_ISLNK(st.st_mode):
                if owner is not None:
                    with contextlib.suppress(OSError):
                        os.chown(name, *owner, dir_fd=dir_fd, follow_symlinks=False)
                continue
            if owner is not None:
                with contextlib.suppress(OSError):
                    os.chown(name, *owner, dir_fd=dir_fd, follow_symlinks=False)
            if st.st_mode & SETID:
                with contextlib.suppress(OSError):
                    os.chmod(
                        name,
                        stat.S_IMODE(st.st_mode) & ~SETID,
                        dir_fd=dir_fd,
                        follow_symlinks=False,
                    )
                    report.cleared_setid += 1
            if stat.S_ISDIR(st.st_mode) and walk.descend(dir_fd, name, path) is None:
                # Below the depth bound: nothing there may stay unvisited on the host.
                with contextlib.suppress(OSError):
                    remove_tree_at(dir_fd, name)
        if report.skipped and (report.skipped.keys() - {"folders (depth bound)"}):
            report.skipped["whole workspace removed (unvisited entries)"] += 1
    finally:
        os.close(root_fd)
    if report.skipped["whole workspace removed (unvisited entries)"]:
        remove_tree(root)
    return report


def remove_tree(path: Path) -> None:
    """Remove ``path`` and everything under it, at any depth, never following a link."""
    parent = os.open(path.parent, DIR_FLAGS)
    try:
        remove_tree_at(parent, path.name)
    finally:
        os.close(parent)


def remove_tree_at(parent_fd: int, name: str) -> None:
    """Remove the entry ``name`` of the folder ``parent_fd``, flattening as it goes.

    Every sub-folder found is first renamed up into the folder being removed (same
    filesystem, so a rename), so however deep the tree, at most two descriptors are open and
    nothing recurses.
    """
    try:
        st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=parent_fd)
        return
    top = open_dir(name, parent_fd)
    token = secrets.token_hex(8)  # flattened names an agent cannot have prepared
    try:
        pending: list[str | None] = [None]  # None: ``top`` itself; else a folder inside it
        moved = 0
        while pending:
            sub = pending.pop()
            fd = top if sub is None else _open_dir(sub, top)
            if fd is None:
                continue
            try:
                for entry in list(_entries(fd)):
                    if not entry.is_dir(follow_symlinks=False):
                        with contextlib.suppress(OSError):
                            os.unlink(entry.name, dir_fd=fd)
                    elif fd == top:
                        pending.append(entry.name)
                    else:
                        moved += 1
                        flat = f".tmlbench-rm-{token}-{moved}"
                        with contextlib.suppress(OSError):
                            os.rename(entry.name, flat, src_dir_fd=fd, dst_dir_fd=top)
                            pending.append(flat)
            finally:
                if fd != top:
                    os.close(fd)
            if sub is not None:
                with contextlib.suppress(OSError):
                    os.rmdir(sub, dir_fd=top)
    finally:
        os.close(top)
    os.rmdir(name, dir_fd=parent_fd)
