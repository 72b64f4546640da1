"""One attempt: fresh workspace → agent in a sandbox under a hard budget → grading → record."""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import re
import shutil
import subprocess
import traceback
from dataclasses import dataclass
from pathlib import Path

from runner import __version__
from runner.agents.drivers import make_driver, preflight, sandbox_fields
from runner.agents.installs import InstalledCli
from runner.attempts.records import (
    RECORD_FILE,
    WORKSPACE_DIR,
    AttemptSetup,
    RunRecord,
    SandboxReport,
    Verdict,
    read_record,
    write_record,
)
from runner.attempts.run_folder import (
    LOG_FILES,
    claimed,
    clear_leftovers,
    drop_inputs,
    has_leftovers,
    read_started,
    record_dead_harness,
    write_started,
)
from runner.attempts.verdicts import judge, ungraded
from runner.config import REPO_ROOT
from runner.errors import TmlbenchError
from runner.sandbox import Sandbox, SandboxLimits, SandboxRequest, SandboxResult
from runner.specs import AgentSpec, TaskSpec
from runner.tasks.instructions.render import instructions_sha256, render_instructions
from runner.tasks.manifest import MANIFEST_FILE, PUBLIC_FILES
from runner.tasks.prepared_files import PreparedTask, verify_public

GIB = 1024**3
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
    clis_dir: Path | None = (
        None  # where agent CLIs are installed (None: runner.agents.installs's default)
    )
    provider_key: str | None = None  # the provider's API key; None: $<the agent's api_key_env>


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
    ``runner.attempts.run_folder``) and the caller moves on to the next attempt index. Public files that
    no longer match the task's manifest raise a ``TmlbenchError`` before anything is written.
    """
    if not ctx.sandbox.isolated and not plan.agent.trusted and not ctx.allow_unsafe:
        raise TmlbenchError(
            f"agent {plan.agent.id} is not a trusted built-in and the {ctx.sandbox.name!r} backend does "
            "not isolate it; use --backend bwrap, or pass --unsafe-no-isolation to accept the risk"
        )
    cli = preflight(plan.agent, ctx.sandbox, ctx.clis_dir, ctx.provider_key)
    if ctx.prepared.exists():  # an unprepared task becomes a harness_error record below
        verify_public(ctx.prepared)  # a truncated or tampered public file: refuse, run nothing
    run_dir = ctx.runs_dir / plan.run_id
    with claimed(run_dir, plan.run_id):
        previous = existing_record(ctx.runs_dir, plan.run_id)
        if previous is not None:
            return previous
        limits = _limits(plan.agent, plan.budget_seconds, ctx.cpuset)
        if has_leftovers(run_dir):
            started = read_started(run_dir)
            # Dated and pinned as the dead harness ran it, not as this harness would.
            setup = _setup(
                plan,
                ctx,
                limits,
                cli,
                created_at=started.created_at if started else _now(),
                cpuset=started.cpuset if started else ctx.cpuset,
            )
            return record_dead_harness(run_dir, setup, started, limits)
        clear_leftovers(run_dir)
        created_at = _now()
        write_started(run_dir, plan.run_id, created_at, ctx.cpuset)
        setup = _setup(plan, ctx, limits, cli, created_at=created_at, cpuset=ctx.cpuset)
        try:
            record = _execute(plan, ctx, run_dir, limits, cli, setup)
        except Exception as exc:  # a harness fault is recorded, never blamed on the agent
            (run_dir / "harness_error.txt").write_text(traceback.format_exc(), encoding="utf-8")
            fault = Verdict(status="harness_error", error_message=f"{type(exc).__name__}: {exc}")
            record = RunRecord.assemble(setup, fault, finished_at=_now())
        write_record(run_dir, record)
        return record


def _execute(
    plan: AttemptPlan,
    ctx: AttemptContext,
    run_dir: Path,
    limits: SandboxLimits,
    cli: InstalledCli | None,
    setup: AttemptSetup,
) -> RunRecord:
    workspace = run_dir / WORKSPACE_DIR
    instructions = _make_workspace(plan, ctx.prepared, workspace)
    driver = make_driver(
        plan.agent,
        ctx.agent_code_dir,
        instructions,
        plan.budget_seconds,
        run_dir,
        cli,
        ctx.provider_key,
    )
    stdout_log, stderr_log = LOG_FILES
    with driver:  # what runs beside the sandbox (model loop, proxy, gateway) ends with it
        agent_dir = driver.agent_dir or _empty_dir(run_dir / ".agent")
        paths = ctx.sandbox.paths(workspace, agent_dir)
        fields = sandbox_fields(paths, plan.agent, plan.budget_seconds, setup.seed, instructions)
        driver.prepare_home(workspace, fields)
        base_env = _agent_env(paths.workspace, paths.python, plan, setup.seed)
        request = SandboxRequest(
            command=driver.command(ctx.sandbox, fields),
            workspace=workspace,
            agent_dir=agent_dir,
            env=driver.environment(base_env, ctx.sandbox, fields),
            limits=limits,
            stdout_path=run_dir / stdout_log,
            stderr_path=run_dir / stderr_log,
            binds=driver.binds,
            watched_cap=driver.watched_cap,
        )
        result = ctx.sandbox.run(request)
    overruled = driver.status()
    if overruled:  # e.g. provider_error: the file the agent left is still recorded
        verdict = ungraded(
            plan.task, ctx.prepared, workspace, overruled.status, overruled.error_message
        )
    else:  # the driver may still turn the would-be verdict into a provider's fault
        verdict = driver.review(
            judge(plan.task, ctx.prepared, workspace, result, plan.budget_seconds)
        )
    # After the verdict, before the record: what could not be dropped is noted in it.
    dropped_notes = drop_inputs(workspace) + driver.notes()
    return RunRecord.assemble(
        setup,
        verdict,
        sandbox=_sandbox_report(result, run_dir, stdout_log, stderr_log, dropped_notes),
        driver=driver.report(),
        instructions_sha256=instructions_sha256(instructions),
        local_validation_score=_local_score(request.stdout_path),
        finished_at=_now(),
    )


def _sandbox_report(
    result: SandboxResult, run_dir: Path, stdout_log: str, stderr_log: str, notes: list[str]
) -> SandboxReport:
    return SandboxReport(
        wall_seconds=result.wall_seconds,
        cpu_seconds=result.cpu_seconds,
        peak_memory_bytes=result.peak_memory_bytes,
        exit_code=result.exit_code,
        limit_exceeded=result.limit_exceeded,
        workspace_bytes=result.workspace_bytes,
        workspace_files=result.workspace_files,
        workspace_removed=result.workspace_removed,
        # A run file's path as records keep it: relative to the run folder.
        workspace_listing_path=(
            None
            if result.workspace_listing is None
            else str(result.workspace_listing.relative_to(run_dir))
        ),
        sandbox_notes=[*result.notes, *notes] or None,
        stdout_path=stdout_log,
        stderr_path=stderr_log,
    )


def _make_workspace(plan: AttemptPlan, prepared: PreparedTask, workspace: Path) -> str:
    if not prepared.exists():
        raise TmlbenchError(
            f"task {plan.task.id} is not prepared ({prepared.root}); run: tmlbench tasks prepare {plan.task.id}"
        )
    workspace.mkdir(parents=True)
    for name in (*PUBLIC_FILES, MANIFEST_FILE):
        shutil.copyfile(prepared.public / name, workspace / name)
    text = render_instructions(
        plan.task, plan.budget_seconds, plan.instruction_profile, prepared.manifest()
    )
    (workspace / "INSTRUCTIONS.md").write_text(text, encoding="utf-8")
    return text


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


def _setup(
    plan: AttemptPlan,
    ctx: AttemptContext,
    limits: SandboxLimits,
    cli: InstalledCli | None,
    *,
    created_at: dt.datetime,
    cpuset: str | None,
) -> AttemptSetup:
    manifest_sha = ctx.prepared.manifest_sha256() if ctx.prepared.manifest_path.is_file() else None
    return AttemptSetup(
        run_id=plan.run_id,
        created_at=created_at,
        suite_id=plan.suite_id,
        agent_id=plan.agent.id,
        agent_kind=plan.agent.kind,
        harness=plan.agent.harness,
        # A pinned CLI's own word for its version, not what the spec hoped for.
        harness_version=cli.reported_version if cli else plan.agent.harness_version,
        provider=plan.agent.model.provider,
        model_id=plan.agent.model.model_id,
        task_id=plan.task.id,
        metric_name=plan.task.metric.name,
        metric_direction=plan.task.metric.direction,
        budget_seconds=plan.budget_seconds,
        instruction_profile=plan.instruction_profile,
        attempt_index=plan.attempt_index,
        seed=derive_seed(plan.run_id),
        sandbox_backend=ctx.sandbox.name,
        sandbox_isolated=ctx.sandbox.isolated,
        sandbox_unsafe=not ctx.sandbox.isolated and not plan.agent.trusted,
        cpuset=cpuset,
        memory_limit_bytes=limits.memory_bytes,
        pids_limit=limits.pids,
        disk_limit_bytes=limits.disk_bytes,
        task_spec_sha256=ctx.task_spec_sha256,
        public_manifest_sha256=manifest_sha,
        trivial_score=ctx.prepared.trivial_score() if ctx.prepared.exists() else None,
        tmlbench_version=__version__,
        git_sha=git_sha(),
    )


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
