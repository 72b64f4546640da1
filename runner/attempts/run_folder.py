"""One attempt's run folder: claimed by one harness, started, finished with its record.

A folder that a killed harness left unfinished (started, no record) is never run again: it
gets a ``harness_error`` record of its own (:func:`record_dead_harness`), never blamed on the
agent, and the bench runs the next attempt index instead.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, ValidationError

from runner.agent_files import AgentFolder, describe_error
from runner.attempts.records import (
    TEMP_PREFIX,
    WORKSPACE_DIR,
    AttemptSetup,
    RunRecord,
    SandboxReport,
    Verdict,
    write_record,
)
from runner.errors import TmlbenchError
from runner.sandbox import SandboxLimits
from runner.sandbox.views import VIEWS_NAME
from runner.sandbox.views import release as release_views
from runner.sandbox.workspace import recover as recover_workspace

LOCK_FILE = ".lock"
STARTED_FILE = "started.json"
HARNESS_DIED = "harness died mid-attempt"
COPIED_INPUTS = ("train.csv", "test.csv")  # identical to public/: dropped once the attempt ends
LOG_FILES = ("stdout.log", "stderr.log")


class Started(BaseModel):
    """``started.json``: when and by whom an attempt was started, for crash diagnosis."""

    run_id: str
    created_at: dt.datetime
    harness_pid: int
    host: str
    cpuset: str | None = None


@contextmanager
def claimed(run_dir: Path, run_id: str) -> Iterator[None]:
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


def has_leftovers(run_dir: Path) -> bool:
    """Did an earlier harness start this attempt (and die before writing its record)?

    Only the lock file (and a half-written temporary record) can exist without the attempt
    having started: ``started.json`` is the first thing an attempt writes.
    """
    return any(
        p.name != LOCK_FILE and not p.name.startswith(TEMP_PREFIX) for p in run_dir.iterdir()
    )


def clear_leftovers(run_dir: Path) -> None:
    """Remove what cannot have started an attempt: stale temporary records of a dead harness."""
    for path in run_dir.glob(f"{TEMP_PREFIX}*"):
        path.unlink(missing_ok=True)


def write_started(run_dir: Path, run_id: str, started: dt.datetime, cpuset: str | None) -> None:
    """The attempt's first file (see :class:`Started`)."""
    info = {
        "run_id": run_id,
        "created_at": started.isoformat(),
        "harness_pid": os.getpid(),
        "host": socket.gethostname(),
        "cpuset": cpuset,
    }
    path = run_dir / STARTED_FILE
    path.write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")


def read_started(run_dir: Path) -> Started | None:
    """What ``started.json`` says of a dead harness's attempt (None if it is gone or garbled)."""
    try:
        return Started.model_validate_json((run_dir / STARTED_FILE).read_bytes())
    except (OSError, ValidationError):
        return None


def record_dead_harness(
    run_dir: Path, setup: AttemptSetup, started: Started | None, limits: SandboxLimits
) -> RunRecord:
    """Record an attempt whose harness died mid-run as ``harness_error`` (never the agent's fault).

    ``setup`` is dated when the dead harness started the attempt, and pinned to its CPUs.
    Its run id stays taken (records are immutable); the bench runs the next attempt index
    instead. The logs and whatever the agent made are kept for diagnosis; the copied inputs go.
    """
    now = dt.datetime.now(dt.UTC)
    # Its mounts outlive a killed harness: the workspace's own filesystem and the views.
    recover_workspace(run_dir / WORKSPACE_DIR, limits.disk_bytes, limits.inodes)
    release_views(run_dir / VIEWS_NAME)
    notes = drop_inputs(run_dir / WORKSPACE_DIR)
    clear_leftovers(run_dir)
    if started is None:
        who, when = "", " (start time unknown)"
    else:
        who = f" (pid {started.harness_pid} on {started.host})"
        when = f" started at {started.created_at.isoformat()}"
    stdout, stderr = (name if (run_dir / name).is_file() else None for name in LOG_FILES)
    record = RunRecord.assemble(
        setup,
        Verdict(
            status="harness_error",
            error_message=f"{HARNESS_DIED}: the harness{who} that ran this attempt{when} was "
            "killed before it wrote the record; found unfinished, not blamed on the agent",
        ),
        sandbox=SandboxReport(stdout_path=stdout, stderr_path=stderr, sandbox_notes=notes or None),
        finished_at=now,
    )
    write_record(run_dir, record)
    return record


def died_mid_attempt(record: RunRecord) -> bool:
    """Is this the ``harness_error`` record of an attempt whose harness was killed mid-run?"""
    return record.status == "harness_error" and (record.error_message or "").startswith(
        HARNESS_DIED
    )


def drop_inputs(workspace: Path) -> list[str]:
    """Remove the copied public inputs (identical to public/): keeps what the agent made, saves disk.

    Only a regular file is removed, looked at through the folder's descriptor, never by
    resolving its name (``runner.agent_files``). Whatever else the agent left under an
    input's name stays, with a note saying why (never a fault: it is the agent's doing).
    """
    notes = []
    with AgentFolder(workspace) as folder:
        for name in COPIED_INPUTS:
            look = folder.look(name)
            if not look.exists:
                continue
            if look.error is not None:
                notes.append(f"{name} kept: it cannot be looked at ({describe_error(look.error)})")
            elif not look.is_regular_file:
                notes.append(f"{name} kept: the agent left a {look.kind()} there")
            else:
                try:
                    folder.remove_file(name)
                except OSError as exc:
                    notes.append(f"{name} kept: it cannot be removed ({describe_error(exc)})")
    return [f"workspace: {note}" for note in notes]
