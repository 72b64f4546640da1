"""Integrity checks over a suite's prepared data and run records (used by Dagster asset checks)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import PurePosixPath
from typing import TypedDict

from runner.attempts.records import RunRecord
from runner.suites.benchmark_settings import Setting, setting_key
from runner.tasks.prepared_files import PreparedTask


class PreparedFacts(TypedDict):
    """What ``describe_prepared`` says of a prepared task."""

    train_rows: int
    test_rows: int
    columns: int | None
    manifest_sha256: str
    bayes_optimal_score: float | None
    constant_score: float | None
    source: str | None


def describe_prepared(prepared: PreparedTask) -> PreparedFacts:
    """What a person wants to know about a prepared task: sizes, manifest hash, reference scores."""
    manifest = prepared.manifest()
    meta = prepared.meta()
    return {
        "train_rows": manifest.rows("train.csv"),
        "test_rows": manifest.rows("test.csv"),
        "columns": manifest.files["train.csv"].columns,
        "manifest_sha256": prepared.manifest_sha256(),
        "bayes_optimal_score": meta.bayes_optimal_score,
        "constant_score": meta.constant_score,
        "source": meta.source.kind if meta.source else None,
    }


def coverage_gaps(
    settings: Iterable[Setting], records: Iterable[RunRecord], wanted: int
) -> dict[str, int]:
    """Settings with fewer than ``wanted`` successes → how many they have."""
    successes: dict[str, int] = {}
    for r in records:
        if r.status == "success":
            key = setting_key(r.agent_id, r.task_id, r.budget_seconds)
            successes[key] = successes.get(key, 0) + 1
    return {s.key: successes.get(s.key, 0) for s in settings if successes.get(s.key, 0) < wanted}


def manifest_drift(
    records: Iterable[RunRecord], prepared: Callable[[str], PreparedTask]
) -> list[str]:
    """Runs whose task's public manifest is no longer the one they were given."""
    current: dict[str, str | None] = {}
    drift = []
    for r in records:
        if r.task_id not in current:
            task = prepared(r.task_id)
            current[r.task_id] = task.manifest_sha256() if task.manifest_path.is_file() else None
        if r.public_manifest_sha256 is not None and r.public_manifest_sha256 != current[r.task_id]:
            drift.append(
                f"{r.run_id}: ran on manifest {r.public_manifest_sha256[:12]}, "
                f"task {r.task_id} now has {(current[r.task_id] or 'none')[:12]}"
            )
    return drift


RECORD_PATH_FIELDS = ("stdout_path", "stderr_path", "transcript_path", "submission_path")


def private_references(records: Iterable[RunRecord]) -> list[str]:
    """Record paths that name a ``private`` directory or lead outside their run folder.

    Judged on what the record says (its paths are relative to its run folder), never by
    resolving them on disk: the entries they name are the agent's (a submission may be a
    link to anywhere, or a loop), and where those point is no claim of the record.
    """
    problems = []
    for r in records:
        for name in RECORD_PATH_FIELDS:
            value = getattr(r, name)
            if value is None:
                continue
            path = PurePosixPath(value)
            if "private" in path.parts:
                problems.append(f"{r.run_id}: {name} {value!r} points into a private directory")
            elif path.is_absolute() or _climbs_out(path):
                problems.append(f"{r.run_id}: {name} {value!r} leaves the run folder")
    return problems


def _climbs_out(path: PurePosixPath) -> bool:
    """Does the relative ``path`` reach above its start (``a/../..``), by its text alone?"""
    depth = 0
    for part in path.parts:
        depth += -1 if part == ".." else 1
        if depth < 0:
            return True
    return False
