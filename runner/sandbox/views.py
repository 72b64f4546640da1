"""Host folders shown to a sandbox without their host paths.

A bind mount's line in ``/proc/self/mountinfo`` names the folder's path on its filesystem
(field 4, "root"): bound as it is, the venv shows up inside as ``/home/alice/tmlbench/.venv``
and the agent folder as wherever the clone lives. Two ways out, both giving the sandbox a
mount whose root is ``/`` of a filesystem of its own:

- read-only folders get a *view*: an overlay mount (the folder plus an empty layer) made by
  the harness for the attempt. Its layers are named by ``/proc/self/fd/N`` descriptors of
  the ``mount`` process, so even the overlay's options show no path;
- folders the harness makes for an attempt (unix-socket control folders, synthesized /etc
  files) live on a tmpfs (``/dev/shm``) instead: their root is a random name on that tmpfs.
  Sockets cannot go through an overlay (connect() is refused there).

Views need root (``mount``); without it folders are bound as they are, and the notes say so.
The workspace needs neither: it is a filesystem of its own (runner/sandbox/workspace.py).

A harness that itself runs in a container and starts docker sandboxes on the host's engine
(the Docker deployment's run containers) names ``$TMLBENCH_DOCKER_SHARED_DIR``: a folder it
sees at the same path as the engine does. Its private folders are made there instead of on
its own /dev/shm, which the engine cannot see (runner/sandbox/docker_in_container.py).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import shutil
import stat
import tempfile
import threading
from pathlib import Path

from runner.sandbox.mounts import find_tool, run_tool, try_once, unmount

VIEWS_NAME = ".views"  # beside the workspace, in the run's own folder
SHARED_DIR_ENV = "TMLBENCH_DOCKER_SHARED_DIR"


def shared_dir() -> Path | None:
    """The folder this process and the Docker engine see at the same path, if one is named.

    Set only where the harness runs in a container of the engine it starts sandboxes on;
    read when a folder is made, so a deployment sets it in the environment of its runs.
    """
    value = os.environ.get(SHARED_DIR_ENV)
    return Path(value) if value else None


@functools.cache
def tmpfs_dir() -> str | None:
    """/dev/shm when it is a tmpfs (almost always on Linux): folders there name no host path."""
    try:
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            if left.split()[4] == "/dev/shm" and right.split()[0] == "tmpfs":
                return "/dev/shm"
    except (OSError, IndexError):
        pass
    return None


def private_dir(prefix: str) -> Path:
    """A new 0700 folder for what the harness shares with one sandbox (its control sockets).

    On a tmpfs (its mount line names no host path), or in the shared folder of a harness
    whose docker sandboxes are started by an engine outside its container.
    """
    shared = shared_dir()
    if shared is not None:
        shared.mkdir(mode=0o711, parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=str(shared) if shared else tmpfs_dir()))


class SynthesizedFiles:
    """Small files the harness writes for every sandbox (e.g. /etc/passwd), kept on a tmpfs.

    Made once per process (and again if someone removed them), removed at exit. Always on
    this process's own tmpfs, never in the shared folder: removal at exit is best effort (a
    killed harness skips it), and a harness in a container stages what the engine must see
    per attempt instead (runner/sandbox/docker_in_container.py), removed when it ends.
    """

    def __init__(self, prefix: str, files: dict[str, str]):
        self.prefix, self.files = prefix, files
        self._lock = threading.Lock()
        self._folder: Path | None = None

    def folder(self) -> Path:
        with self._lock:
            folder = self._folder
            if folder is None or not all((folder / n).is_file() for n in self.files):
                folder = Path(tempfile.mkdtemp(prefix=self.prefix, dir=tmpfs_dir()))
                folder.chmod(0o755)
                for name, text in self.files.items():
                    (folder / name).write_text(text)
                    (folder / name).chmod(0o644)
                atexit.register(shutil.rmtree, folder, True)
                self._folder = folder
            return folder


def _on_tmpfs(folder: Path) -> bool:
    """Made by :func:`private_dir`: its mount line shows only a random name on the tmpfs."""
    shm = tmpfs_dir()
    return shm is not None and str(folder).startswith(shm + "/")


def has_sockets(folder: Path) -> bool:
    with contextlib.suppress(OSError), os.scandir(folder) as it:
        return any(stat.S_ISSOCK(e.stat(follow_symlinks=False).st_mode) for e in it)
    return False


@functools.cache
def views_problem() -> str | None:
    """None if overlay views can be made here; else why not (folders are then bound as is)."""
    if os.geteuid() != 0:
        return "the harness is not root"
    if find_tool("mount") is None:
        return "mount not found"

    def trial(scratch: Path) -> None:
        (scratch / "folder").mkdir()
        with Views(scratch / "views") as views:
            views.view(scratch / "folder")

    return try_once("tmlbench-viewprobe-", trial)


class Views:
    """Read-only overlay views of host folders for one attempt, mounted under ``root``.

    ``view(folder)`` returns the folder to bind instead of ``folder`` (the same folder when
    views are unavailable or it holds sockets). ``close()`` unmounts them all.
    """

    def __init__(self, root: Path, *, enabled: bool = True):
        self.root = root
        self.enabled = enabled
        self.mounted: dict[Path, Path] = {}
        self.notes: list[str] = []

    @classmethod
    def for_attempt(cls, workspace: Path) -> Views:
        """The views of the attempt whose workspace this is (in its run folder); disabled,
        with a note saying why, where views cannot be made."""
        problem = views_problem()
        views = cls(Path(workspace).parent / VIEWS_NAME, enabled=problem is None)
        if problem:
            views.notes.append(f"folders bound with their host paths ({problem})")
        return views

    def __enter__(self) -> Views:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def view(self, folder: Path) -> Path:
        folder = Path(folder).resolve()
        if not self.enabled or _on_tmpfs(folder) or has_sockets(folder):
            return folder  # already neutral, or sockets (unreachable through an overlay)
        if folder in self.mounted:
            return self.mounted[folder]
        if not self.mounted:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            (self.root / "empty").mkdir(exist_ok=True)
        target = self.root / str(len(self.mounted))
        target.mkdir()
        _overlay(folder, self.root / "empty", target)
        self.mounted[folder] = target
        return target

    def close(self) -> None:
        self.mounted.clear()
        release(self.root)


NO_VIEWS = Views(Path("/nonexistent/tmlbench-views"), enabled=False)  # binds folders as they are


def release(root: Path) -> None:
    """Unmount every view under ``root`` and remove it (also what a dead harness left)."""
    if not root.is_dir():
        return
    for child in sorted(root.iterdir(), reverse=True):
        unmount(child)
        with contextlib.suppress(OSError):
            child.rmdir()
    with contextlib.suppress(OSError):
        root.rmdir()


def _overlay(lower: Path, empty: Path, target: Path) -> None:
    """Mount a read-only overlay of ``lower`` at ``target``, its layers named by descriptor."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
    fds = [os.open(lower, flags), os.open(empty, flags)]
    try:
        layers = ":".join(f"/proc/self/fd/{fd}" for fd in fds)
        run_tool(
            "mount",
            "-t",
            "overlay",
            "overlay",
            "-o",
            f"ro,lowerdir={layers}",
            str(target),
            fds=tuple(fds),
        )
    finally:
        for fd in fds:
            os.close(fd)
