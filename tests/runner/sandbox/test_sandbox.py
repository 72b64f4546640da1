"""Sandbox backends against real misbehaving agents (tests/sandbox_agents/*.py).

Nothing here is skipped: a missing bubblewrap, Docker engine or image, or unusable cgroups
make the tests FAIL with a message, because the Makefile installs bubblewrap, starts the
engine and builds the image (`make docker-engine docker-image`) and the harness runs as root.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from runner.errors import HarnessError
from runner.sandbox import (
    Bind,
    BwrapSandbox,
    Sandbox,
    SandboxLimits,
    bwrap_available,
    bwrap_problem,
    docker_problem,
    get_sandbox,
)
from runner.sandbox import cgroups as cg
from tests.support.sandbox_attempts import (
    AGENTS,
    MIB,
    Attempt,
    host_bait,
    probe_command,
    require_bwrap,
)

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(120)]


def _require_cgroups() -> None:
    ok, why = cg.available()
    if not ok:
        pytest.fail(f"cgroup v1 caps need root and mounted cgroups: {why}")


def _require_docker() -> None:
    problem = docker_problem()
    if problem:
        pytest.fail(f"the docker backend is required for these tests: {problem}")


@pytest.fixture(params=["bwrap", "docker", "process"])
def sandbox(request: pytest.FixtureRequest) -> Sandbox:
    if request.param == "bwrap":
        require_bwrap()
    if request.param == "docker":
        _require_docker()
    return get_sandbox(request.param)


@pytest.fixture
def bwrap() -> Sandbox:
    require_bwrap()
    return get_sandbox("bwrap")


# -- availability and errors -----------------------------------------------------------


def test_bwrap_is_installed_and_works():
    assert bwrap_available(), bwrap_problem()
    assert get_sandbox("bwrap").name == "bwrap"


def test_backend_selection_errors():
    with pytest.raises(HarnessError, match="unknown sandbox backend"):
        get_sandbox("chroot")
    with pytest.raises(HarnessError, match="choose one of bwrap, docker, process"):
        get_sandbox("firecracker")  # refused by name, not silently replaced
    assert get_sandbox("process").isolated is False
    assert get_sandbox("docker").isolated is True


def test_broken_bwrap_raises_harness_error(tmp_path: Path):
    require_bwrap()
    sb = BwrapSandbox(bwrap="/nonexistent/bwrap")
    att = Attempt(tmp_path, sb)
    with pytest.raises(HarnessError, match="bubblewrap could not start"):
        sb.run(att.request(["/usr/bin/true"], SandboxLimits(wall_seconds=5)))


# -- normal runs, env, logs --------------------------------------------------------------


def test_exit_code_env_and_logs(sandbox: Sandbox, tmp_path: Path):
    os.environ["TMLBENCH_TEST_SECRET"] = "hunter2"
    try:
        att = Attempt(tmp_path, sandbox)
        req = att.request(
            ["/bin/sh", "-c", "/usr/bin/env; pwd; echo oops >&2; exit 7"],
            SandboxLimits(wall_seconds=10),
            env={"ONLY_THIS": "1"},
        )
        res = sandbox.run(req)
    finally:
        del os.environ["TMLBENCH_TEST_SECRET"]
    assert res.exit_code == 7, att.stderr()
    assert not res.timed_out and res.limit_exceeded is None
    lines = att.stdout().splitlines()
    env_lines, cwd = lines[:-1], lines[-1]
    seen = dict(line.split("=", 1) for line in env_lines)
    seen.pop("PWD", None)  # sh itself exports PWD to /usr/bin/env; the launcher does not
    assert seen == req.env
    assert "hunter2" not in att.stdout()
    assert Path(cwd) == Path(att.paths.workspace).resolve()
    assert att.stderr().strip() == "oops"
    assert res.wall_seconds > 0
    if cg.available()[0]:
        assert res.cpu_seconds is not None and res.peak_memory_bytes


def test_exact_env_without_shell(sandbox: Sandbox, tmp_path: Path):
    att = Attempt(tmp_path, sandbox)
    res = sandbox.run(att.request(["/usr/bin/env"], SandboxLimits(wall_seconds=10)))
    assert res.exit_code == 0
    seen = dict(line.split("=", 1) for line in att.stdout().splitlines())
    assert seen == {"PATH": "/usr/bin:/bin", "HOME": att.paths.workspace, "MARKER": att.marker}


def test_log_capping(sandbox: Sandbox, tmp_path: Path):
    att = Attempt(tmp_path, sandbox)
    cap = 64 * 1024
    req = att.request(
        att.agent("chatty.py", "4"), SandboxLimits(wall_seconds=20), log_cap_bytes=cap
    )
    res = sandbox.run(req)
    assert res.exit_code == 0 and not res.timed_out
    for path in (req.stdout_path, req.stderr_path):
        data = path.read_bytes()
        assert cap <= len(data) <= cap + 200
        assert data.startswith(b"x" * 1000)
        assert b"log truncated" in data[cap:]
    assert sum("truncated" in n for n in res.notes) == 2


def test_agent_crash_is_not_a_harness_error(sandbox: Sandbox, tmp_path: Path):
    att = Attempt(tmp_path, sandbox)
    res = sandbox.run(att.request(["/no/such/program"], SandboxLimits(wall_seconds=10)))
    assert res.exit_code not in (0, None)
    res = sandbox.run(att.request(att.agent("nonexistent.py"), SandboxLimits(wall_seconds=10)))
    assert res.exit_code == 2


# -- the deadline ---------------------------------------------------------------------------


# exclusive: the kill is asserted within 2 s of the deadline
@pytest.mark.exclusive
def test_deadline_kills_everything(sandbox: Sandbox, tmp_path: Path):
    att = Attempt(tmp_path, sandbox)
    wall = 2.0
    req = att.request(
        att.agent("misbehave.py"), SandboxLimits(wall_seconds=wall, grace_seconds=0.5)
    )
    start = time.monotonic()
    res = sandbox.run(req)
    returned = time.monotonic()
    while att.survivors() and time.monotonic() < start + wall + 3:
        time.sleep(0.01)
    gone = time.monotonic()
    assert not att.survivors(), "processes of the attempt survived the deadline"
    assert res.timed_out
    roles = {line.split()[0] for line in (att.workspace / "pids.txt").read_text().splitlines()}
    assert roles == {"main", "child", "grandchild"}, "agent did not get to misbehave"
    assert "spawned" in att.stdout()
    assert returned - (start + wall) <= 2.0
    assert gone - (start + wall) <= 2.0
    assert res.wall_seconds >= wall


def test_leftover_background_processes_are_killed_on_exit(sandbox: Sandbox, tmp_path: Path):
    att = Attempt(tmp_path, sandbox)
    cmd = ["/bin/sh", "-c", "(setsid sleep 300 &) ; sleep 300 & echo started"]
    res = sandbox.run(att.request(cmd, SandboxLimits(wall_seconds=10)))
    assert res.exit_code == 0 and not res.timed_out
    assert res.wall_seconds < 5
    assert not att.survivors()


# -- isolation (bwrap) -------------------------------------------------------------------------


def test_bwrap_isolation(bwrap: Sandbox, tmp_path: Path):
    att = Attempt(tmp_path, bwrap)
    with host_bait() as port:
        cmd = probe_command(att, port)
        res = bwrap.run(att.request(cmd, SandboxLimits(wall_seconds=20, cpuset="0")))
    assert res.exit_code == 0, att.stderr()
    out = json.loads(att.stdout())
    assert all(v != "ok" for v in out["read"].values()), out["read"]
    assert "TMLBENCH_TEST_API_KEY" not in out["env"]
    assert "sk-live-secret" not in att.stdout()
    assert out["tcp_host_loopback"] != "ok"
    assert out["tcp_external"] != "ok"
    writes = out["write"]
    assert writes.pop("/workspace/ok.txt") == "ok"
    assert all(v != "ok" for v in writes.values()), writes
    assert (att.workspace / "ok.txt").read_text() == "hello"
    assert out["cwd"] == "/workspace"
    assert out["uid"] == 65534
    assert out["cpus"] == "0"
    assert bwrap.paths(att.workspace, AGENTS).python == "/opt/tmlbench/venv/bin/python"


def test_binds_share_a_unix_socket_and_stay_read_only(sandbox: Sandbox, tmp_path: Path):
    """The harness talks to sandboxed programs (tools, egress) only through bound sockets."""
    att = Attempt(tmp_path, sandbox)
    control = tmp_path / "control"
    control.mkdir()
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(control / "s.sock"))
    server.listen(1)
    server.settimeout(20)
    bind = Bind(host=control, inside="/run/tmlbench")
    inside = sandbox.bind_path(bind)
    code = (
        "import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1] + '/s.sock');"
        "s.sendall(b'hi'); print(s.recv(10).decode());"
        "open(sys.argv[1] + '/w', 'w') if sys.argv[2] == 'ro' else None"
    )
    ro = "ro" if sandbox.isolated else "-"
    req = att.request(
        [att.paths.python, "-c", code, inside, ro], SandboxLimits(wall_seconds=20), binds=(bind,)
    )

    def serve() -> None:
        conn, _ = server.accept()
        conn.sendall(conn.recv(10) + b"!")
        conn.close()

    thread = threading.Thread(target=serve)
    thread.start()
    res = sandbox.run(req)
    thread.join(5)
    server.close()
    assert att.stdout().strip() == "hi!"
    if sandbox.isolated:
        assert inside == "/run/tmlbench"
        assert res.exit_code != 0 and "Read-only file system" in att.stderr()
        assert not (control / "w").exists()
    else:
        assert res.exit_code == 0 and inside == str(control.resolve())


def test_bwrap_python_stack_importable(bwrap: Sandbox, tmp_path: Path):
    att = Attempt(tmp_path, bwrap)
    code = "import numpy, pandas, sklearn, sys; print(sys.prefix)"
    res = bwrap.run(att.request([att.paths.python, "-c", code], SandboxLimits(wall_seconds=30)))
    assert res.exit_code == 0, att.stderr()
    assert att.stdout().strip() == "/opt/tmlbench/venv"


# -- caps ----------------------------------------------------------------------------------------


def test_memory_cap(sandbox: Sandbox, tmp_path: Path):
    _require_cgroups()
    att = Attempt(tmp_path, sandbox)
    limits = SandboxLimits(wall_seconds=20, memory_bytes=200 * MIB)
    res = sandbox.run(att.request(att.agent("memhog.py", "1024"), limits))
    assert res.limit_exceeded == "memory", (res, att.stderr())
    assert not res.timed_out
    assert "survived" not in att.stdout()
    assert res.peak_memory_bytes is not None and res.peak_memory_bytes <= 210 * MIB
    assert not att.survivors()


def test_fork_bomb_is_contained(bwrap: Sandbox, tmp_path: Path):
    _require_cgroups()
    att = Attempt(tmp_path, bwrap)
    limits = SandboxLimits(wall_seconds=2, pids=32, grace_seconds=0.2)
    res = bwrap.run(att.request(att.agent("forkbomb.py"), limits))
    assert res.timed_out
    assert res.limit_exceeded == "pids"
    assert not att.survivors()
    # The harness is fine: it can run another attempt right away.
    res2 = bwrap.run(att.request(["/usr/bin/true"], SandboxLimits(wall_seconds=5)))
    assert res2.exit_code == 0


# exclusive: the capped write is asserted to end within 6 s
@pytest.mark.exclusive
def test_disk_cap(sandbox: Sandbox, tmp_path: Path):
    att = Attempt(tmp_path, sandbox)
    limits = SandboxLimits(wall_seconds=20, disk_bytes=30 * MIB)
    start = time.monotonic()
    res = sandbox.run(att.request(att.agent("diskfill.py"), limits))
    assert res.limit_exceeded == "disk", res
    assert not res.timed_out
    assert time.monotonic() - start < 6
    assert not att.survivors()


def test_single_file_size_cap(sandbox: Sandbox, tmp_path: Path):
    att = Attempt(tmp_path, sandbox)
    code = (
        "import sys\n"
        "try:\n"
        "    f = open('big.bin', 'wb'); f.seek(8 * 2**20); f.write(b'x'); f.close()\n"
        "except OSError as e:\n"
        "    print(type(e).__name__, e.errno); sys.exit(5)\n"
    )
    limits = SandboxLimits(wall_seconds=20, disk_bytes=4 * MIB)
    res = sandbox.run(att.request([att.paths.python, "-c", code], limits))
    assert res.exit_code == 5, att.stderr()
    assert "27" in att.stdout()  # EFBIG
    assert (att.workspace / "big.bin").stat().st_size <= 4 * MIB


def test_cpuset(sandbox: Sandbox, tmp_path: Path):
    _require_cgroups()
    att = Attempt(tmp_path, sandbox)
    cmd = ["/bin/sh", "-c", "grep Cpus_allowed_list /proc/self/status"]
    res = sandbox.run(att.request(cmd, SandboxLimits(wall_seconds=10, cpuset="1")))
    assert res.exit_code == 0
    assert att.stdout().split()[-1] == "1"


def test_bad_cpuset_is_a_harness_error(tmp_path: Path):
    _require_cgroups()
    sb = get_sandbox("process")
    att = Attempt(tmp_path, sb)
    with pytest.raises(HarnessError, match="cpuset"):
        sb.run(att.request(["/usr/bin/true"], SandboxLimits(wall_seconds=5, cpuset="4095")))


# -- without cgroups (non-root hosts) ---------------------------------------------------------


# exclusive: the kill is asserted within 2 s of the deadline
@pytest.mark.exclusive
def test_bwrap_deadline_without_cgroups(
    bwrap: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Fallback: killing bwrap's pid-namespace init takes every process of the attempt."""
    monkeypatch.setattr(cg, "available", lambda: (False, "disabled by test"))
    att = Attempt(tmp_path, bwrap)
    wall = 1.5
    req = att.request(
        att.agent("misbehave.py"), SandboxLimits(wall_seconds=wall, grace_seconds=0.3)
    )
    start = time.monotonic()
    res = bwrap.run(req)
    while att.survivors() and time.monotonic() < start + wall + 3:
        time.sleep(0.01)
    assert not att.survivors()
    assert time.monotonic() - (start + wall) <= 2.0
    assert res.timed_out
    assert any("cgroups unavailable" in n for n in res.notes)
    assert res.cpu_seconds is None


