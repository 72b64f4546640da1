"""Import results of the original TML-bench harness (its SQLite database and/or result.json files).

Field mapping onto ``raw.runs`` (source 'tml-bench'):

================================  =========================================================
raw.runs                          TML-bench
================================  =========================================================
run_id, created_at, seed          run_id, created_at (ISO with offset, stored as UTC), seed
agent_id / model_id / provider    model_id / model_id / provider
agent_kind, harness               'command', 'kilo'
harness_version                   kilo_version
task_id                           competition_id
metric_name, metric_direction     metric_name, runner.metrics direction of that metric
budget_seconds                    budget_time_seconds
instruction_profile               prompt_profile
attempt_index                     0-based order by created_at (ties: run_id) within
                                  (agent, task, budget, profile), over everything imported
status                            status (success, invalid_submission, runtime_error, timeout)
score, score_hib                  score_raw and its higher-is-better value; success only
wall_seconds                      runtime_seconds
task_spec_sha256                  spec_sha256
instructions_sha256               prompt_sha256
public_manifest_sha256, git_sha   public_manifest_sha256, git_sha
tmlbench_version                  benchmark_version
sandbox_backend                   'tml-bench' (isolation unknown: sandbox_isolated false)
================================  =========================================================

score_normalized, prompt_strategy, temperature and max_tokens have no raw.runs column; they
are part of the content hash (``record_sha256``) so a change to them is still a conflict.
Imported models also get a raw.agents row (source 'tml-bench') unless an agent spec has one.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import sqlite3
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
from pydantic import ValidationError

from runner.errors import TmlbenchError, describe_validation_error
from runner.metrics import get_metric
from runner.records import RECORD_SCHEMA_VERSION, RunRecord
from warehouse.loader import Candidate, LoadReport, ingest

SOURCE = "tml-bench"
RESULT_FILE = "result.json"
STATUSES = ("success", "invalid_submission", "runtime_error", "timeout")

# Flat field name -> (required, kind). Required fields must be present (NULL is refused for
# those marked not-null below); optional ones may be absent and then count as NULL.
REQUIRED = (
    "run_id",
    "created_at",
    "competition_id",
    "status",
    "metric_name",
    "score_raw",
    "runtime_seconds",
    "budget_time_seconds",
    "seed",
    "prompt_profile",
    "model_id",
    "spec_sha256",
    "kilo_version",
    "benchmark_version",
)
OPTIONAL = (
    "score_normalized",
    "prompt_strategy",
    "provider",
    "temperature",
    "max_tokens",
    "prompt_sha256",
    "public_manifest_sha256",
    "git_sha",
)
KNOWN = REQUIRED + OPTIONAL
NOT_NULL = tuple(f for f in REQUIRED if f not in ("score_raw", "runtime_seconds"))
FLOATS = ("score_raw", "score_normalized", "runtime_seconds", "temperature")
INTS = ("budget_time_seconds", "seed", "max_tokens")

# result.json: where each flat field sits (top level unless listed here).
NESTED = {
    "model": ("provider", "model_id", "temperature", "max_tokens"),
    "budget": {"time_seconds": "budget_time_seconds"},
    "versions": ("kilo_version", "benchmark_version", "git_sha"),
    "provenance": ("spec_sha256", "prompt_sha256", "public_manifest_sha256"),
}
TOP_LEVEL = (
    "run_id",
    "created_at",
    "competition_id",
    "status",
    "metric_name",
    "score_raw",
    "score_normalized",
    "runtime_seconds",
    "seed",
    "prompt_profile",
    "prompt_strategy",
)


def import_tml_bench(con: duckdb.DuckDBPyConnection, *sources: Path) -> LoadReport:
    """Import TML-bench results from SQLite files (``.sqlite``/``.db``) and/or result.json folders.

    Same rules as ``warehouse.loader.load_runs``: idempotent by run_id and content hash, bad
    rows rejected with a reason, one transaction for everything.
    """
    if not sources:
        raise TmlbenchError("name a TML-bench SQLite database or a folder of result.json files")
    rows: list[tuple[str, dict[str, Any]]] = []  # (source_path, flat row)
    rejected: list[tuple[str, str]] = []
    for source in map(Path, sources):
        if source.is_dir():
            rows_from_json(source, rows, rejected)
        elif source.is_file():
            rows.extend((f"{source}#run_id={row['run_id']}", row) for row in read_sqlite(source))
        else:
            raise TmlbenchError(f"{source}: no such file or folder")

    metric_direction = _metric_directions(row.get("metric_name") for _, row in rows)
    candidates: list[Candidate] = []
    agents: dict[str, str | None] = {}
    for source_path, row in rows:
        try:
            record = to_record(row, metric_direction)
        except ValueError as exc:
            rejected.append((source_path, f"{source_path}: {exc}"))
            continue
        candidates.append(Candidate(record, source_path, content_sha256(row)))
        agents.setdefault(record.agent_id, record.provider)
    return ingest(con, candidates, rejected, source=SOURCE, in_transaction=_after_insert(agents))


# ---------------------------------------------------------------------------------------------
# reading


def read_sqlite(path: Path) -> list[dict[str, Any]]:
    """Every row of the ``runs`` table, as flat dicts; TmlbenchError if the columns are off."""
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise TmlbenchError(f"{path}: cannot open as SQLite: {exc}") from None
    try:
        try:
            cur = con.execute("select * from runs")
        except sqlite3.DatabaseError as exc:
            raise TmlbenchError(
                f"{path}: not a TML-bench results database (no readable table 'runs': {exc})"
            ) from None
        columns = [d[0] for d in cur.description]
        _check_fields(columns, f"{path}: table runs")
        return [dict(zip(columns, values, strict=True)) for values in cur.fetchall()]
    finally:
        con.close()


def rows_from_json(
    folder: Path, rows: list[tuple[str, dict[str, Any]]], rejected: list[tuple[str, str]]
) -> None:
    """Flatten every ``result.json`` under ``folder``; a bad file is rejected, not fatal."""
    files = sorted(folder.rglob(RESULT_FILE))
    if not files:
        raise TmlbenchError(f"{folder}: no {RESULT_FILE} files found")
    for path in files:
        try:
            data = json.loads(path.read_bytes())
            rows.append((str(path), flatten_result(data)))
        except (OSError, ValueError) as exc:
            rejected.append((str(path), f"{path}: {exc}"))


def flatten_result(data: Any) -> dict[str, Any]:
    """A result.json document as the flat row the SQLite table would hold."""
    if not isinstance(data, dict):
        raise ValueError("not a TML-bench result: expected a JSON object at the top level")
    flat: dict[str, Any] = {}
    unknown: list[str] = []
    for key, value in data.items():
        if key in NESTED:
            if not isinstance(value, dict):
                raise ValueError(f"{key!r} must be an object, got {type(value).__name__}")
            names = NESTED[key]
            mapping = names if isinstance(names, dict) else {n: n for n in names}
            for sub, sub_value in value.items():
                if sub in mapping:
                    flat[mapping[sub]] = sub_value
                else:
                    unknown.append(f"{key}.{sub}")
        elif key in TOP_LEVEL:
            flat[key] = value
        else:
            unknown.append(key)
    if unknown:
        raise ValueError(
            f"unknown field(s) {', '.join(unknown)} (this importer knows the fields of "
            "TML-bench result.json; extend warehouse/importers/tml_bench.py for new ones)"
        )
    missing = [_json_name(f) for f in REQUIRED if f not in flat]
    if missing:
        raise ValueError(f"missing required field(s) {', '.join(missing)}")
    return flat


def _json_name(flat_name: str) -> str:
    for key, names in NESTED.items():
        if isinstance(names, dict):
            for sub, flat in names.items():
                if flat == flat_name:
                    return f"{key}.{sub}"
        elif flat_name in names:
            return f"{key}.{flat_name}"
    return flat_name


def _check_fields(columns: Iterable[str], where: str) -> None:
    columns = list(columns)
    missing = [c for c in REQUIRED if c not in columns]
    unknown = [c for c in columns if c not in KNOWN]
    problems = []
    if missing:
        problems.append(f"missing required column(s) {', '.join(missing)}")
    if unknown:
        problems.append(
            f"unknown column(s) {', '.join(unknown)} (extend warehouse/importers/tml_bench.py "
            "to map them)"
        )
    if problems:
        raise TmlbenchError(f"{where}: {'; '.join(problems)}")


# ---------------------------------------------------------------------------------------------
# mapping


def _metric_directions(names: Iterable[Any]) -> Callable[[str], str]:
    """Direction per metric name; TmlbenchError naming every metric runner.metrics does not know."""
    directions: dict[str, str] = {}
    unknown: set[str] = set()
    for name in names:
        if name is None or name in directions or name in unknown:
            continue
        try:
            directions[name] = get_metric(name).direction
        except TmlbenchError:
            unknown.add(str(name))
    if unknown:
        raise TmlbenchError(
            f"unknown metric(s) {', '.join(sorted(unknown))} in the TML-bench results: their "
            "direction (higher or lower is better) is not known; add them to runner/metrics.py"
        )
    return directions.__getitem__


def to_record(row: Mapping[str, Any], metric_direction: Callable[[str], str]) -> RunRecord:
    """One TML-bench row as a RunRecord (attempt_index is provisional: renumbered on insert)."""
    missing = [_json_name(f) for f in NOT_NULL if row.get(f) is None]
    if missing:
        raise ValueError(f"run {row.get('run_id')!r}: required field(s) {', '.join(missing)} empty")
    status = row["status"]
    if status not in STATUSES:
        raise ValueError(
            f"run {row['run_id']!r}: unknown status {status!r} (TML-bench statuses: "
            f"{', '.join(STATUSES)})"
        )
    created_at = _timestamp(row["created_at"], row["run_id"])
    score = row.get("score_raw") if status == "success" else None
    if status == "success" and score is None:
        raise ValueError(f"run {row['run_id']!r}: status success but score_raw is empty")
    direction = metric_direction(row["metric_name"])
    score_hib = None
    if score is not None:
        score = float(score)
        score_hib = score if direction == "maximize" else -score
    try:
        return RunRecord(
            schema_version=RECORD_SCHEMA_VERSION,
            run_id=str(row["run_id"]),
            created_at=created_at,
            agent_id=row["model_id"],
            agent_kind="command",
            harness="kilo",
            harness_version=str(row["kilo_version"]),
            provider=row.get("provider"),
            model_id=row["model_id"],
            task_id=row["competition_id"],
            metric_name=row["metric_name"],
            metric_direction=direction,
            budget_seconds=row["budget_time_seconds"],
            instruction_profile=row["prompt_profile"],
            attempt_index=0,
            seed=row["seed"],
            sandbox_backend="tml-bench",
            sandbox_isolated=False,
            sandbox_unsafe=False,
            status=status,
            score=score,
            score_hib=score_hib,
            wall_seconds=row.get("runtime_seconds"),
            task_spec_sha256=row["spec_sha256"],
            public_manifest_sha256=row.get("public_manifest_sha256"),
            instructions_sha256=row.get("prompt_sha256"),
            tmlbench_version=str(row["benchmark_version"]),
            git_sha=row.get("git_sha"),
        )
    except ValidationError as exc:
        raise ValueError(f"run {row['run_id']!r}: {describe_validation_error(exc)}") from None


def _timestamp(value: Any, run_id: Any) -> dt.datetime:
    try:
        parsed = dt.datetime.fromisoformat(str(value))
    except ValueError:
        raise ValueError(f"run {run_id!r}: created_at {value!r} is not an ISO timestamp") from None
    if parsed.tzinfo is None:
        raise ValueError(
            f"run {run_id!r}: created_at {value!r} has no UTC offset; TML-bench writes one"
        )
    return parsed.astimezone(dt.UTC)


def content_sha256(row: Mapping[str, Any]) -> str:
    """Hash of the row's known fields, normalized so the same run hashes the same from SQLite
    or from result.json."""
    canon: dict[str, Any] = {}
    for name in KNOWN:
        value = row.get(name)
        if value is not None and name in FLOATS:
            value = float(value)
            if not math.isfinite(value):
                value = repr(value)
        elif value is not None and name in INTS and isinstance(value, float | int):
            value = int(value)
        canon[name] = value
    payload = json.dumps(canon, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


def _after_insert(
    agents: Mapping[str, str | None],
) -> Callable[[duckdb.DuckDBPyConnection], None]:
    def run(con: duckdb.DuckDBPyConnection) -> None:
        # Attempt numbers follow created_at over everything imported so far, so importing an
        # older run later renumbers its setting instead of leaving two attempt 0s.
        con.execute(
            """
            update raw.runs r set attempt_index = n.idx
            from (
                select run_id, (row_number() over (
                    partition by agent_id, task_id, budget_seconds, instruction_profile
                    order by created_at, run_id) - 1)::integer as idx
                from raw.runs where source = ?
            ) n
            where r.run_id = n.run_id and r.attempt_index <> n.idx
            """,
            [SOURCE],
        )
        if not agents:
            return
        now = dt.datetime.now(dt.UTC)
        table = pa.table(
            {
                "agent_id": pa.array(list(agents), pa.string()),
                "kind": pa.array(["command"] * len(agents), pa.string()),
                "harness": pa.array(["kilo"] * len(agents), pa.string()),
                "provider": pa.array(list(agents.values()), pa.string()),
                "model_id": pa.array(list(agents), pa.string()),
                "source": pa.array([SOURCE] * len(agents), pa.string()),
                "loaded_at": pa.array([now] * len(agents), pa.timestamp("us", tz="UTC")),
            }
        )
        con.register("_tmlbench_import_agents", table)
        try:
            con.execute(
                "insert into raw.agents by name select * from _tmlbench_import_agents i "
                "where i.agent_id not in (select agent_id from raw.agents)"
            )
        finally:
            con.unregister("_tmlbench_import_agents")

    return run
