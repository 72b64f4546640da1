"""One attempt: fresh workspace → agent in a sandbox under a hard budget → grading → record."""

from __future__ import annotations

import datetime as dt
import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from runner import __version__
from runner.clis import InstalledCli
from runner.config import REPO_ROOT
from runner.drivers import make_driver, preflight, sandbox_fields
from runner.errors import TmlbenchError
from runner.grading import (
    InvalidSubmission,
    default_max_bytes,
    grade_submission,
    hash_submission_file,
    load_answers,
)
from runner.instructions import instructions_sha256, render_instructions
from runner.prepare import PUBLIC_FILES, PreparedTask, verify_public
from runner.records import (
    RECORD_FILE,
    TEMP_PREFIX,
    WORKSPACE_DIR,
    RunRecord,
    read_record,
    write_record,
)
from runner.sandbox import Sandbox, SandboxLimits, SandboxRequest, SandboxResult
from runner.sandbox.views import VIEWS_NAME
from runner.sandbox.views import release as release_views
from runner.sandbox.workspace import recover as recover_workspace
from runner.specs import AgentSpec, TaskSpec

GIB = 1024**3
LOCK_FILE = ".lock"
STARTED_FILE = "started.json"
HARNESS_DIED = "harness died mid-attempt"
LOCAL_SCORE = re.compile(
    r"^\s*local_validation_score\s*[:=]\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$"
)


@dataclass(frozen=True)
class AttemptPlan:
    """Who does what under which budget: one (agent, task, budget, attempt index)."""

    agent: AgentSpec
    task: TaskSpec
    budget_seconds: int
    attempt_index: int
    instruction_profile: str = "standard"
    suite_id: str | None = None

    @property
    def run_id(self) -> str:
        return make_run_id(
            self.agent.id,
            self.task.id,
            self.budget_seconds,
            self.instruction_profile,
            self.attempt_index,
        )


@dataclass(frozen=True)
class AttemptContext:
    """What the harness brings to an attempt: prepared data, where runs go, how to sandbox."""

    prepared: PreparedTask
    runs_dir: Path
    sandbox: Sandbox
    agent_code_dir: Path | None
    task_spec_sha256: str
    allow_unsafe: bool = False
    cpuset: str | None = None
    clis_dir: Path | None = None  # where agent CLIs are installed (None: runner.clis's default)


def make_run_id(agent_id: str, task_id: str, budget: int, profile: str, attempt_index: int) -> str:
    """Deterministic, so re-running a suite finds the attempts it already has."""
    return f"{agent_id}__{task_id}__{budget}s__{profile}__a{attempt_index:02d}"


def derive_seed(run_id: str) -> int:
    return int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:4], "big") & 0x7FFFFFFF


def existing_record(runs_dir: Path, run_id: str) -> RunRecord | None:
    path = runs_dir / run_id / RECORD_FILE
    return read_record(path) if path.is_file() else None


def run_attempt(plan: AttemptPlan, ctx: AttemptContext) -> RunRecord:
    """Run one attempt and write its record. Returns the existing record if there is one.

    Never raises for anything the agent does; a fault of the harness becomes a record with
    status ``harness_error`` (unless even the record cannot be written). A run folder that a
    killed harness left unfinished is not run again: it gets a ``harness_error`` record (see
    ``died_mid_attempt``) and the caller moves on to the next attempt index. Public files that
    no longer match the task's manifest raise a ``TmlbenchError`` before anything is written.
    """
    if not ctx.sandbox.isolated and not plan.agent.trusted and not ctx.allow_unsafe:
        raise TmlbenchError(
            f"agent {plan.agent.id} is not a trusted built-in and the {ctx.sandbox.name!r} backend does "
            "not isolate it; use --backend bwrap, or pass --unsafe-no-isolation to accept the risk"
        )
    cli = preflight(plan.agent, ctx.sandbox, ctx.clis_dir)
    if ctx.prepared.exists():  # an unprepared task becomes a harness_error record below
        verify_public(ctx.prepared)  # a truncated or tampered public file: refuse, run nothing
    run_dir = ctx.runs_dir / plan.run_id
    with _claimed(run_dir, plan.run_id):
        previous = existing_record(ctx.runs_dir, plan.run_id)
        if previous is not None:
            return previous
        limits = _limits(plan.agent, plan.budget_seconds, ctx.cpuset)
        if _has_leftovers(run_dir):
            return _record_dead_harness(plan, ctx, run_dir, limits, cli)
        _clear_leftovers(run_dir)
        started = _now()
        _write_started(run_dir, plan, started, ctx.cpuset)
        base = _record_base(plan, ctx, limits, started, cli)
        try:
            outcome = _execute(plan, ctx, run_dir, limits, cli)
        except Exception as exc:  # a harness fault is recorded, never blamed on the agent
            (run_dir / "harness_error.txt").write_text(traceback.format_exc(), encoding="utf-8")
            outcome = {"status": "harness_error", "error_message": f"{type(exc).__name__}: {exc}"}
        record = RunRecord(**base, **outcome, finished_at=_now())
        write_record(run_dir, record)
        return record


