"""Finding and reading run-record files: a scan that stats, never parses, and bounded reads.

A load compares every ``record.json`` a scan finds with ``raw.record_files``, the index of the
files already loaded (path, size, mtime, ctime, inode, content hash): only files that are new or
whose stat changed are read (``warehouse.record_index``). The scan is one ``lstat`` per run folder.

Records are written by the harness, but a run folder also holds what an agent left behind, so
files are read as untrusted input: never through a symbolic link, only regular files, at most
``RECORD_MAX_BYTES`` each. A folder holding run folders may hold a suite's resumption log
(``runner.suites.resumptions``): the scan notes where it looked for one, and the log is read the same way.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from runner.attempts import RECORD_FILE, WORKSPACE_DIR
from runner.errors import TmlbenchError
from runner.suites import RESUMPTIONS_FILE

# A record is a few kilobytes (the demo suite's are ~2.5 KB); anything this large is not one.
RECORD_MAX_BYTES = 4 * 2**20
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True, slots=True)
class ReadFile:
    """One record file's bytes, their sha256 and its stat from the scan (taken before the read:
    a file changed since has another stat on the next scan, which reads it again)."""

    path: str
    data: bytes
    sha256: str
    stat: os.stat_result


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A record file that was not read, and the message that says why (it names the file)."""

    path: str
    message: str


@dataclass
class ScannedFiles:
    """What a scan found: the record files and their ``lstat``, in no particular order.

    ``st_ctime_ns`` changes on every write and cannot be set from user space (``touch`` sets
    mtime only), so an edit that keeps size and mtime still changes the stat.
    """

    paths: list[str]
    stats: list[os.stat_result]
    # every folder searched for run folders, where a resumption log of its runs would be
    folders: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.paths)


def scan_record_files(runs_dir: Path, prefixes: Sequence[str] | None = None) -> ScannedFiles:
    """Every ``record.json`` under ``runs_dir`` with its stat (nothing is read).

    The rules of ``runner.attempts.records.iter_record_paths``: a folder holding a ``record.json`` or a
    ``workspace/`` is a run folder and is never descended into (an agent may write a
    record.json in its workspace); any other folder is searched, at any depth. Symbolic links to
    folders are not followed. With ``prefixes``, only run folders whose paths below
    ``runs_dir`` start with one of them are looked at: ``name`` for folders directly under it,
    ``sub/name`` for those in its folder ``sub`` (one setting's run folders, say).
    """
    root = os.fspath(runs_dir)
    found: list[tuple[str, os.stat_result]] = []
    folders: list[str] = []
    if prefixes is None:
        if not _run_folder(root, found):
            _scan_tree(root, found, folders)
        return ScannedFiles([path for path, _ in found], [st for _, st in found], folders)
    by_folder: dict[str, list[str]] = {}
    for prefix in prefixes:
        folder, _, name = prefix.rpartition("/")
        if not name or prefix.startswith("/") or ".." in folder.split("/"):
            raise TmlbenchError(f"{prefix!r} is not a run-folder prefix below {root}")
        by_folder.setdefault(folder, []).append(name)
    for folder, names in by_folder.items():
        parent = os.path.join(root, folder) if folder else root
        if folder and (not os.path.isdir(parent) or os.path.islink(parent)):
            continue  # nothing was run there yet (and links are never followed)
        folders.append(parent)
        wanted = tuple(names)
        with os.scandir(parent) as entries:
            run_folders = [
                e.path
                for e in entries
                if e.name.startswith(wanted) and e.is_dir(follow_symlinks=False)
            ]
        for path in run_folders:
            _run_folder(path, found)
    return ScannedFiles([path for path, _ in found], [st for _, st in found], folders)


_RECORD = os.sep + RECORD_FILE
_WORKSPACE = os.sep + WORKSPACE_DIR


def _scan_tree(folder: str, found: list[tuple[str, os.stat_result]], folders: list[str]) -> None:
    # The hot loop of a reload (one turn per run folder): string concatenation and a bare lstat.
    folders.append(folder)
    with os.scandir(folder) as entries:
        subfolders = [e.path for e in entries if e.is_dir(follow_symlinks=False)]
    lstat, lexists, append = os.lstat, os.path.lexists, found.append
    for path in subfolders:
        record = path + _RECORD
        try:
            append((record, lstat(record)))
        except FileNotFoundError:
            if not lexists(path + _WORKSPACE):
                _scan_tree(path, found, folders)
        except NotADirectoryError:
            pass


