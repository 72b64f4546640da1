"""The Docker engine as the docker sandbox uses it: its CLI, its health, and orphans.

Containers are labelled with the harness's pid, its start time and the boot id, so the
first DockerSandbox of a process removes containers a crashed harness left behind.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from pathlib import Path

from runner.errors import HarnessError
from runner.sandbox.docker_cgroups import remove_cgroup_parent

IMAGE = "tmlbench-agent:latest"
LABEL = "tmlbench.attempt"
ENGINE_HINT = (
    "start the Docker engine with `make docker-engine` (installs docker.io and starts dockerd)"
)
IMAGE_HINT = "build the agent runtime image with `make docker-image`"
CLI_TIMEOUT = 60.0  # seconds for docker create/inspect/rm; kill gets less


def docker_cli(
    docker: str, *args: str, timeout: float = CLI_TIMEOUT
) -> subprocess.CompletedProcess[str]:
    """``docker ARGS`` (output captured as text); HarnessError if the engine does not answer."""
    try:
        return subprocess.run(
            [docker, *args], capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise HarnessError(
            f"`docker {' '.join(args[:2])}` did not answer in {timeout:.0f} s; {ENGINE_HINT}"
        ) from exc
    except OSError as exc:
        raise HarnessError(f"cannot run the docker CLI ({docker}): {exc}") from exc


def docker_problem(image: str = IMAGE, docker: str | None = None) -> str | None:
    """None if the engine answers and ``image`` exists; otherwise what to do about it."""
    exe = docker or shutil.which("docker")
    if exe is None:
        return f"the docker CLI is not on PATH; {ENGINE_HINT}"
    try:
        ver = docker_cli(exe, "version", "--format", "{{.Server.Version}}", timeout=15)
    except HarnessError as exc:
        return str(exc)
    if ver.returncode != 0:
        why = (ver.stderr or ver.stdout).strip().splitlines()[-1:] or ["no answer"]
        return f"the Docker engine is not reachable ({why[0]}); {ENGINE_HINT}"
    img = docker_cli(exe, "image", "inspect", "--format", "{{.Id}}", image, timeout=15)
    if img.returncode != 0:
        return f"the docker sandbox image {image} is missing; {IMAGE_HINT}"
    return None


# -- who we are (labels) and orphans -------------------------------------------------------


def boot_id() -> str:
    """This boot's id: a harness pid from another boot names no live process."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def start_ticks(pid: int) -> str | None:
    """A process's start time (clock ticks since boot): with the pid, it names one process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()[19]


def _harness_alive(pid: str, start: str, boot: str) -> bool:
    if boot != boot_id() or not pid.isdigit():
        return False
    return start_ticks(int(pid)) == start


_orphans_lock = threading.Lock()
_orphans_done = False


def remove_orphans(docker: str) -> list[str]:
    """Remove tmlbench containers whose harness process is gone; returns their names."""
    fmt = (
        '{{.Names}}\t{{.Label "tmlbench.harness_pid"}}\t'
        '{{.Label "tmlbench.harness_start"}}\t{{.Label "tmlbench.boot_id"}}'
    )
    listed = docker_cli(docker, "ps", "-a", "--filter", f"label={LABEL}", "--format", fmt)
    if listed.returncode != 0:
        raise HarnessError(f"cannot list containers: {listed.stderr.strip()}; {ENGINE_HINT}")
    removed = []
    for line in listed.stdout.splitlines():
        name, pid, start, boot = ([*line.split("\t"), "", "", ""])[:4]
        if name and not _harness_alive(pid, start, boot):
            docker_cli(docker, "rm", "-f", "-v", name)
            remove_cgroup_parent(name)
            removed.append(name)
    return removed


def remove_orphans_once(docker: str) -> None:
    """:func:`remove_orphans`, the first time a DockerSandbox is made in this process."""
    global _orphans_done
    with _orphans_lock:
        if not _orphans_done:
            remove_orphans(docker)
            _orphans_done = True