def died_mid_attempt(record: RunRecord) -> bool:
    """Is this the ``harness_error`` record of an attempt whose harness was killed mid-run?"""
    return record.status == "harness_error" and (record.error_message or "").startswith(
        HARNESS_DIED
    )


@contextmanager
def _claimed(run_dir: Path, run_id: str) -> Iterator[None]:
    """Hold the run folder's lock, so two harness processes never run the same attempt.

    The kernel drops the lock when its holder dies, so a folder that is unlocked and has no
    record was left by a harness that died mid-attempt.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    # Only the harness's user may enter: whatever the agent leaves in its workspace (say a
    # setuid file, under a sandbox whose user is the host's root) is out of other users' reach.
    run_dir.chmod(0o700)
    with (run_dir / LOCK_FILE).open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise TmlbenchError(
                f"attempt {run_id} is being run by another tmlbench process"
            ) from exc
        yield


def _has_leftovers(run_dir: Path) -> bool:
    """Did an earlier harness start this attempt (and die before writing its record)?

    Only the lock file (and a half-written temporary record) can exist without the attempt
    having started: ``started.json`` is the first thing an attempt writes.
    """
    return any(
        p.name != LOCK_FILE and not p.name.startswith(TEMP_PREFIX) for p in run_dir.iterdir()
    )


def _clear_leftovers(run_dir: Path) -> None:
    """Remove what cannot have started an attempt: stale temporary records of a dead harness."""
    for path in run_dir.glob(f"{TEMP_PREFIX}*"):
        path.unlink(missing_ok=True)


def _write_started(
    run_dir: Path, plan: AttemptPlan, started: dt.datetime, cpuset: str | None
) -> None:
    """The attempt's first file: when and by whom it was started, for crash diagnosis."""
    info = {
        "run_id": plan.run_id,
        "created_at": started.isoformat(),
        "harness_pid": os.getpid(),
        "host": socket.gethostname(),
        "cpuset": cpuset,
    }
    path = run_dir / STARTED_FILE
    path.write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")


def _started_at(run_dir: Path) -> tuple[dt.datetime | None, dict]:
    """When the dead harness started the attempt, from ``started.json`` (None if unknowable)."""
    try:
        info = json.loads((run_dir / STARTED_FILE).read_text(encoding="utf-8"))
        return dt.datetime.fromisoformat(info["created_at"]), info
    except (OSError, ValueError, KeyError, TypeError):
        return None, {}


def _record_dead_harness(
    plan: AttemptPlan,
    ctx: AttemptContext,
    run_dir: Path,
    limits: SandboxLimits,
    cli: InstalledCli | None,
) -> RunRecord:
    """Record an attempt whose harness died mid-run as ``harness_error`` (never the agent's fault).

    Its run id stays taken (records are immutable); the bench runs the next attempt index
    instead. The logs and whatever the agent made are kept for diagnosis; the copied inputs go.
    """
    now = _now()
    started, info = _started_at(run_dir)
    # Its mounts outlive a killed harness: the workspace's own filesystem and the views.
    recover_workspace(run_dir / WORKSPACE_DIR, limits.disk_bytes, limits.inodes)
    release_views(run_dir / VIEWS_NAME)
    _drop_inputs(run_dir / WORKSPACE_DIR)
    _clear_leftovers(run_dir)
    who = (
        f" (pid {info['harness_pid']} on {info.get('host', '?')})" if "harness_pid" in info else ""
    )
    when = f" started at {started.isoformat()}" if started else " (start time unknown)"
    base = _record_base(plan, ctx, limits, started or now, cli)
    if "cpuset" in info:  # the CPUs the dead harness pinned it to, not this harness's
        base["cpuset"] = info["cpuset"]
    logs = {
        f"{name}_path": f"{name}.log"
        for name in ("stdout", "stderr")
        if (run_dir / f"{name}.log").is_file()
    }
    record = RunRecord(
        **base,
        **logs,
        status="harness_error",
        error_message=f"{HARNESS_DIED}: the harness{who} that ran this attempt{when} was killed "
        "before it wrote the record; found unfinished, not blamed on the agent",
        finished_at=now,
    )
    write_record(run_dir, record)
    return record


