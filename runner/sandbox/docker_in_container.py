"""A harness in a container: binding what only it can see, on an engine outside it.

The Docker deployment's run containers (orchestration/deployments/README.md) start the
attempt's container on the host's engine through its socket, and the engine resolves every bind
source on the host. So the run folders are bound into the harness's container at the same
absolute paths as on the host, and ``$TMLBENCH_DOCKER_SHARED_DIR`` names one more such folder:
the harness makes its sockets there (runner/sandbox/views.py) and copies read-only folders
only it can see (the agent's code in its image, the /etc files on its tmpfs) into it for the
attempt, removed when the attempt ends (:class:`Staging`). Before the first attempt it checks
that the engine sees the workspace's folder and the shared folder as it does
(:func:`check_engine_paths`: a marker file read back by a probe container), since a bind of a
same-named but different host folder would blame an empty workspace on the agent. The host's
cgroup tree is not visible there: no cgroup parent is made, and the record notes that CPU time
and peak memory are unknown.
"""

from __future__ import annotations

import shutil
import stat
import threading
import uuid
from pathlib import Path

from runner.errors import HarnessError
from runner.sandbox.docker_engine import docker_cli
from runner.sandbox.views import SHARED_DIR_ENV, Views


class Staging:
    """Read-only folders copied into the shared folder for one attempt (a harness in a
    container: the engine cannot see its image's files). Without a shared folder, nothing."""

    def __init__(self, shared: Path | None, name: str):
        self.root = shared / f"{name}-ro" if shared else None
        self.shared = shared
        self.copies: dict[Path, Path] = {}
        self.notes: list[str] = []

    def __enter__(self) -> Staging:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)

    def visible(self, folder: Path) -> Path:
        """``folder``, or its copy where the engine sees it."""
        if self.root is None or self.shared is None or folder.is_relative_to(self.shared):
            return folder
        if folder not in self.copies:
            target = self.root / str(len(self.copies))
            self.root.mkdir(mode=0o755, parents=True, exist_ok=True)
            shutil.copytree(folder, target, symlinks=True)
            for path in [target, *target.rglob("*")]:  # readable by the sandbox user
                if not path.is_symlink():
                    mode = stat.S_IMODE(path.stat().st_mode) & 0o755 | 0o644
                    runnable = path.is_dir() or mode & 0o100
                    path.chmod(mode | 0o111 if runnable else mode)
            self.copies[folder] = target
            self.notes.append(f"read-only folder {folder} copied to {target} for the engine")
        return self.copies[folder]


class Shown:
    """How a read-only folder is bound: its view (no host path), else its engine-visible copy."""

    def __init__(self, views: Views, staging: Staging):
        self.views, self.staging = views, staging

    def view(self, folder: Path) -> Path:
        return self.staging.visible(self.views.view(folder))


_same_path_lock = threading.Lock()
_same_path_seen: set[Path] = set()


def check_engine_paths(docker: str, image: str, folders: list[Path]) -> None:
    """HarnessError unless the engine sees each of ``folders`` at the same path as we do.

    A marker file in each, read back by a probe container that binds them; once per folder
    and process. Only asked by a harness in a container (``$TMLBENCH_DOCKER_SHARED_DIR``).
    """
    with _same_path_lock:
        todo = [f for f in dict.fromkeys(folders) if f not in _same_path_seen]
        if not todo:
            return
        token = uuid.uuid4().hex
        markers = [f / f".tmlbench-engine-probe-{token}" for f in todo]
        args = ["run", "--rm", "--network", "none", "--read-only", "--cap-drop", "ALL"]
        args += ["--security-opt", "no-new-privileges", "--log-driver", "none", "--pull", "never"]
        args += ["--user", "0:0", "--entrypoint", "/bin/cat"]
        try:
            for i, (folder, marker) in enumerate(zip(todo, markers, strict=True)):
                marker.write_text(token)
                args += ["--mount", f"type=bind,source={folder},target=/probe/{i},readonly"]
            got = docker_cli(
                docker,
                *args,
                image,
                *[f"/probe/{i}/{m.name}" for i, m in enumerate(markers)],
                timeout=30,
            )
        finally:
            for marker in markers:
                marker.unlink(missing_ok=True)
        if got.returncode != 0 or got.stdout != token * len(todo):
            raise HarnessError(
                "this harness runs in a container and starts sandboxes on the Docker engine "
                f"outside it ({SHARED_DIR_ENV}), but the engine does not see "
                f"{', '.join(map(str, todo))} as this container does: bind each at the same "
                "absolute path in the container as on the Docker host (orchestration/"
                f"deployments/README.md). {(got.stderr or '').strip()[:300]}"
            )
        _same_path_seen.update(todo)