def test_process_without_cgroups_records_the_gap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Fallback: the process group dies; a setsid() double-fork can escape (noted)."""
    monkeypatch.setattr(cg, "available", lambda: (False, "disabled by test"))
    sb = get_sandbox("process")
    att = Attempt(tmp_path, sb)
    req = att.request(att.agent("misbehave.py"), SandboxLimits(wall_seconds=1.5, grace_seconds=0.3))
    res = sb.run(req)
    try:
        assert res.timed_out
        assert any("cgroups unavailable" in n for n in res.notes)
        pids = dict(line.split() for line in (att.workspace / "pids.txt").read_text().splitlines())
        time.sleep(0.1)
        for role in ("main", "child"):
            assert not Path(f"/proc/{pids[role]}").exists() or _is_zombie(int(pids[role]))
    finally:
        for pid in att.survivors():
            os.kill(pid, 9)


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2] == "Z"


# exclusive: the normal attempt's 0.5 s sleep is asserted to end within 1.4 s
@pytest.mark.exclusive
def test_concurrent_attempts_from_threads(bwrap: Sandbox, tmp_path: Path):
    """The harness runs attempts from threads: a misbehaving and a normal one side by side."""
    from concurrent.futures import ThreadPoolExecutor

    bad = Attempt(tmp_path / "bad", bwrap)
    good = Attempt(tmp_path / "good", bwrap)
    bad_req = bad.request(
        bad.agent("misbehave.py"), SandboxLimits(wall_seconds=1.5, grace_seconds=0.3)
    )
    good_req = good.request(
        ["/bin/sh", "-c", "sleep 0.5; echo fine"], SandboxLimits(wall_seconds=10)
    )
    with ThreadPoolExecutor(2) as pool:
        bad_res, good_res = pool.map(bwrap.run, [bad_req, good_req])
    assert bad_res.timed_out and not bad.survivors()
    assert good_res.exit_code == 0 and not good_res.timed_out
    assert good.stdout().strip() == "fine"
    assert good_res.wall_seconds < 1.4