def _run_folder(folder: str, found: list[tuple[str, os.stat_result]]) -> bool:
    """Note the folder's record if it has one; is it a run folder (record, or a workspace)?"""
    record = folder.rstrip(os.sep) + _RECORD
    try:
        found.append((record, os.lstat(record)))
    except FileNotFoundError:
        return os.path.lexists(folder.rstrip(os.sep) + _WORKSPACE)
    except NotADirectoryError:
        return False
    return True


def read_record_file(
    path: str, st: os.stat_result, limit: int | None = None, what: str = "a run record"
) -> ReadFile | Unreadable:
    """The file's bytes if its stat says it is a regular file of at most ``limit`` bytes
    (default ``RECORD_MAX_BYTES``), opened by ``open_regular_file`` (so a link, FIFO or device
    put there since the stat is refused too). ``what`` the file should be, for the messages."""
    limit = RECORD_MAX_BYTES if limit is None else limit
    if stat.S_ISLNK(st.st_mode):
        return Unreadable(path, f"{path}: is a symbolic link; {_LINKS}")
    if not stat.S_ISREG(st.st_mode):
        return Unreadable(path, f"{path}: not a regular file")
    if st.st_size > limit:
        return Unreadable(path, _too_large(path, st.st_size, limit, what))
    fd = open_regular_file(path, what)
    if isinstance(fd, Unreadable):
        return fd
    try:
        data = _read_at_most(fd, st.st_size + 1, limit + 1)
    except OSError as exc:
        return Unreadable(path, f"{path}: cannot read: {exc.strerror or exc}")
    finally:
        os.close(fd)
    if len(data) > limit:  # it grew since the stat
        return Unreadable(path, f"{path}: more than {limit:,} bytes is too large for {what}")
    return ReadFile(path, data, hashlib.sha256(data).hexdigest(), st)


def open_regular_file(path: str, what: str, limit: int | None = None) -> int | Unreadable:
    """A read-only descriptor of the regular file at ``path``, never through a symbolic link.

    Opened with O_NOFOLLOW (a link is refused, not followed) and O_NONBLOCK (opening a FIFO
    does not wait for a writer), then ``fstat``: only a regular file of at most ``limit`` bytes
    (when given) is kept, so a FIFO, socket or device (``/dev/zero`` reads without end) is never
    read. The caller closes the descriptor.
    """
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return Unreadable(path, f"{path}: is a symbolic link; {_LINKS}")
        return Unreadable(path, f"{path}: cannot read: {exc.strerror or exc}")
    try:
        st = os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        return Unreadable(path, f"{path}: cannot read: {exc.strerror or exc}")
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        return Unreadable(path, f"{path}: not a regular file")
    if limit is not None and st.st_size > limit:
        os.close(fd)
        return Unreadable(path, _too_large(path, st.st_size, limit, what))
    return fd


def _too_large(path: str, size: int, limit: int, what: str) -> str:
    return f"{path}: {size:,} bytes is too large for {what} (at most {limit:,})"


def resumption_log(folder: str) -> tuple[str, os.stat_result] | None:
    """The folder's resumption log and its ``lstat``, if it has one (a link is found, and refused
    when read)."""
    path = os.path.join(folder, RESUMPTIONS_FILE)
    try:
        return path, os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


_LINKS = "links are never followed"


def _read_at_most(fd: int, expected: int, limit: int) -> bytes:
    """Up to ``limit`` bytes; the first read asks for ``expected`` (a buffer of the file's size,
    not of the limit, is what each read allocates)."""
    data = os.read(fd, min(expected, limit))
    if len(data) < expected:
        return data  # end of file
    parts = [data]
    size = len(data)
    while size < limit:
        part = os.read(fd, min(limit - size, 1 << 20))
        if not part:
            break
        parts.append(part)
        size += len(part)
    return b"".join(parts)
