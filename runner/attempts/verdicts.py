"""Exactly one status per attempt, decided from what the sandbox and the grader saw.

Every verdict on an attempt that left a submission file carries its fingerprints
(``runner.grading.fingerprint``): the grader's own for a graded file, :func:`ungraded`'s otherwise.

Whether the agent left a submission is asked of its folder's descriptor, never by resolving
the name (``runner.agent_files``): a name the harness cannot look at counts as left, and the
grader then refuses it with the reason (``invalid_submission``), never a fault.
"""

from __future__ import annotations

from pathlib import Path

from runner.agent_files import AgentFolder
from runner.attempts.records import WORKSPACE_DIR, Status, Verdict
from runner.errors import TmlbenchError
from runner.grading import (
    InvalidSubmission,
    default_max_bytes,
    grade_submission,
    hash_submission_file,
    load_answers,
)
from runner.sandbox import SandboxResult
from runner.specs import TaskSpec
from runner.tasks.prepared_files import PreparedTask


def judge(
    task: TaskSpec,
    prepared: PreparedTask,
    workspace: Path,
    result: SandboxResult,
    budget_seconds: int,
) -> Verdict:
    """The verdict on a finished attempt that its driver did not overrule."""
    if result.timed_out:
        return ungraded(
            task, prepared, workspace, "timeout", f"budget of {budget_seconds} s ran out"
        )
    if result.limit_exceeded:
        return ungraded(
            task,
            prepared,
            workspace,
            "runtime_error",
            f"the attempt broke its {result.limit_exceeded} cap",
        )
    submission = workspace / task.submission.file
    if not left_behind(workspace, task.submission.file):
        if result.exit_code == 0:
            return Verdict(
                status="no_submission", error_message="the agent exited without a submission"
            )
        return Verdict(
            status="runtime_error",
            error_message=f"the agent exited with code {result.exit_code} and left no submission",
        )
    relpath = f"{WORKSPACE_DIR}/{task.submission.file}"
    try:
        graded = grade_submission(submission, task, load_answers(prepared.answers_path, task))
    except InvalidSubmission as exc:
        return Verdict(
            status="invalid_submission",
            submission_path=relpath,
            submission_sha256=exc.submission_sha256,
            validation_code=exc.code,
            validation_message=exc.message,
        )
    return Verdict(
        status="success",
        score=graded.score,
        score_hib=graded.score_hib,
        submission_path=relpath,
        submission_sha256=graded.submission_sha256,
        submission_normalized_sha256=graded.normalized_sha256,
    )


def ungraded(
    task: TaskSpec, prepared: PreparedTask, workspace: Path, status: Status, message: str | None
) -> Verdict:
    """A verdict without grading, with where the submission is and the hash of its bytes.

    Hashed through the grader's guarded open under the grader's size cap, so what a graded
    attempt would refuse to read (a symlink, a FIFO, an oversized file) gets no hash here
    either. No canonical form: only a scored submission has one.
    """
    if not left_behind(workspace, task.submission.file):
        return Verdict(status=status, error_message=message)
    return Verdict(
        status=status,
        error_message=message,
        submission_path=f"{WORKSPACE_DIR}/{task.submission.file}",
        submission_sha256=hash_submission_file(
            workspace / task.submission.file, max_bytes=_size_cap(prepared, task)
        ),
    )


def left_behind(workspace: Path, name: str) -> bool:
    """Did the agent leave an entry ``name`` of any kind (or one the harness cannot look at)?"""
    with AgentFolder(workspace) as folder:
        return folder.look(name).exists


def _size_cap(prepared: PreparedTask, task: TaskSpec) -> int:
    """The grader's size cap for this task, which grows with its number of test rows.

    The rows come from the public manifest (counted when the task was prepared, so no need
    to read the answers for an attempt that is not graded), else from the answers.
    """
    try:
        rows = prepared.manifest().rows("test.csv")
    except TmlbenchError:
        rows = len(load_answers(prepared.answers_path, task))
    return default_max_bytes(rows)
