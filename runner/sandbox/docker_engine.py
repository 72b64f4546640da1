"""The Docker engine as the docker sandbox uses it: its CLI, its health, and orphans.

Containers are labelled with the harness's pid, its start time, its pid namespace, the
container it runs in (if any) and the boot id, so the first DockerSandbox of a process removes
containers a crashed harness left behind: one whose pid is gone from our pid namespace, or
whose container no longer runs. A harness in another pid namespace that is not a container
(the host's, seen from a run container) cannot be checked from here, and its attempts are
left alone: that harness removes them itself when it starts again.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import threading
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError

from runner.errors import HarnessError
from runner.sandbox.docker_cgroups import remove_cgroup_parent

IMAGE = "tmlbench-agent:latest"
LABEL = "tmlbench.attempt"
ENGINE_HINT = (
    "start the Docker engine with `make docker-engine` (installs docker.io and starts dockerd)"
)
IMAGE_HINT = "build the agent runtime image with `make docker-image`"
CLI_TIMEOUT = 60.0  # seconds for docker create/inspect/rm; kill gets less
# Who started an attempt's container (labels tmlbench.<key>), in the order remove_orphans reads.
NEVER_STARTED = "0001-01-01T00:00:00Z"  # the engine's StartedAt of a container never started
HARNESS_LABELS = ("harness_pid", "harness_start", "boot_id", "harness_pidns", "harness_container")


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


class ContainerState(BaseModel):
    """What an attempt reads of a container's ``.State`` as ``docker inspect`` prints it; the
    engine's other fields are ignored. Empty (never started, no exit code) when the engine
    gave nothing that parses: then the attempt's own evidence decides (a container that never
    started is the harness's fault, see ``DockerSandbox``)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    started_at: str = Field(default=NEVER_STARTED, alias="StartedAt")
    error: str = Field(default="", alias="Error")
    exit_code: StrictInt | None = Field(default=None, alias="ExitCode")
    oom_killed: StrictBool = Field(default=False, alias="OOMKilled")

    @property
    def started(self) -> bool:
        return not self.started_at.startswith(NEVER_STARTED[:4])

    @classmethod
    def parse(cls, text: str) -> ContainerState:
        """``docker inspect --format '{{json .State}}'``'s output (empty if it does not parse)."""
        try:
            return cls.model_validate_json(text)
        except ValidationError:
            return cls()


def container_state(docker: str, name: str) -> ContainerState:
    """The container's ``.State`` (:class:`ContainerState`; empty if the engine cannot say)."""
    got = docker_cli(docker, "inspect", "--format", "{{json .State}}", name)
    return ContainerState.parse(got.stdout) if got.returncode == 0 else ContainerState()


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


def harness_labels() -> list[str]:
    """``--label`` arguments naming this harness process (see :func:`remove_orphans`)."""
    pid = os.getpid()
    values = {
        "harness_pid": str(pid),
        "harness_start": start_ticks(pid) or "",
        "boot_id": boot_id(),
        "harness_pidns": pid_namespace(),
        "harness_container": own_container(),
    }
    return [arg for key in HARNESS_LABELS for arg in ("--label", f"tmlbench.{key}={values[key]}")]


def boot_id() -> str:
    """This boot's id: a harness pid from another boot names no live process."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def pid_namespace() -> str:
    """This process's pid namespace (``pid:[inode]``): pids are only comparable within it."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return "unknown"


_CONTAINER_ID = re.compile(r"/containers/([0-9a-f]{64})/")


@functools.cache
def own_container() -> str:
    """The id of the Docker container this process runs in; "" on a host.

    Docker binds a container's /etc/hostname from ``<data root>/containers/<id>/hostname``.
    """
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return ""
    for line in lines:
        fields = line.split()
        if len(fields) > 4 and fields[4] == "/etc/hostname":
            found = _CONTAINER_ID.search(fields[3])
            if found:
                return found.group(1)
    return ""


def start_ticks(pid: int) -> str | None:
    """A process's start time (clock ticks since boot): with the pid, it names one process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()[19]


def _container_running(docker: str, container: str) -> bool:
    got = docker_cli(docker, "inspect", "--format", "{{.State.Running}}", container, timeout=15)
    return got.returncode == 0 and got.stdout.strip() == "true"


def _harness_alive(docker: str, labels: list[str]) -> bool:
    pid, start, boot, pidns, container = labels
    if boot != boot_id():
        return False
    if pidns and pidns != pid_namespace():  # a harness in another container, or on the host
        return _container_running(docker, container) if container else True
    if not pid.isdigit():
        return False
    return start_ticks(int(pid)) == start


_orphans_lock = threading.Lock()
_orphans_done = False


def remove_orphans(docker: str, label: str = LABEL) -> list[str]:
    """Remove the containers labelled ``label`` (and :func:`harness_labels`) whose harness process
    is gone; returns their names."""
    fmt = "\t".join(["{{.Names}}"] + [f'{{{{.Label "tmlbench.{key}"}}}}' for key in HARNESS_LABELS])
    listed = docker_cli(docker, "ps", "-a", "--filter", f"label={label}", "--format", fmt)
    if listed.returncode != 0:
        raise HarnessError(f"cannot list containers: {listed.stderr.strip()}; {ENGINE_HINT}")
    removed = []
    for line in listed.stdout.splitlines():
        name, *labels = ([*line.split("\t"), *[""] * len(HARNESS_LABELS)])[
            : 1 + len(HARNESS_LABELS)
        ]
        if name and not _harness_alive(docker, labels):
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
