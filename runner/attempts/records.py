"""The run record: one immutable JSON file per attempt, the unit everything downstream counts."""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import json
import math
import os
import tempfile
import types
import typing
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from runner.attempts.limits import Limit
from runner.errors import HarnessError, TmlbenchError, describe_validation_error
from runner.tasks.vocabulary import Direction

# 2 added the agent-usage fields (requests … egress_bytes_down); 3 added egress_denied_hosts;
# 4 added the workspace fields (workspace_bytes … workspace_listing_path) and sandbox_notes;
# 5 added the submission fingerprints; 6 added the provider-fault fields (provider_faults …
# failed_tokens_out, rate_limited), the task's trivial score and record_notes; 7 added
# unknown_usage_calls, other_requests and forbidden_requests (the gateway's allow-list). Records
# of older versions stay valid.
RECORD_SCHEMA_VERSION = 7
RECORD_FILE = "record.json"
WORKSPACE_DIR = "workspace"
TEMP_PREFIX = ".record."  # write_record's temporary files, next to record.json

Status = Literal[
    "success",
    "invalid_submission",
    "no_submission",
    "timeout",
    "runtime_error",
    "provider_error",
    "harness_error",
]
STATUSES: tuple[str, ...] = Status.__args__  # type: ignore[attr-defined]


class _Part(BaseModel):
    """Immutable (records are), and strict: a misspelt field is an error, never dropped."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class AttemptSetup(_Part):
    """What was run, where, under which caps and from which inputs: known before it starts."""

    run_id: str
    created_at: dt.datetime = Field(description="UTC time the attempt started")
    suite_id: str | None = None

    agent_id: str
    agent_kind: str
    harness: str
    harness_version: str
    provider: str | None = None
    model_id: str | None = None

    task_id: str
    metric_name: str
    metric_direction: Direction
    budget_seconds: int
    instruction_profile: str
    attempt_index: int
    seed: int

    sandbox_backend: str
    sandbox_isolated: bool
    sandbox_unsafe: bool = Field(
        description="an untrusted agent ran without isolation (explicit flag)"
    )
    cpuset: str | None = None
    memory_limit_bytes: int | None = None
    pids_limit: int | None = None
    disk_limit_bytes: int | None = None

    task_spec_sha256: str
    public_manifest_sha256: str | None = None
    trivial_score: float | None = Field(
        default=None,
        description="the trivial prediction's score (training mean or class prior) on this "
        "attempt's holdout, computed when the task was prepared (schema 6); no agent controls it",
    )
    tmlbench_version: str
    git_sha: str | None = None


class Verdict(_Part):
    """The attempt's one status, its score if it counts, and why not if it does not.

    Decided by grading, by the sandbox's outcome (timeout, a broken cap), by a driver (a
    provider error) or by the harness (its own fault).
    """

    status: Status
    score: float | None = Field(default=None, description="raw metric value; only for success")
    score_hib: float | None = Field(
        default=None, description="higher-is-better score; only for success"
    )
    validation_code: str | None = None
    validation_message: str | None = None
    error_message: str | None = None

    submission_path: str | None = None
    # Fingerprints of the submission (schema 5): the file's bytes, and its content in one
    # canonical form (rows sorted by id, numbers written one way), so a replayed or cached
    # answer is recognised however it was re-serialised (marts.duplicate_submissions).
    submission_sha256: str | None = None
    submission_normalized_sha256: str | None = None


class SandboxReport(_Part):
    """What the sandbox measured of the attempt's process, and where its output went."""

    wall_seconds: float | None = None
    cpu_seconds: float | None = None
    peak_memory_bytes: int | None = None
    exit_code: int | None = None
    limit_exceeded: Limit | None = None

    # The workspace when the attempt ended (schema 4): what its own filesystem held, and
    # whether the disk cap ended the attempt (then nothing the agent wrote was kept: only the
    # listing of its largest files, a run file). What the sandbox noted, for diagnosis.
    workspace_bytes: int | None = None
    workspace_files: int | None = None
    workspace_removed: bool | None = None
    workspace_listing_path: str | None = Field(
        default=None, description="relative to the run folder"
    )
    sandbox_notes: list[str] | None = None

    stdout_path: str | None = Field(default=None, description="relative to the run folder")
    stderr_path: str | None = None


