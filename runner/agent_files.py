"""Looking at what an agent left in a folder, without ever resolving one of its names.

After an attempt every entry of the workspace is the agent's: a name may be a symlink to a
300-byte name component, a loop, a FIFO, a socket, a folder, or carry a mode the harness
cannot read. Path-based calls resolve such a name (``Path.exists()``, ``is_file()``,
``open()`` follow symlinks) and re-raise whatever the kernel answers (ENAMETOOLONG, ELOOP,
EACCES, ...), so an agent could turn its own attempt into a harness fault: a free re-roll.

Every look at an agent's entry goes through here instead: the folder is held open by a
descriptor (``O_NOFOLLOW``) and each name in it is one component seen through that
descriptor: ``lstat`` (never following), opened with ``O_NOFOLLOW | O_NONBLOCK`` (never a
link, never blocked on a FIFO), removed by ``unlinkat``. :meth:`AgentFolder.look` never
raises; the other calls raise only ``OSError``, which the caller turns into the agent's
outcome (an invalid submission, a note), never a fault. ``runner.sandbox.treewalk`` walks
whole trees with the same flags.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import TracebackType

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO never waits for a writer; O_NOCTTY: a terminal never becomes ours.
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


@dataclass(frozen=True)
class Look:
    """What one name in an agent's folder is, seen without following it.

    ``stat`` is its ``lstat``; ``error`` says why it could not be looked at (then something
    may be there: it counts as left behind). Neither: there is no such entry.
    """

    name: str
    stat: os.stat_result | None = None
    error: OSError | None = None

    @property
    def exists(self) -> bool:
        return self.stat is not None or self.error is not None

    @property
    def is_regular_file(self) -> bool:
        return self.stat is not None and stat.S_ISREG(self.stat.st_mode)

    def kind(self) -> str:
        """What it is, in words: 'regular file', 'symbolic link', 'FIFO (named pipe)', ..."""
        if self.stat is None:
            return "unreadable entry" if self.error is not None else "missing entry"
        return file_kind(self.stat.st_mode)


class AgentFolder:
    """A folder whose entries an agent made, held open by one descriptor.

    Opening it never raises either: a folder that cannot be opened (the agent made it
    unreadable, say) makes every call about its entries fail with that ``OSError``.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.fd: int | None = None
        self.error: OSError | None = None
        try:
            self.fd = os.open(self.path, DIR_FLAGS)
        except OSError as exc:
            self.error = exc

    def __enter__(self) -> AgentFolder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def lstat(self, name: str) -> os.stat_result:
        """The entry's own ``lstat`` (a symlink is a symlink); ``FileNotFoundError`` if none."""
        return os.stat(_one_name(name), dir_fd=self._fd(), follow_symlinks=False)

    def look(self, name: str) -> Look:
        """What ``name`` is; never raises for anything the agent made."""
        try:
            return Look(name, stat=self.lstat(name))
        except (FileNotFoundError, NotADirectoryError):
            return Look(name)
        except OSError as exc:
            return Look(name, error=exc)

    def open_file(self, name: str, flags: int = FILE_FLAGS) -> int:
        """A descriptor of ``name`` opened without following it or blocking (caller closes)."""
        return os.open(_one_name(name), flags | os.O_NOFOLLOW, dir_fd=self._fd())

    def remove_file(self, name: str) -> None:
        """Remove the entry ``name`` (never a folder; a symlink itself, never its target)."""
        os.unlink(_one_name(name), dir_fd=self._fd())

    def _fd(self) -> int:
        if self.fd is None:
            if self.error is None:
                raise ValueError(f"the folder {self.path} was closed")
            raise OSError(self.error.errno, self.error.strerror, str(self.path))
        return self.fd


def read_head(root: str | os.PathLike[str], relative: str, limit: int) -> bytes | None:
    """At most ``limit`` + 1 bytes of the regular file at ``relative`` under the folder ``root``.

    ``root`` is the caller's own folder (a run folder); ``relative`` is reached from it one
    component at a time through folder descriptors: no link is followed, no ``..`` or
    absolute path leaves ``root``, nothing but a regular file is opened. None when it is
    anything else or cannot be read (for people looking at a run's files: the dashboard).
    """
    path = PurePosixPath(relative)
    if path.is_absolute() or not path.parts or ".." in path.parts:
        return None
    *folders, name = path.parts
    fd: int | None = None
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        for part in folders:
            child = os.open(part, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if not stat.S_ISREG(st.st_mode):
            return None
        file_fd = os.open(name, FILE_FLAGS, dir_fd=fd)
        try:
            if (os.fstat(file_fd).st_dev, os.fstat(file_fd).st_ino) != (st.st_dev, st.st_ino):
                return None
            chunks: list[bytes] = []
            size = 0
            while size <= limit:
                chunk = os.read(file_fd, limit + 1 - size)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            return b"".join(chunks)
        finally:
            os.close(file_fd)
    except (OSError, ValueError):  # ValueError: a NUL in a name
        return None
    finally:
        if fd is not None:
            os.close(fd)


def file_kind(mode: int) -> str:
    """An entry's type in words, from its ``lstat`` mode."""
    for test, kind in (
        (stat.S_ISREG, "regular file"),
        (stat.S_ISLNK, "symbolic link"),
        (stat.S_ISDIR, "directory"),
        (stat.S_ISFIFO, "FIFO (named pipe)"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
    ):
        if test(mode):
            return kind
    return "special file"


def describe_error(exc: OSError) -> str:
    """An ``OSError`` in words, without the (agent-chosen) path it carries."""
    return exc.strerror or type(exc).__name__


def _one_name(name: str) -> str:
    """The harness asks only about names directly in the folder, never a path through it."""
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise ValueError(f"not one entry name: {name!r}")
    return name
