"""Running the system's mount tools (mkfs.ext4, mount, umount) for the sandbox's filesystems.

One place for how they are found (they live in sbin, often not on PATH), how long they may
take, and how their failure reads: a :class:`HarnessError` naming the command and its words.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from runner.errors import HarnessError

TOOL_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
TOOL_TIMEOUT = 60.0


def try_once(prefix: str, trial: Callable[[Path], None]) -> str | None:
    """Run ``trial`` in a scratch folder: None if it worked, else its HarnessError's words.

    How a kind of mount is probed before the first attempt relies on it.
    """
    scratch = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        trial(scratch)
    except HarnessError as exc:
        return str(exc)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return None


def find_tool(name: str) -> str | None:
    return shutil.which(name, path=TOOL_PATH)


def run_tool(*argv: str, fds: tuple[int, ...] = ()) -> None:
    """Run ``argv`` (its first word looked up in sbin too), inheriting ``fds``; raise on failure."""
    exe = find_tool(argv[0]) or argv[0]
    try:
        proc = subprocess.run(
            [exe, *argv[1:]],
            capture_output=True,
            text=True,
            timeout=TOOL_TIMEOUT,
            check=False,
            pass_fds=fds,
            env={"PATH": TOOL_PATH, "LC_ALL": "C"},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HarnessError(f"`{argv[0]}` failed: {exc}") from exc
    if proc.returncode != 0:
        why = (proc.stderr or proc.stdout).strip().replace("\n", "; ")[:500]
        raise HarnessError(f"`{' '.join(argv[:3])} ...` failed (exit {proc.returncode}): {why}")


def unmount(target: Path) -> None:
    """Unmount ``target`` (lazily if something still holds it); nothing if it is not mounted."""
    if not os.path.ismount(target):
        return
    try:
        run_tool("umount", str(target))
    except HarnessError:
        run_tool("umount", "-l", str(target))
