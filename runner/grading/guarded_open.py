"""Opening the submission as untrusted data: never a symlink, FIFO or device, never past a size cap."""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from runner.agent_files import AgentFolder, describe_error, file_kind
from runner.grading.invalid import InvalidSubmission

MIN_MAX_BYTES = 64 * 1024 * 1024
BYTES_PER_ROW = 200
_HASH_BLOCK = 1 << 20  # bytes per read when a file is only hashed, not graded


def default_max_bytes(n_rows: int) -> int:
    """Size cap for a submission of ``n_rows`` rows: max(64 MiB, 200 bytes per row)."""
    return max(MIN_MAX_BYTES, BYTES_PER_ROW * int(n_rows))


def hash_submission_file(path: str | os.PathLike[str], *, max_bytes: int) -> str | None:
    """sha256 (hex) of a submission's bytes, read through the grader's guarded open.

    For attempts that are not graded (timeout, a broken cap, a provider error): the same
    checks as grading, so a symlink is never followed, a FIFO or device never opened, and
    no more than ``max_bytes`` + 1 bytes are read. None when there is no regular file of at
    most ``max_bytes`` bytes to hash (or reading it fails).
    """
    path = Path(path)

    def refuse(code: str, message: str) -> InvalidSubmission:
        return InvalidSubmission(code, message)

    def too_large(size: int) -> InvalidSubmission:
        return InvalidSubmission("too_large", f"{size:,} bytes, more than {max_bytes:,}")

    try:
        fd = open_submission(path, max_bytes, refuse, too_large)
    except (InvalidSubmission, OSError):  # OSError: its fstat failed
        return None
    digest = hashlib.sha256()
    total = 0
    try:
        for chunk in read_capped(fd, max_bytes, _HASH_BLOCK):
            digest.update(chunk)
            total += len(chunk)
    except OSError:  # e.g. EIO: no bytes we can vouch for
        return None
    finally:
        os.close(fd)
    return digest.hexdigest() if total <= max_bytes else None


def open_submission(
    path: Path,
    max_bytes: int,
    fail: Callable[[str, str], InvalidSubmission],
    too_large: Callable[[int], InvalidSubmission],
) -> int:
    """Open the submission for reading, or raise ``fail(code, message)``/``too_large(size)``.

    Returns the open file descriptor; the caller closes it.

    The name is looked at only through its folder's descriptor (``runner.agent_files``),
    never resolved: whatever it is (a link to a 300-byte name, a loop, an unreadable
    entry), the answer is a refusal, never an ``OSError``. Only a regular file of at most
    ``max_bytes`` bytes (by its size) is opened: a symlink is refused by ``lstat`` and again
    by ``O_NOFOLLOW`` (it may be swapped in between), a FIFO or device is never opened (and
    ``O_NONBLOCK`` would not let one block), and the opened file must be the one inspected.
    """
    with AgentFolder(path.parent) as folder:
        try:
            st = folder.lstat(path.name)
        except (FileNotFoundError, NotADirectoryError):
            raise fail("missing_file", f"No submission file was found at {path}.") from None
        except OSError as exc:
            raise fail(
                "unreadable_csv",
                f"The submission {path.name} cannot be inspected: {describe_error(exc)}.",
            ) from None
        mode = st.st_mode
        if stat.S_ISLNK(mode):
            raise fail(
                "not_regular_file",
                f"The submission {path.name} is a symbolic link; only a regular file is "
                "accepted (write the CSV itself, not a link to it).",
            )
        if not stat.S_ISREG(mode):
            raise fail(
                "not_regular_file",
                f"The submission {path.name} is a {file_kind(mode)}, not a regular file.",
            )
        if st.st_size > max_bytes:
            raise too_large(st.st_size)  # refused without reading a byte
        try:
            fd = folder.open_file(path.name)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EMLINK):
                raise fail(
                    "not_regular_file",
                    f"The submission {path.name} became a symbolic link while being read.",
                ) from None
            raise fail(
                "unreadable_csv",
                f"The submission {path.name} cannot be opened: {describe_error(exc)}.",
            ) from None
    try:
        fst = os.fstat(fd)
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(fst.st_mode) or (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino):
        os.close(fd)
        raise fail("not_regular_file", f"The submission {path.name} was replaced while being read.")
    return fd


def read_capped(fd: int, max_bytes: int, block: int | None = None) -> Iterator[bytes]:
    """The file's bytes in chunks (of ``block`` bytes, else as few as the kernel gives), up to
    its end or until more than ``max_bytes`` were read: the file may grow after its ``fstat``."""
    total = 0
    while total <= max_bytes:
        want = max_bytes + 1 - total
        chunk = os.read(fd, want if block is None else min(block, want))
        if not chunk:
            return
        total += len(chunk)
        yield chunk
