"""The docker backend when its harness itself runs in a container (the Docker deployment's runs).

There the engine resolves bind sources on the host: the harness makes what it shares with a
sandbox in ``$TMLBENCH_DOCKER_SHARED_DIR`` (a folder seen at the same path on both sides),
copies read-only folders of its image there, checks the engine sees those folders as it does,
and tells another container's harness from a dead one. The whole path, in a real run
container, is tests/orchestration/test_docker_deployment.py; here are its parts, on the host.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from runner.errors import HarnessError
from runner.sandbox import DockerSandbox, SandboxLimits, docker_engine, docker_in_container
from runner.sandbox.docker_create import SYNTH_ETC
from runner.sandbox.views import SHARED_DIR_ENV, private_dir, shared_dir
from tests.support.sandbox_attempts import Attempt, containers

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(180)]


def test_private_folders_go_to_the_shared_folder_when_one_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv(SHARED_DIR_ENV, raising=False)
    assert shared_dir() is None
    assert str(private_dir("tmlbench-test-")).startswith("/dev/shm/")
    monkeypatch.setenv(SHARED_DIR_ENV, str(tmp_path / "shared"))
    folder = private_dir("tmlbench-test-")
    assert folder.parent == tmp_path / "shared"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_read_only_folders_are_copied_readable_and_removed(tmp_path: Path):
    code = tmp_path / "agent"
    (code / "pkg").mkdir(parents=True)
    (code / "run.py").write_text("print(1)")
    (code / "run.py").chmod(0o700)
    (code / "pkg" / "lib.py").write_text("x = 1")
    (code / "link").symlink_to("/etc/shadow")
    shared = tmp_path / "shared"
    shared.mkdir()
    with docker_in_container.Staging(shared, "tmlbench-x") as staging:
        copy = staging.visible(code)
        assert copy.is_relative_to(shared) and staging.visible(code) == copy
        assert (copy / "pkg" / "lib.py").read_text() == "x = 1"
        assert stat.S_IMODE((copy / "run.py").stat().st_mode) == 0o755  # others may read it
        assert (copy / "link").is_symlink()  # copied as a link, never followed
        assert staging.visible(shared / "sockets") == shared / "sockets"  # already visible
        assert staging.notes
    assert not (shared / "tmlbench-x-ro").exists()
    with docker_in_container.Staging(None, "tmlbench-y") as staging:
        assert staging.visible(code) == code  # a harness on the host binds folders as they are


def test_an_attempt_leaves_nothing_in_the_shared_folder_when_it_ends(
    docker: DockerSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Everything the engine had to see (the agent's code, the /etc files) is a per-attempt
    copy, removed when the attempt ends: never left for the harness's exit, which comes after
    its run is reported done, or never when it is killed."""
    shared = tmp_path / "shared"
    monkeypatch.setenv(SHARED_DIR_ENV, str(shared))
    att = Attempt(tmp_path / "run", docker)
    command = ["/bin/sh", "-c", "cat /etc/hostname /etc/resolv.conf"]
    res = docker.run(att.request(command, SandboxLimits(wall_seconds=30)))
    assert res.exit_code == 0, att.stderr()
    assert att.stdout() == "sandbox\n# no network in the sandbox\n"
    copied = [n for n in res.notes if "copied to" in n]
    assert any(str(SYNTH_ETC.folder()) in n for n in copied), res.notes
    assert all(str(shared) in n for n in copied), res.notes
    assert shared.is_dir() and not list(shared.iterdir())


def test_engine_paths_check_passes_for_folders_the_engine_sees(
    docker: DockerSandbox, tmp_path: Path
):
    folders = [tmp_path / "a", tmp_path / "b"]
    for folder in folders:
        folder.mkdir()
    docker_in_container.check_engine_paths(docker.docker, docker.image, folders)
    assert all(not list(f.iterdir()) for f in folders), "markers removed"


def test_engine_paths_check_fails_when_the_engine_sees_another_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The probe container reads no marker (the engine bound a different, same-named folder):
    an attempt there would find its workspace empty and blame the agent, so it is a harness
    fault before it starts."""

    def engine_elsewhere(
        docker: str, *args: str, timeout: float = 0
    ) -> subprocess.CompletedProcess:
        return subprocess.CompletedProcess(args, 1, "", "cat: /probe/0/...: No such file")

    monkeypatch.setattr(docker_in_container, "docker_cli", engine_elsewhere)
    with pytest.raises(HarnessError, match="same absolute path"):
        docker_in_container.check_engine_paths("docker", "image", [tmp_path])
    assert not list(tmp_path.iterdir()), "marker removed"


def test_labels_name_the_pid_namespace_and_container():
    labels = docker_engine.harness_labels()
    values = dict(arg.split("=", 1) for arg in labels[1::2])
    assert values["tmlbench.harness_pid"] == str(os.getpid())
    assert values["tmlbench.harness_pidns"] == os.readlink("/proc/self/ns/pid")
    assert values["tmlbench.harness_container"] == ""  # these tests run on the host


def test_orphans_of_other_pid_namespaces(docker: DockerSandbox):
    """Another container's harness is alive while its container runs; a harness in another
    pid namespace that is no container (the host's, seen from a run container) is never
    judged from here."""
    boot = docker_engine.boot_id()
    base = f"tmlbench-test-ns-{os.getpid()}"
    holder = f"{base}-holder"  # stands for a run container whose harness is alive
    names = {"gone": f"{base}-gone", "running": f"{base}-running", "host": f"{base}-host"}
    try:
        subprocess.run(
            [docker.docker, "run", "-d", "--name", holder, "--network", "none", docker.image,
             "sleep", "300"],
            check=True, capture_output=True,
        )  # fmt: skip
        holder_id = docker_engine.docker_cli(
            docker.docker, "inspect", "--format", "{{.Id}}", holder
        ).stdout.strip()
        container_ids = {"gone": "0" * 64, "running": holder_id, "host": ""}
        for key, name in names.items():
            subprocess.run(
                [
                    *(docker.docker, "run", "-d", "--name", name, "--network", "none"),
                    *("--label", f"tmlbench.attempt={name}"),
                    *("--label", "tmlbench.harness_pid=1"),
                    *("--label", "tmlbench.harness_start=1"),
                    *("--label", f"tmlbench.boot_id={boot}"),
                    *("--label", "tmlbench.harness_pidns=pid:[1]"),
                    *("--label", f"tmlbench.harness_container={container_ids[key]}"),
                    *(docker.image, "sleep", "300"),
                ],
                check=True,
                capture_output=True,
            )
        removed = docker_engine.remove_orphans(docker.docker)
        left = containers(docker, f"name={base}")
        # Gone, whoever swept it: another harness on this engine (a test on another worker, the
        # Docker deployment's runs) may remove an orphan before this call does.
        assert names["gone"] not in left
        assert names["running"] in left and names["host"] in left
        assert names["running"] not in removed and names["host"] not in removed
    finally:
        subprocess.run(
            [docker.docker, "rm", "-f", holder, *names.values()], capture_output=True, check=False
        )
