"""Whatever an agent leaves in its workspace, the post-attempt path never faults on it.

The property: for any hostile workspace (symlinks with 300-byte, 255-byte, looping,
dangling, absolute and relative targets; FIFOs, unix sockets, folders where files are
expected; names with newlines, non-UTF-8 bytes or 255 bytes; trees deeper than the walk's
bound; unreadable modes), left at the submission's name, at the copied inputs' names and
elsewhere, under any way the attempt ended, and with any errno injected where the harness
looks at the agent's entries, the real :func:`runner.attempts.attempt.run_attempt` (workspace
settled by ``runner.sandbox.workspace``, verdict by ``runner.attempts.verdicts``, inputs dropped by
``runner.attempts.run_folder``, record assembled and written) ends with the status the rule says:
never ``harness_error``, never an exception; a valid regular submission still succeeds
beside any junk; anything else at the submission's name is ``invalid_submission`` with the
file named.

Only the agent is faked: :class:`PlantingSandbox` is a backend whose "agent" is the drawn
workspace, planted in-process where a real backend would run a program (real attempts on
bwrap and docker are in tests/adversarial/test_hostile_workspace.py).
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import shutil
import signal
import socket
import stat
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner import agent_files
from runner.agent_files import AgentFolder, read_head
from runner.attempts.attempt import AttemptContext, AttemptPlan, run_attempt
from runner.attempts.records import read_record
from runner.attempts.run_folder import COPIED_INPUTS, drop_inputs
from runner.attempts.verdicts import judge
from runner.config import REPO_ROOT, Paths
from runner.sandbox import Sandbox, SandboxPaths, SandboxRequest, SandboxResult, treewalk
from runner.sandbox import workspace as workspace_module
from runner.sandbox.lifecycle import Ended
from runner.sandbox.workspace import DiskWatch, Workspace
from runner.specs import AgentLimits, AgentSpec
from runner.specs.registry import load_task, task_spec_sha256
from runner.suites.audit import private_references
from tests.support.prepared_tasks import prepared

TASK_ID = "bank-customer-churn-ict-u-ai"  # AUC: the sample submission is a valid one
SUBMISSION = "submission.csv"
LONG = "a" * 300  # one name component past NAME_MAX (255): ENAMETOOLONG when followed
AS_ROOT = os.geteuid() == 0
# What may sit at the submission's or an input's name. "valid" is the sample submission,
# "unreadable" the same bytes with mode 000 (only root reads it).
ENTRY_KINDS = (
    "absent", "valid", "unreadable", "garbage", "empty", "long_link", "long_link_dir",
    "name_max_link", "loop_link", "cycle_link", "dangling_link", "abs_link_answers",
    "abs_link_dev", "rel_link_valid", "escaping_link", "fifo", "socket", "dir", "deep_dir",
)  # fmt: skip
ENDINGS = ("exit0", "exit1", "timeout", "file_cap", "disk_poll")
# Errnos pathlib re-raises (and a few more): none may become the harness's.
ERRNOS = (
    errno.ENAMETOOLONG, errno.ELOOP, errno.EACCES, errno.EPERM, errno.EIO, errno.ENOTDIR,
    errno.EOVERFLOW, errno.ENXIO, errno.ESTALE, errno.EBUSY,
)  # fmt: skip
# The other names the harness itself puts in the workspace.
HARNESS_NAMES = ("INSTRUCTIONS.md", "sample_submission.csv", "description.md", "manifest.json")
VALID_NAME_BYTES = st.binary(min_size=1, max_size=40).filter(
    lambda b: b"/" not in b and b"\0" not in b and b not in (b".", b"..")
)


@dataclass
class HostileWorkspace:
    """One drawn workspace, how the attempt ended, and where an errno is injected."""

    submission: str
    inputs: dict[str, str]
    elsewhere: list[tuple[str, str]]
    ending: str
    own_filesystem: bool
    injected: tuple[str, str, int] | None  # (call, name, errno); name "" is the folder itself


@st.composite
def hostile_workspaces(draw: st.DrawFn) -> HostileWorkspace:
    names = st.one_of(
        VALID_NAME_BYTES.map(os.fsdecode),  # non-UTF-8 bytes as surrogate escapes
        st.sampled_from(["x" * 255, "new\nline.csv", " ", "submission.csv ", "-rf", "é" * 127]),
        st.sampled_from(HARNESS_NAMES),  # what a future reader would most likely look at
    )
    injected = draw(
        st.none()
        | st.tuples(
            st.sampled_from(["folder", "lstat", "open", "remove"]),
            st.sampled_from([SUBMISSION, *COPIED_INPUTS]),
            st.sampled_from(ERRNOS),
        )
    )
    if injected is not None and injected[0] == "folder":
        injected = ("folder", "", injected[2])
    elsewhere = draw(
        st.lists(
            st.tuples(names, st.sampled_from(ENTRY_KINDS[1:])),
            max_size=4,
            unique_by=lambda item: item[0],
        ).map(lambda items: [(n, k) for n, k in items if n not in (SUBMISSION, *COPIED_INPUTS)])
    )
    return HostileWorkspace(
        submission=draw(st.sampled_from(ENTRY_KINDS)),
        inputs={
            name: draw(st.sampled_from(("kept", *ENTRY_KINDS)), label=name)
            for name in COPIED_INPUTS
        },
        elsewhere=elsewhere,
        ending=draw(st.sampled_from(ENDINGS)),
        own_filesystem=draw(st.booleans()) if AS_ROOT else False,
        injected=injected,
    )


def plant(folder_fd: int, name: str, kind: str, answers: Path, sample: bytes) -> None:
    """Leave ``kind`` at ``name`` in the folder, as an agent would (by descriptor, no chdir)."""
    with contextlib.suppress(FileNotFoundError):
        if kind != "kept":
            treewalk.remove_tree_at(folder_fd, name)
    link = {
        "long_link": "/" + LONG,
        "long_link_dir": f"{LONG}/{LONG}/x.csv",
        "name_max_link": "n" * 255,
        "loop_link": name,
        "dangling_link": "no/such/file.csv",
        "abs_link_answers": str(answers),
        "abs_link_dev": "/dev/zero",
        "rel_link_valid": "sample_submission.csv",
        "escaping_link": "../" * 40 + "etc/passwd",
    }.get(kind)
    if link is not None:
        os.symlink(link, name, dir_fd=folder_fd)
    elif kind == "cycle_link":
        other = f".cycle-{abs(hash(name)) % 10_000}"
        os.symlink(other, name, dir_fd=folder_fd)
        with contextlib.suppress(FileExistsError):
            os.symlink(name, other, dir_fd=folder_fd)
    elif kind in ("valid", "unreadable", "garbage", "empty"):
        data = {"garbage": b"\x00\xff\xfe" + os.urandom(64), "empty": b""}.get(kind, sample)
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=folder_fd)
        os.write(fd, data)
        if kind == "unreadable":
            os.fchmod(fd, 0)
        os.close(fd)
    elif kind == "fifo":
        os.mkfifo(name, dir_fd=folder_fd)
    elif kind == "socket":
        sock = socket.socket(socket.AF_UNIX)
        try:  # through the folder's descriptor: a socket path may hold only 107 bytes
            sock.bind(f"/proc/self/fd/{folder_fd}/{name}")
        except OSError:  # a name too long for a socket address: a FIFO stands in
            os.mkfifo(name, dir_fd=folder_fd)
        finally:
            sock.close()
    elif kind in ("dir", "deep_dir"):
        os.mkdir(name, 0o700, dir_fd=folder_fd)
        if kind == "deep_dir":  # deeper than the walks' depth bound (64)
            fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=folder_fd)
            for _ in range(80):
                os.mkdir("d", dir_fd=fd)
                child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                os.close(fd)
                fd = child
            os.symlink("/" + LONG, "leaf", dir_fd=fd)
            os.close(fd)
            os.chmod(name, 0o000, dir_fd=folder_fd)  # unreadable to all but root


class ByNameWatch:
    """While armed, every path-based open, removal, listing, ... of a name *inside* the
    workspace (an audit event: ``sys.addaudithook``) is a by-name resolution of an agent's
    entry, recorded as a finding. ``stat`` raises no audit event: the planted entries catch
    those readers. The workspace folder itself is the harness's; so are the random
    ``.tmlbench-*`` names it creates there itself (``O_EXCL | O_NOFOLLOW``).
    """

    EVENTS = ("open", "os.remove", "os.rmdir", "os.rename", "os.listdir", "os.scandir",
              "os.chmod", "os.chown", "os.truncate", "os.utime", "os.mkdir", "os.symlink",
              "os.link", "shutil.copyfile", "shutil.rmtree")  # fmt: skip

    def __init__(self) -> None:
        self.armed: str | None = None
        self.found: list[str] = []

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if self.armed is None or event not in self.EVENTS:
            return
        for arg in args[:2]:
            if isinstance(arg, str | bytes | os.PathLike):
                path = os.fsdecode(arg)
                inside = path.startswith(self.armed + "/")
                if inside and not path[len(self.armed) + 1 :].startswith(".tmlbench-"):
                    self.found.append(f"{event} {path!r}")


WATCH = ByNameWatch()
sys.addaudithook(WATCH)  # inert unless armed (hooks cannot be removed)


class PlantingSandbox(Sandbox):
    """A backend whose agent is a drawn workspace: planted, then the attempt ends as drawn."""

    name = "planting"
    isolated = True

    def __init__(self, answers: Path, sample: bytes) -> None:
        self.answers, self.sample = answers, sample
        self.drawn: HostileWorkspace | None = None

    def paths(self, workspace: Path, agent_dir: Path) -> SandboxPaths:
        return SandboxPaths(workspace="/workspace", agent_dir="/opt/agent", python=sys.executable)

    def execute(self, request: SandboxRequest, workspace: Workspace) -> Ended:
        drawn = self.drawn
        assert drawn is not None
        fd = os.open(request.workspace, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for name, kind in [(SUBMISSION, drawn.submission), *drawn.inputs.items()]:
                if kind != "kept":
                    plant(fd, name, kind, self.answers, self.sample)
            for name, kind in drawn.elsewhere:
                plant(fd, name, kind, self.answers, self.sample)
        finally:
            os.close(fd)
        request.stdout_path.write_bytes(b"local_validation_score: 0.5\n")
        request.stderr_path.write_bytes(b"")
        WATCH.armed = os.path.abspath(request.workspace)  # the agent is done: only the harness
        if drawn.ending == "disk_poll" and workspace.fs is None:
            workspace.poll = DiskWatch(request.workspace, request.limits.disk_bytes)
            workspace.poll.exceeded.set()  # as the fallback's poll reports a workspace over its cap
            return Ended(exit_code=128 + signal.SIGKILL, wall_seconds=0.1)
        code = {"exit0": 0, "timeout": 128 + signal.SIGTERM, "file_cap": 128 + signal.SIGXFSZ}
        return Ended(
            exit_code=code.get(drawn.ending, 1),
            wall_seconds=0.1,
            timed_out=drawn.ending == "timeout",
        )


@contextlib.contextmanager
def injected_errno(injected: tuple[str, str, int] | None) -> Iterator[None]:
    """Make the harness's looks at the agent's entries fail with ``errno`` where drawn."""
    if injected is None:
        yield
        return
    call, target, number = injected

    def failing(original: Any) -> Any:
        def wrapper(self: AgentFolder, name: str, *args: Any) -> Any:
            if name == target:
                raise OSError(number, os.strerror(number), name)
            return original(self, name, *args)

        return wrapper

    if call == "folder":
        original_init = AgentFolder.__init__

        def unopenable(self: AgentFolder, path: str | os.PathLike[str]) -> None:
            original_init(self, path)
            self.close()
            self.error = OSError(number, os.strerror(number), str(path))

        patch = mock.patch.object(AgentFolder, "__init__", unopenable)
    else:
        method = {"lstat": "lstat", "open": "open_file", "remove": "remove_file"}[call]
        patch = mock.patch.object(AgentFolder, method, failing(getattr(AgentFolder, method)))
    with patch:
        yield


@dataclass
class Bench:
    paths: Paths
    sandbox: PlantingSandbox
    ctx: AttemptContext
    counter: Iterator[int]


@pytest.fixture(scope="module")
def bench(small_data: Path) -> Iterator[Bench]:
    root = Path(tempfile.mkdtemp(prefix="tmlbench-hostile-"))
    paths = Paths(
        tasks_dir=REPO_ROOT / "tasks",
        agents_dir=REPO_ROOT / "agents",
        suites_dir=REPO_ROOT / "suites",
        data_dir=small_data,
        runs_dir=root / "runs",
    )
    task = prepared(paths, TASK_ID)
    sandbox = PlantingSandbox(
        task.answers_path, (task.public / "sample_submission.csv").read_bytes()
    )
    ctx = AttemptContext(
        prepared=task,
        runs_dir=paths.runs_dir,
        sandbox=sandbox,
        agent_code_dir=None,
        task_spec_sha256=task_spec_sha256(paths.tasks_dir, TASK_ID),
    )
    yield Bench(paths, sandbox, ctx, itertools.count())
    treewalk.remove_tree(root)


AGENT = AgentSpec(
    id="hostile-workspace",
    kind="baseline",
    title="a drawn hostile workspace",
    harness="tmlbench-test",
    command=("{python}", "-c", "pass"),
    limits=AgentLimits(cpus=1, memory_gb=0.25, pids=64, disk_gb=0.05, files=4096),
    trusted=False,
)
SUCCEEDS = {"valid", "unreadable"} if AS_ROOT else {"valid"}
CAN_DROP = {"kept", "valid", "unreadable", "garbage", "empty"}  # regular files


def expected_status(drawn: HostileWorkspace) -> str:
    """The rule: how the attempt ended, then whether a readable regular submission is there."""
    call, target, number = drawn.injected or ("", "", 0)
    submission = drawn.submission
    if call == "folder" or (call, target) == ("lstat", SUBMISSION):
        # Cannot be looked at: counts as left, and is refused. ENOTDIR of one name in a
        # folder means it is not there (as for the kernel's own lookup).
        submission = "absent" if number == errno.ENOTDIR else "unlookable"
    elif (call, target) == ("open", SUBMISSION) and submission in SUCCEEDS:
        submission = "unopenable"
    elif submission == "socket" and drawn.own_filesystem:
        submission = "absent"  # a socket is not copied out of the agent's filesystem
    ending = drawn.ending
    if ending == "disk_poll" and drawn.own_filesystem:
        ending = "exit1"  # no poll beside the kernel's cap: a plain kill
    if ending == "timeout":
        return "timeout"
    if ending in ("file_cap", "disk_poll"):
        return "runtime_error"
    if submission == "absent":
        return "no_submission" if ending == "exit0" else "runtime_error"
    return "success" if submission in SUCCEEDS else "invalid_submission"


# 150 generated workspaces per run (half on an ext4 filesystem of their own when run as root),
# about 25 s in all on the 2-core reference machine.
# slow: 150 generated hostile workspaces, each benched
@pytest.mark.slow
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(drawn=hostile_workspaces())
def test_no_hostile_workspace_makes_a_harness_fault(bench: Bench, drawn: HostileWorkspace):
    bench.sandbox.drawn = drawn
    problem = None if drawn.own_filesystem else "drawn: the fallback's polled workspace"
    plan = AttemptPlan(AGENT, load_task(bench.paths.tasks_dir, TASK_ID), 60, next(bench.counter))
    WATCH.found.clear()
    try:
        with (
            mock.patch.object(workspace_module, "filesystem_problem", lambda: problem),
            injected_errno(drawn.injected),
        ):
            record = run_attempt(plan, bench.ctx)
    finally:
        WATCH.armed = None
    run_dir = bench.paths.runs_dir / record.run_id
    try:
        assert WATCH.found == [], drawn  # no agent entry looked up by its name
        assert record.status != "harness_error", (record.error_message, drawn)
        want = expected_status(drawn)
        assert record.status == want, (record.error_message, record.validation_message, drawn)
        assert read_record(run_dir / "record.json") == record  # written, strict, read back
        assert private_references([record]) == []
        if record.status == "invalid_submission" and drawn.submission not in CAN_DROP:
            assert record.validation_code in ("not_regular_file", "unreadable_csv", "missing_file")
            assert SUBMISSION in (record.validation_message or ""), record.validation_message
        if record.status == "success":
            assert record.score == 0.5 and record.submission_sha256 is not None
        assert_inputs_dropped_or_noted(drawn, record.sandbox_notes or [], run_dir / "workspace")
        treewalk.listing(run_dir / "workspace", treewalk.Bounds())  # never raises either
    finally:
        treewalk.remove_tree(run_dir)


def assert_inputs_dropped_or_noted(drawn: HostileWorkspace, notes: list[str], ws: Path) -> None:
    call, target, number = drawn.injected or ("", "", 0)
    for name in COPIED_INPUTS:
        try:
            left = os.lstat(ws / name)
        except FileNotFoundError:
            continue
        kind = drawn.inputs[name]
        blocked = call == "folder" or (target == name and call in ("lstat", "remove"))
        if blocked and call != "remove" and number == errno.ENOTDIR:
            continue  # looked at as absent: left alone, nothing to say
        assert not stat.S_ISREG(left.st_mode) or blocked or kind not in CAN_DROP, (name, drawn)
        assert any(note.startswith(f"workspace: {name} kept") for note in notes), (name, notes)


# ------------------------------------------------------------------- the primitives alone


def test_a_name_that_cannot_be_followed_is_looked_at_as_itself(tmp_path: Path):
    os.symlink("/" + LONG, tmp_path / SUBMISSION)
    os.symlink("loop", tmp_path / "loop")
    with pytest.raises(OSError) as info:
        (tmp_path / SUBMISSION).exists()  # what the harness used to ask: a fault
    assert info.value.errno == errno.ENAMETOOLONG
    with AgentFolder(tmp_path) as folder:
        assert folder.look(SUBMISSION).kind() == "symbolic link"
        assert folder.look("loop").kind() == "symbolic link"
        assert not folder.look("none").exists
        with pytest.raises(OSError) as info:
            folder.open_file(SUBMISSION)
        assert info.value.errno == errno.ELOOP  # O_NOFOLLOW: the link itself, never its target
        with pytest.raises(ValueError, match="not one entry name"):
            folder.look("../escape")


def test_a_folder_is_never_followed_either(tmp_path: Path):
    assert not AgentFolder(tmp_path / "gone").look(SUBMISSION).exists  # no folder: nothing there
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "train.csv").write_text("id,y\n")
    os.symlink(tmp_path / "real", tmp_path / "linked")
    folder = AgentFolder(tmp_path / "linked")
    assert folder.fd is None and folder.error is not None
    assert folder.error.errno == errno.ENOTDIR  # O_DIRECTORY | O_NOFOLLOW on a link
    assert drop_inputs(tmp_path / "linked") == []
    assert (tmp_path / "real" / "train.csv").is_file()  # nothing removed through the link


def test_drop_inputs_removes_regular_inputs_and_notes_the_rest(tmp_path: Path):
    (tmp_path / "train.csv").write_text("id,y\n")
    os.symlink("/" + LONG, tmp_path / "test.csv")
    assert drop_inputs(tmp_path) == [
        "workspace: test.csv kept: the agent left a symbolic link there"
    ]
    assert not (tmp_path / "train.csv").exists()
    assert os.readlink(tmp_path / "test.csv") == "/" + LONG


def test_judge_grades_a_valid_submission_beside_a_hostile_input(small_paths: Paths, tmp_path: Path):
    task = load_task(small_paths.tasks_dir, TASK_ID)
    pub = prepared(small_paths, TASK_ID)
    shutil.copyfile(pub.public / "sample_submission.csv", tmp_path / SUBMISSION)
    os.symlink("/" + LONG, tmp_path / "train.csv")
    verdict = judge(
        task, pub, tmp_path, SandboxResult(backend="x", exit_code=0, wall_seconds=1), 60
    )
    assert verdict.status == "success" and verdict.score == 0.5
    (tmp_path / SUBMISSION).unlink()
    os.symlink("/" + LONG, tmp_path / SUBMISSION)
    verdict = judge(
        task, pub, tmp_path, SandboxResult(backend="x", exit_code=0, wall_seconds=1), 60
    )
    assert verdict.status == "invalid_submission"
    assert verdict.validation_code == "not_regular_file"
    assert "submission.csv is a symbolic link" in (verdict.validation_message or "")
    assert agent_files.file_kind(stat.S_IFSOCK) == "socket"


@pytest.mark.timeout(20)
def test_read_head_reads_only_a_regular_file_reached_without_links(tmp_path: Path):
    run = tmp_path / "run"
    (run / "workspace" / "sub").mkdir(parents=True)
    (run / "workspace" / "sub" / "f.csv").write_bytes(b"0123456789")
    (tmp_path / "secret").write_text("do not show")
    os.symlink(tmp_path / "secret", run / "workspace" / "link.csv")
    os.symlink("/" + LONG, run / "workspace" / "long.csv")
    os.symlink("loop.csv", run / "workspace" / "loop.csv")
    os.symlink(run / "workspace" / "sub", run / "workspace" / "linked-dir")
    os.mkfifo(run / "workspace" / "fifo.csv")  # never opened: no writer would ever come
    assert read_head(run, "workspace/sub/f.csv", 4) == b"01234"  # limit + 1: "there is more"
    assert read_head(run, "workspace/./sub/f.csv", 100) == b"0123456789"
    for relative in (
        "workspace/link.csv", "workspace/long.csv", "workspace/loop.csv", "workspace/fifo.csv",
        "workspace/linked-dir/f.csv", "workspace/sub", "../secret", str(tmp_path / "secret"),
        "workspace/none.csv", "workspace/sub/f.csv/x", "", "workspace/a\0b",
    ):  # fmt: skip
        assert read_head(run, relative, 100) is None, relative