class ModelUsage(_Part):
    """What the agent's model calls came to, as the harness counted them: the gateway for a
    command agent (:meth:`runner.agents.gateway.stats.GatewayStats.usage`), the model loop's
    client for the built-in agent; both by the provider-fault rule
    (:meth:`runner.agents.provider_faults.CallCounts.model_usage`)."""

    # Model usage: from the API's usage fields; unknown stays None, never 0.
    tokens_in: int | None = Field(
        default=None,
        description="input tokens of the steps (model replies the agent acted on), exactly as "
        "the provider reported them; None if a step reported none. Other calls' tokens are "
        "failed_tokens_in; calls that reported nothing they owed are unknown_usage_calls",
    )
    tokens_out: int | None = None
    cost_usd: float | None = Field(default=None, description="tokens × the agent spec's prices")
    requests: int | None = Field(default=None, description="model API requests, retries included")
    retries: int | None = None
    steps: int | None = Field(default=None, description="model replies the agent acted on")
    provider_seconds: float | None = Field(
        default=None, description="wall time waiting on the model API (backoff included)"
    )
    tool_seconds: float | None = Field(
        default=None, description="wall time executing the model's tool calls in the sandbox"
    )
    # Provider faults (schema 6): what the provider failed, apart from what the agent did.
    provider_faults: int | None = Field(
        default=None,
        description="model calls the provider failed (HTTP 429 or 5xx, an error event in the "
        "reply, a reply the upstream cut before its terminal event), recovered or not",
    )
    provider_fault_evidence: list[str] | None = Field(
        default=None,
        description="the unrecovered provider faults that made the attempt a provider_error, "
        "one line each",
    )
    interrupted_calls: int | None = Field(
        default=None,
        description="model calls that never reached their protocol's terminal event (not steps)",
    )
    failed_tokens_in: int | None = Field(
        default=None,
        description="tokens the provider reported for failed or interrupted calls; "
        "not in tokens_in",
    )
    failed_tokens_out: int | None = None
    rate_limited: int | None = Field(
        default=None,
        description="model calls refused because the agent exceeded its spec's request rate "
        "(the agent's own doing, never a provider fault)",
    )
    unknown_usage_calls: int | None = Field(
        default=None,
        description="model calls whose usage the provider owed (it took the call) and never "
        "reported, e.g. a stream broken off before its usage chunk (schema 7): the tokens the "
        "key paid for exceed tokens_in + failed_tokens_in by an unknown amount; the gateway's "
        "transcript marks each (usage_unknown, with its call number)",
    )
    other_requests: int | None = Field(
        default=None,
        description="allowed provider requests that generate nothing and bill no tokens: "
        "the model list, Anthropic's count_tokens (schema 7; command agents)",
    )
    forbidden_requests: int | None = Field(
        default=None,
        description="requests off the gateway's allow-list of (method, path), answered 403 "
        "and never forwarded with the key (schema 7; command agents)",
    )


class EgressReport(_Part):
    """What the egress proxy of a command agent counted."""

    # Provider-only egress of command agents: what the harness's allow-listing proxy counted.
    egress_requests: int | None = None
    egress_denied: int | None = None
    egress_denied_hosts: dict[str, int] | None = Field(
        default=None, description="refused 'host:port' -> how often (schema 3)"
    )
    egress_bytes_up: int | None = None
    egress_bytes_down: int | None = None


class DriverReport(EgressReport, ModelUsage):
    """What the agent's driver adds: model usage and egress, counted by the harness.

    Its parts are declared in this order (usage, egress, then the transcript) so that the
    record's fields keep the order the warehouse's columns follow."""

    transcript_path: str | None = None

    @classmethod
    def of(
        cls,
        usage: ModelUsage | None = None,
        egress: EgressReport | None = None,
        *,
        transcript_path: str | None = None,
    ) -> DriverReport:
        parts = [part for part in (usage, egress) if part is not None]
        values = {name: value for part in parts for name, value in part}
        return cls.model_validate(values | {"transcript_path": transcript_path})