def _execute(
    plan: AttemptPlan,
    ctx: AttemptContext,
    run_dir: Path,
    limits: SandboxLimits,
    cli: InstalledCli | None,
) -> dict:
    workspace = run_dir / WORKSPACE_DIR
    instructions = _make_workspace(plan, ctx.prepared, workspace)
    driver = make_driver(
        plan.agent, ctx.agent_code_dir, instructions, plan.budget_seconds, run_dir, cli
    )
    with driver:  # what runs beside the sandbox (model loop, proxy, gateway) ends with it
        agent_dir = driver.agent_dir or _empty_dir(run_dir / ".agent")
        paths = ctx.sandbox.paths(workspace, agent_dir)
        seed = derive_seed(plan.run_id)
        fields = sandbox_fields(paths, plan.agent, plan.budget_seconds, seed, instructions)
        driver.prepare_home(workspace, fields)
        base_env = _agent_env(paths.workspace, paths.python, plan, seed)
        request = SandboxRequest(
            command=driver.command(ctx.sandbox, fields),
            workspace=workspace,
            agent_dir=agent_dir,
            env=driver.environment(base_env, ctx.sandbox, fields),
            limits=limits,
            stdout_path=run_dir / "stdout.log",
            stderr_path=run_dir / "stderr.log",
            binds=driver.binds,
        )
        result = ctx.sandbox.run(request)
    status = driver.status()
    if status:  # an override (provider_error...): the file the agent left is still recorded
        outcome = {**_ungraded(plan, ctx, workspace), **status}
    else:
        outcome = _judge(plan, ctx, workspace, result)
    outcome.update(
        driver.record_fields(),
        instructions_sha256=instructions_sha256(instructions),
        wall_seconds=result.wall_seconds,
        cpu_seconds=result.cpu_seconds,
        peak_memory_bytes=result.peak_memory_bytes,
        exit_code=result.exit_code,
        limit_exceeded=result.limit_exceeded,
        workspace_bytes=result.workspace_bytes,
        workspace_files=result.workspace_files,
        workspace_removed=result.workspace_removed,
        workspace_listing_path=_relative(result.workspace_listing, run_dir),
        sandbox_notes=result.notes or None,
        local_validation_score=_local_score(request.stdout_path),
        stdout_path="stdout.log",
        stderr_path="stderr.log",
    )
    _drop_inputs(workspace)
    return outcome


def _judge(plan: AttemptPlan, ctx: AttemptContext, workspace: Path, result: SandboxResult) -> dict:
    """Exactly one status per attempt, decided from what the sandbox and the grader saw.

    Every outcome with a submission file carries its fingerprints (``runner.fingerprint``):
    the grader's own for a graded file, ``_ungraded``'s otherwise.
    """
    submission = workspace / plan.task.submission.file
    present = submission.exists() or submission.is_symlink()
    relpath = f"{WORKSPACE_DIR}/{plan.task.submission.file}" if present else None
    if result.timed_out:
        return {
            "status": "timeout",
            **_ungraded(plan, ctx, workspace),
            "error_message": f"budget of {plan.budget_seconds} s ran out",
        }
    if result.limit_exceeded:
        return {
            "status": "runtime_error",
            **_ungraded(plan, ctx, workspace),
            "error_message": f"the attempt broke its {result.limit_exceeded} cap",
        }
    if not present:
        if result.exit_code == 0:
            return {
                "status": "no_submission",
                "error_message": "the agent exited without a submission",
            }
        return {
            "status": "runtime_error",
            "error_message": f"the agent exited with code {result.exit_code} "
            "and left no submission",
        }
    try:
        graded = grade_submission(
            submission, plan.task, load_answers(ctx.prepared.answers_path, plan.task)
        )
    except InvalidSubmission as exc:
        return {
            "status": "invalid_submission",
            "submission_path": relpath,
            "submission_sha256": exc.submission_sha256,
            "validation_code": exc.code,
            "validation_message": exc.message,
        }
    return {
        "status": "success",
        "score": graded.score,
        "score_hib": graded.score_hib,
        "submission_path": relpath,
        "submission_sha256": graded.submission_sha256,
        "submission_normalized_sha256": graded.normalized_sha256,
    }


def _ungraded(plan: AttemptPlan, ctx: AttemptContext, workspace: Path) -> dict:
    """Where the submission is and the hash of its bytes, for an attempt that is not graded.

    Hashed through the grader's guarded open under the grader's size cap, so what a graded
    attempt would refuse to read (a symlink, a FIFO, an oversized file) gets no hash here
    either. No canonical form: only a scored submission has one.
    """
    name = plan.task.submission.file
    submission = workspace / name
    if not (submission.exists() or submission.is_symlink()):
        return {}
    return {
        "submission_path": f"{WORKSPACE_DIR}/{name}",
        "submission_sha256": hash_submission_file(submission, max_bytes=_size_cap(ctx, plan.task)),
    }