class RunRecord(DriverReport, SandboxReport, Verdict, AttemptSetup):
    """Everything known about one attempt. Flat on purpose: one field, one warehouse column.

    Its fields are declared once, in its parts: each part is the typed value one step of an
    attempt produces, and :meth:`assemble` puts them together.

    A record is strict JSON (RFC 8259 has no inf or nan): a non-finite number given for a field
    that may be null becomes null, with a line in ``record_notes`` saying so (an agent printing
    ``local_validation_score: 1e999`` must not make its record unreadable to strict parsers).
    Anywhere else a non-finite number is refused. Records already on disk with ``NaN``,
    ``Infinity`` or a number beyond float64 (all parsed as non-finite) are read the same way.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    schema_version: int = RECORD_SCHEMA_VERSION
    finished_at: dt.datetime | None = None
    local_validation_score: float | None = None
    instructions_sha256: str | None = None
    record_notes: list[str] | None = Field(
        default=None,
        description="what the harness changed to keep the record strict JSON (schema 6), "
        "e.g. a non-finite number recorded as null",
    )

    @model_validator(mode="before")
    @classmethod
    def _non_finite_as_null(cls, data: Any) -> Any:
        return finite_only(data, nullable_fields(cls)) if isinstance(data, dict) else data

    @classmethod
    def assemble(
        cls,
        setup: AttemptSetup,
        verdict: Verdict,
        *,
        finished_at: dt.datetime,
        sandbox: SandboxReport | None = None,
        driver: DriverReport | None = None,
        instructions_sha256: str | None = None,
        local_validation_score: float | None = None,
    ) -> RunRecord:
        parts = [part for part in (setup, verdict, sandbox, driver) if part is not None]
        values = {name: value for part in parts for name, value in part}
        return cls.model_validate(
            values
            | {
                "finished_at": finished_at,
                "instructions_sha256": instructions_sha256,
                "local_validation_score": local_validation_score,
            }
        )


@functools.cache
def nullable_fields(model: type[BaseModel]) -> frozenset[str]:
    """The fields of ``model`` that may be null."""
    return frozenset(
        name
        for name, info in model.model_fields.items()
        if typing.get_origin(info.annotation) in (typing.Union, types.UnionType)
        and type(None) in typing.get_args(info.annotation)
    )


def finite_only(values: dict[str, Any], nullable: frozenset[str]) -> dict[str, Any]:
    """``values`` with each non-finite number of a ``nullable`` field as null, and one note per
    field replaced appended to ``record_notes``. Fields are flat: numbers inside a map or list
    (a map of refused hosts counts ints) are left to validation, which refuses non-finite ones.
    """
    replaced = {
        name: value
        for name, value in values.items()
        if name in nullable and isinstance(value, float) and not math.isfinite(value)
    }
    if not replaced:
        return values
    notes = [
        f"{name}: {value} is not a finite number, which JSON cannot hold; recorded as null"
        for name, value in replaced.items()
    ]
    earlier = values.get("record_notes")
    if earlier is not None and not isinstance(earlier, list):
        return values | dict.fromkeys(replaced)  # validation refuses the notes, with a message
    return values | dict.fromkeys(replaced) | {"record_notes": [*(earlier or []), *notes]}


def write_record(run_dir: Path, record: RunRecord) -> Path:
    """Write ``record.json`` atomically and never over an existing record (records are immutable).

    The record appears whole or not at all: it is written to a temporary file, flushed to disk and
    then hard-linked into place. If the disk is full (or any write fails) no ``record.json`` and no
    temporary file is left behind, and a ``HarnessError`` names the file and the reason.

    It is strict JSON: a validated record holds no non-finite number, and one made without
    validation (``model_copy``, ``model_construct``) gets the same treatment here; were one left
    anyway, ``allow_nan=False`` makes it an error rather than a record strict parsers refuse.
    """
    final = run_dir / RECORD_FILE
    values = finite_only(record.model_dump(mode="json"), nullable_fields(RunRecord))
    payload = json.dumps(values, indent=2, sort_keys=True, allow_nan=False) + "\n"
    try:
        fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=run_dir)
    except OSError as exc:
        raise HarnessError(f"cannot write {final}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, final)  # fails if a record is already there: no silent overwrite
        except FileExistsError as exc:
            raise TmlbenchError(
                f"{final}: a record already exists; run records are immutable"
            ) from exc
        _fsync_dir(run_dir)
    except OSError as exc:
        raise HarnessError(f"cannot write {final}: {exc.strerror or exc}") from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return final


def _fsync_dir(path: Path) -> None:
    """Make the new directory entry durable (a power cut must not lose a finished record)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_record(path: Path) -> RunRecord:
    try:
        return RunRecord.model_validate_json(path.read_bytes())
    except ValidationError as exc:
        raise TmlbenchError(
            f"{path}: not a valid run record: {describe_validation_error(exc)}"
        ) from exc


def iter_record_paths(runs_dir: Path) -> list[Path]:
    """Every record under ``runs_dir``, at any depth so suites can keep their own sub-folders.

    A run folder is never descended into: an agent may write a file named record.json in its
    workspace, and that must not count as a record.
    """
    found: list[str] = []
    for root, dirs, files in os.walk(runs_dir):
        if RECORD_FILE in files or WORKSPACE_DIR in dirs:
            if RECORD_FILE in files:
                found.append(os.path.join(root, RECORD_FILE))
            dirs.clear()
    found.sort()  # as strings: sorting 100,000 Path objects costs about a second
    return [Path(p) for p in found]


def run_space(record_path: Path, runs_dir: Path) -> str:
    """Where a record's run id is unique: the folder holding its run folder, relative to the runs
    root, spelled as a suite's ``runs_subdir`` is ('demo', 'tml-v1', '.' for the root itself)."""
    return PurePosixPath(os.path.relpath(record_path.parent.parent, runs_dir)).as_posix()


def load_records(runs_dir: Path) -> list[RunRecord]:
    return [read_record(p) for p in iter_record_paths(runs_dir)]