def _size_cap(ctx: AttemptContext, task: TaskSpec) -> int:
    """The grader's size cap for this task, which grows with its number of test rows.

    The rows come from the public manifest (counted when the task was prepared, so no need
    to read the answers for an attempt that is not graded), else from the answers.
    """
    try:
        rows = int(ctx.prepared.manifest()["files"]["test.csv"]["rows"])
    except (OSError, ValueError, KeyError, TypeError):
        rows = len(load_answers(ctx.prepared.answers_path, task))
    return default_max_bytes(rows)


def _make_workspace(plan: AttemptPlan, prepared: PreparedTask, workspace: Path) -> str:
    if not prepared.exists():
        raise TmlbenchError(
            f"task {plan.task.id} is not prepared ({prepared.root}); run: tmlbench tasks prepare {plan.task.id}"
        )
    workspace.mkdir(parents=True)
    for name in (*PUBLIC_FILES, "manifest.json"):
        shutil.copyfile(prepared.public / name, workspace / name)
    text = render_instructions(
        plan.task, plan.budget_seconds, plan.instruction_profile, prepared.manifest()
    )
    (workspace / "INSTRUCTIONS.md").write_text(text, encoding="utf-8")
    return text


def _drop_inputs(workspace: Path) -> None:
    """Remove the copied public inputs (identical to public/): keeps what the agent made, saves disk."""
    for name in ("train.csv", "test.csv"):
        path = workspace / name
        if path.is_file() and not path.is_symlink():
            path.unlink()


def _limits(agent: AgentSpec, budget_seconds: int, cpuset: str | None) -> SandboxLimits:
    return SandboxLimits(
        wall_seconds=float(budget_seconds),
        memory_bytes=int(agent.limits.memory_gb * GIB),
        pids=agent.limits.pids,
        disk_bytes=int(agent.limits.disk_gb * GIB),
        inodes=agent.limits.files,
        cpuset=cpuset,
    )


def _agent_env(workspace: str, python: str, plan: AttemptPlan, seed: int) -> dict[str, str]:
    """The complete environment inside the sandbox: nothing of the host's."""
    threads = str(plan.agent.limits.cpus)
    return {
        "PATH": f"{Path(python).parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": workspace,
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "MPLCONFIGDIR": "/tmp",
        "OMP_NUM_THREADS": threads,
        "OPENBLAS_NUM_THREADS": threads,
        "MKL_NUM_THREADS": threads,
        "TMLBENCH_WORKSPACE": workspace,
        "TMLBENCH_BUDGET_SECONDS": str(plan.budget_seconds),
        "TMLBENCH_SEED": str(seed),
        "TMLBENCH_TASK_ID": plan.task.id,
    }


def _local_score(stdout_path: Path) -> float | None:
    """The last ``local_validation_score: X`` line the agent printed, if any."""
    if not stdout_path.is_file():
        return None
    score = None
    with stdout_path.open("r", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            match = LOCAL_SCORE.match(line)
            if match:
                score = float(match.group(1))
    return score


def _record_base(
    plan: AttemptPlan,
    ctx: AttemptContext,
    limits: SandboxLimits,
    created_at: dt.datetime,
    cli: InstalledCli | None,
) -> dict:
    manifest_sha = ctx.prepared.manifest_sha256() if ctx.prepared.manifest_path.is_file() else None
    return {
        "run_id": plan.run_id,
        "created_at": created_at,
        "suite_id": plan.suite_id,
        "agent_id": plan.agent.id,
        "agent_kind": plan.agent.kind,
        "harness": plan.agent.harness,
        # A pinned CLI's own word for its version, not what the spec hoped for.
        "harness_version": cli.reported_version if cli else plan.agent.harness_version,
        "provider": plan.agent.model.provider,
        "model_id": plan.agent.model.model_id,
        "task_id": plan.task.id,
        "metric_name": plan.task.metric.name,
        "metric_direction": plan.task.metric.direction,
        "budget_seconds": plan.budget_seconds,
        "instruction_profile": plan.instruction_profile,
        "attempt_index": plan.attempt_index,
        "seed": derive_seed(plan.run_id),
        "sandbox_backend": ctx.sandbox.name,
        "sandbox_isolated": ctx.sandbox.isolated,
        "sandbox_unsafe": not ctx.sandbox.isolated and not plan.agent.trusted,
        "cpuset": ctx.cpuset,
        "memory_limit_bytes": limits.memory_bytes,
        "pids_limit": limits.pids,
        "disk_limit_bytes": limits.disk_bytes,
        "task_spec_sha256": ctx.task_spec_sha256,
        "public_manifest_sha256": manifest_sha,
        "tmlbench_version": __version__,
        "git_sha": git_sha(),
    }


def _relative(path: Path | None, run_dir: Path) -> str | None:
    """A run file's path as records keep it: relative to the run folder."""
    return None if path is None else str(path.relative_to(run_dir))


def _empty_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@functools.cache
def git_sha() -> str | None:
    """The repository's commit, looked up once per process (None outside a git checkout)."""
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None
