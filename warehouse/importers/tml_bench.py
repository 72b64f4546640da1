"""Import results of the original TML-bench harness: its SQLite database and/or result.json files.

What the source holds is read by ``tml_bench_format`` (every schema generation); this module
maps it onto ``raw.runs`` (source 'tml-bench') and ``raw.baselines``:

===============================  =============================================================
raw.runs                         TML-bench ``runs`` column (result.json field)
===============================  =============================================================
run_id, created_at               run_id, created_at (ISO with offset → UTC; none → read as UTC)
task_id                          competition_id
status                           status (success, invalid_submission, runtime_error, timeout,
                                 provider_error)
agent_id, model_id, provider     model_id ('unknown' when empty, as its run_one labels it),
                                 model_id, provider (``model.*``)
agent_kind, harness              'command', 'kilo'
harness_version                  kilo_version (``provenance``, or ``artifacts.notes``)
metric_name, metric_direction    metric_name, else the competition's (its other runs, its
                                 baselines, raw.tasks); direction from runner.tasks.metrics
budget_seconds                   budget_time_seconds (``budget.time_seconds``); NULL → the run
                                 is in no setting (int_setting_runs)
instruction_profile              prompt_profile (``artifacts.notes``)
seed                             seed
attempt_index                    0-based order by created_at (ties: run_id) within (agent,
                                 task, budget, profile), over everything imported
score, score_hib                 score_raw and its higher-is-better value; success only
local_validation_score           local_validation_metric
wall_seconds                     runtime_seconds
submission_path                  submission_path (``artifacts``; the source's own path)
submission_sha256                submission_sha256 (``artifacts.notes``)
submission_normalized_sha256     normalized_submission_sha256 (``artifacts.notes``; the
                                 source's canonical form, comparable among its own runs)
task_spec_sha256                 spec_sha256
instructions_sha256              prompt_sha256
public_manifest_sha256           public_manifest_sha256
tmlbench_version, git_sha        benchmark_version (``versions.benchmark``), git_sha
sandbox_backend                  'tml-bench' (isolation unknown: sandbox_isolated false)
source_fields (JSON)             score_normalized, secondary_r2, prompt_strategy, mode,
                                 temperature, max_tokens, normalized_submission_path,
                                 kilo_config_sha256, git_dirty (true/false), score_raw of a
                                 failed run, the rest of ``artifacts.notes`` (e.g. ``kilo``), and
                                 any column or field this importer does not know (reported once)
===============================  =============================================================

``raw.baselines``: competition_id → task_id, baseline_type, created_at, metric_name,
score_raw → score, score_normalized, local_validation_metric → local_validation_score,
submission_sha256, normalized_submission_sha256 → submission_normalized_sha256, spec_sha256 →
task_spec_sha256, public_manifest_sha256; unknown columns → source_fields.

A row is refused only when it means nothing: no run_id, no competition, a status the original
never writes, a created_at that is not a timestamp (a run must be ordered; one with an offset no
time zone has, or outside UTC's calendar, is none), a value that is not of its column's type
(text that is not UTF-8, a whole number past 64 bits), or a success with no finite score or with
a metric whose direction runner.tasks.metrics does not know. The content hash
(``record_sha256``) covers the 31 columns of the original's ``runs`` table, normalized so a run
hashes the same from the database and from its result.json: importing both is harmless, a
changed run is a conflict, and what only result.json holds (notes) comes from the first import.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import os
import stat
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
from pydantic import ValidationError

from runner.attempts import RECORD_SCHEMA_VERSION, RunRecord
from runner.errors import TmlbenchError, describe_validation_error
from runner.tasks import Direction, Metric, get_metric
from warehouse.db import apply_ddl
from warehouse.importers.tml_bench_format import (
    BASELINE_COLUMNS,
    BASELINE_FLOATS,
    RUN_COLUMNS,
    RUN_FLOATS,
    RUN_INTS,
    STATUSES,
    Limits,
    Row,
    Source,
    label,
    read_database,
    read_result_tree,
)
from warehouse.loader import Candidate, LoadReport, ingest

SOURCE = "tml-bench"
UNKNOWN_MODEL = "unknown"  # what its run_one.py records when no model was named

# Columns of the original's runs table that raw.runs has no column for: kept in source_fields.
EXTRA_RUN_COLUMNS = (
    "score_normalized",
    "secondary_r2",
    "prompt_strategy",
    "mode",
    "temperature",
    "max_tokens",
    "normalized_submission_path",
    "kilo_config_sha256",
    "git_dirty",
)


class ImportedRun(RunRecord):
    """A run of the original harness: what its older generations did not record is None."""

    harness_version: str | None = None  # type: ignore[assignment]
    metric_name: str | None = None  # type: ignore[assignment]
    metric_direction: Direction | None = None  # type: ignore[assignment]
    budget_seconds: int | None = None  # type: ignore[assignment]
    instruction_profile: str | None = None  # type: ignore[assignment]
    seed: int | None = None  # type: ignore[assignment]
    task_spec_sha256: str | None = None  # type: ignore[assignment]
    tmlbench_version: str | None = None  # type: ignore[assignment]


@dataclass(frozen=True)
class ImportReport:
    """What one import did, for runs and baselines, and what it kept without knowing it."""

    runs: LoadReport
    baselines: LoadReport
    unknown_fields: dict[str, int] = field(default_factory=dict)  # "runs.foo" -> rows with a value
    notes: list[str] = field(default_factory=list)

    @property
    def rejected(self) -> list[tuple[str, str]]:
        return self.runs.rejected + self.baselines.rejected


def import_tml_bench(con: duckdb.DuckDBPyConnection, *sources: Path) -> ImportReport:
    """Import TML-bench results from SQLite files and/or folders of result.json files.

    Same rules as ``warehouse.loader.load_runs``: idempotent by key and content hash, a changed
    row is refused (never overwritten), bad rows are refused with a reason naming the row, and
    everything goes in in one transaction.
    """
    return import_source(con, read_tml_bench(*sources))


def read_tml_bench(*sources: Path, limits: Limits | None = None) -> Source:
    """Everything the sources hold, read within ``limits`` before anything is written (a source
    that cannot be read is a TmlbenchError that names it and says what to do)."""
    if not sources:
        raise TmlbenchError("name a TML-bench SQLite database or a folder of result.json files")
    read = Source(limits or Limits())
    for path in map(Path, sources):
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            raise TmlbenchError(f"{path}: no such file or folder") from None
        if stat.S_ISLNK(mode):
            raise TmlbenchError(
                f"{path}: is a symbolic link; links are never followed (name the file or folder "
                "itself)"
            )
        if stat.S_ISDIR(mode):
            read_result_tree(path, read)
        else:
            read_database(path, read)  # which refuses anything but a regular file
    return read


def import_source(con: duckdb.DuckDBPyConnection, read: Source) -> ImportReport:
    """Write what ``read_tml_bench`` read into the warehouse, in one transaction."""
    apply_ddl(con)
    metric_of = _competition_metrics(con, read)
    candidates: list[Candidate] = []
    rejected = list(read.rejected)
    agents: dict[str, str | None] = {}
    notes: Counter[str] = Counter()
    for row in read.runs:
        try:
            candidate = to_record(row, metric_of, notes)
        except ValueError as exc:
            rejected.append((row.where, f"{row.where}: {exc}"))
            continue
        candidates.append(candidate)
        record = candidate.record
        if agents.get(record.agent_id) is None:
            agents[record.agent_id] = record.provider

    baselines = _BaselineImport(read.baselines)

    def complete(c: duckdb.DuckDBPyConnection) -> None:
        """Inside the runs' transaction: attempt numbers, agents, baselines."""
        _renumber_attempts(c)
        _add_agents(c, agents)
        baselines(c)

    runs = ingest(con, candidates, rejected, source=SOURCE, in_transaction=complete)
    unknown = Counter(f"runs.{k}" for row in read.runs for k in row.unknown)
    unknown.update(f"baselines.{k}" for row in read.baselines for k in row.unknown)
    return ImportReport(
        runs=runs,
        baselines=baselines.report,
        unknown_fields=dict(sorted(unknown.items())),
        notes=[f"{n:,} {what}" for what, n in sorted(notes.items())],
    )


# ---------------------------------------------------------------------------------------------
# runs


def to_record(row: Row, metric_of: Callable[[str], str | None], notes: Counter[str]) -> Candidate:
    """One source row on its way into raw.runs (ValueError: the row is refused, and why)."""
    v = _coerced(row.values, RUN_COLUMNS)
    run_id, task_id, status = v["run_id"], v["competition_id"], v["status"]
    if not run_id:
        raise ValueError("no run_id (every TML-bench run has one): the row cannot be imported")
    run = f"run {label(repr(run_id))}"  # repr: quoted, its control characters escaped
    if not task_id:
        raise ValueError(f"{run}: no competition_id")
    if status not in STATUSES:
        raise ValueError(
            f"{run}: unknown status {label(repr(status))} (TML-bench writes {', '.join(STATUSES)})"
        )
    created_at = _timestamp(v["created_at"], run, notes)

    metric_name = v["metric_name"] or metric_of(task_id)
    if metric_name and not v["metric_name"]:
        notes["failed runs took their metric from their competition"] += 1
    metric = _known_metric(metric_name)
    extra = {name: v[name] for name in EXTRA_RUN_COLUMNS if v[name] is not None}
    if "git_dirty" in extra:
        extra["git_dirty"] = bool(extra["git_dirty"])
    score = v["score_raw"]
    if status == "success":
        if score is None or not math.isfinite(score):
            raise ValueError(f"{run}: status success but score_raw is {score!r}")
        if metric is None:
            raise ValueError(
                f"{run}: metric {label(repr(metric_name))} is not known to runner/tasks/metrics.py, so "
                "whether higher or lower is better would be a guess; add it there"
            )
    elif score is not None:
        extra["score_raw"] = score  # the original only scores successes; kept, never counted
        score = None
    if v["budget_time_seconds"] is None:
        notes["runs have no budget: kept, in no setting"] += 1
    if not v["model_id"]:
        notes[f"runs name no model: agent {UNKNOWN_MODEL!r}"] += 1
    extra.update(row.extra)
    extra.update(row.unknown)
    try:
        record = ImportedRun(
            schema_version=RECORD_SCHEMA_VERSION,
            run_id=run_id,
            created_at=created_at,
            agent_id=v["model_id"] or UNKNOWN_MODEL,
            agent_kind="command",
            harness="kilo",
            harness_version=v["kilo_version"],
            provider=v["provider"],
            model_id=v["model_id"],
            task_id=task_id,
            metric_name=metric_name,
            metric_direction=None if metric is None else metric.direction,
            budget_seconds=v["budget_time_seconds"],
            instruction_profile=v["prompt_profile"],
            attempt_index=0,  # renumbered in the warehouse, over everything imported
            seed=v["seed"],
            sandbox_backend="tml-bench",
            sandbox_isolated=False,
            sandbox_unsafe=False,
            status=status,
            score=score,
            score_hib=None if score is None or metric is None else metric.higher_is_better(score),
            local_validation_score=v["local_validation_metric"],
            wall_seconds=v["runtime_seconds"],
            submission_path=v["submission_path"],
            submission_sha256=v["submission_sha256"],
            submission_normalized_sha256=v["normalized_submission_sha256"],
            task_spec_sha256=v["spec_sha256"],
            public_manifest_sha256=v["public_manifest_sha256"],
            instructions_sha256=v["prompt_sha256"],
            tmlbench_version=v["benchmark_version"],
            git_sha=v["git_sha"],
        )
    except ValidationError as exc:
        raise ValueError(f"{run}: {describe_validation_error(exc)}") from None
    return Candidate(record, row.where, content_sha256(v, RUN_COLUMNS), _json(extra))


def _known_metric(metric_name: str | None) -> Metric | None:
    """The metric runner.tasks.metrics knows by this name (its direction and orientation), else None."""
    if not metric_name:
        return None
    try:
        return get_metric(metric_name)
    except TmlbenchError:
        return None


def _competition_metrics(
    con: duckdb.DuckDBPyConnection, read: Source
) -> Callable[[str], str | None]:
    """competition → its metric: the original leaves metric_name empty on failed runs."""
    metrics: dict[str, str] = {}
    for row in (*read.runs, *read.baselines):
        comp, metric = row.values.get("competition_id"), row.values.get("metric_name")
        if isinstance(comp, str) and isinstance(metric, str) and metric:
            metrics.setdefault(comp, metric)
    for task_id, metric in con.execute("select task_id, metric_name from raw.tasks").fetchall():
        metrics.setdefault(task_id, metric)
    return metrics.get


def _renumber_attempts(con: duckdb.DuckDBPyConnection) -> None:
    # Attempt numbers follow created_at over everything imported so far, so importing an older
    # run later renumbers its setting instead of leaving two attempt 0s.
    con.execute(
        """
        update raw.runs r set attempt_index = n.idx
        from (
            select run_id, (row_number() over (
                partition by agent_id, task_id, budget_seconds, instruction_profile
                order by created_at, run_id) - 1)::integer as idx
            from raw.runs where run_space = ?
        ) n
        where r.run_space = ? and r.run_id = n.run_id and r.attempt_index <> n.idx
        """,
        [SOURCE, SOURCE],
    )


def _add_agents(con: duckdb.DuckDBPyConnection, agents: Mapping[str, str | None]) -> None:
    """A raw.agents row per imported model, unless an agent spec (or an import) has one."""
    if not agents:
        return
    n = len(agents)
    table = pa.table(
        {
            "agent_id": pa.array(list(agents), pa.string()),
            "kind": pa.array(["command"] * n, pa.string()),
            "harness": pa.array(["kilo"] * n, pa.string()),
            "provider": pa.array(list(agents.values()), pa.string()),
            "model_id": pa.array([a if a != UNKNOWN_MODEL else None for a in agents], pa.string()),
            "source": pa.array([SOURCE] * n, pa.string()),
            "loaded_at": pa.array([dt.datetime.now(dt.UTC)] * n, pa.timestamp("us", tz="UTC")),
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


# ---------------------------------------------------------------------------------------------
# baselines


class _BaselineImport:
    """Inserts the new baselines rows inside the runs' transaction; keeps its own report."""

    def __init__(self, rows: Sequence[Row]) -> None:
        self.rows = rows
        self.report = LoadReport(0, 0, [])

    def __call__(self, con: duckdb.DuckDBPyConnection) -> None:
        rejected: list[tuple[str, str]] = []
        first: dict[tuple[str, str], tuple[Row, dict[str, Any], str]] = {}
        unchanged = 0
        for row in self.rows:
            try:
                v, sha = _baseline_values(row)
            except ValueError as exc:
                rejected.append((row.where, f"{row.where}: {exc}"))
                continue
            key = (v["task_id"], v["baseline_type"])
            seen = first.get(key)
            if seen is None:
                first[key] = (row, v, sha)
            elif seen[2] == sha:
                unchanged += 1
            else:
                rejected.append((row.where, _conflict(row.where, seen[0].where)))
        existing = {
            (task, kind): (sha, path)
            for task, kind, sha, path in con.execute(
                "select task_id, baseline_type, record_sha256, source_path from raw.baselines "
                "where source = ?",
                [SOURCE],
            ).fetchall()
        }
        new = []
        for key, (row, v, sha) in first.items():
            hit = existing.get(key)
            if hit is None:
                new.append({**v, "source_path": row.where, "record_sha256": sha})
            elif hit[0] == sha:
                unchanged += 1
            else:
                rejected.append((row.where, _conflict(row.where, hit[1])))
        if new:
            _insert_baselines(con, new)
        self.report = LoadReport(new=len(new), unchanged=unchanged, rejected=rejected)


def _baseline_values(row: Row) -> tuple[dict[str, Any], str]:
    """A baselines row as raw.baselines values, and its content hash."""
    v = _coerced(row.values, BASELINE_COLUMNS, floats=BASELINE_FLOATS, ints=frozenset())
    if not v["competition_id"] or not v["baseline_type"]:
        raise ValueError("a baseline needs competition_id and baseline_type")
    created = v["created_at"]
    return {
        "source": SOURCE,
        "task_id": v["competition_id"],
        "baseline_type": v["baseline_type"],
        "created_at": None if created is None else _timestamp(created, "baseline", Counter()),
        "metric_name": v["metric_name"],
        "score": v["score_raw"],
        "score_normalized": v["score_normalized"],
        "local_validation_score": v["local_validation_metric"],
        "submission_sha256": v["submission_sha256"],
        "submission_normalized_sha256": v["normalized_submission_sha256"],
        "task_spec_sha256": v["spec_sha256"],
        "public_manifest_sha256": v["public_manifest_sha256"],
        "source_fields": _json(row.unknown),
    }, content_sha256(v, BASELINE_COLUMNS)


def _insert_baselines(con: duckdb.DuckDBPyConnection, rows: list[dict[str, Any]]) -> None:
    now = dt.datetime.now(dt.UTC)
    table = pa.Table.from_pylist([{**r, "loaded_at": now} for r in rows])
    con.register("_tmlbench_import_baselines", table)
    try:
        con.execute("insert into raw.baselines by name select * from _tmlbench_import_baselines")
    finally:
        con.unregister("_tmlbench_import_baselines")


def _conflict(where: str, loaded_from: str) -> str:
    return (
        f"{where}: differs from the row already imported from {loaded_from}; imported "
        "results are immutable (delete the old rows first if the source was corrected)"
    )


# ---------------------------------------------------------------------------------------------
# values


def _coerced(
    values: Mapping[str, Any],
    columns: Iterable[str],
    floats: frozenset[str] = RUN_FLOATS,
    ints: frozenset[str] = RUN_INTS,
) -> dict[str, Any]:
    """Each column as its declared type (SQLite keeps whatever it was given); ValueError names
    the column and value that cannot be one."""
    out: dict[str, Any] = {}
    for name in columns:
        value = values.get(name)
        if value is None:
            out[name] = None
        elif name in floats:
            out[name] = _number(name, value, float)
        elif name in ints:
            out[name] = _number(name, value, int)
        elif isinstance(value, bytes | bytearray | dict | list):
            raise ValueError(f"{name}: expected text, got {type(value).__name__}")
        else:
            out[name] = str(value)
    return out


def _number(name: str, value: Any, kind: type[float] | type[int]) -> float | int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, str) and not value.strip():
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: {label(repr(value))} is not a number") from None
    if kind is float:
        return number if math.isfinite(number) or name == "score_raw" else None
    if not number.is_integer():
        raise ValueError(f"{name}: {label(repr(value))} is not a whole number")
    if not -(2**63) <= number < 2**63:
        raise ValueError(f"{name}: {label(repr(value))} is too large for a whole number")
    return int(number)


# Real time zones are within UTC-12:00 and UTC+14:00.
MAX_UTC_OFFSET = dt.timedelta(hours=14)


def _timestamp(value: Any, what: str, notes: Counter[str]) -> dt.datetime:
    """created_at in UTC (ValueError: why it cannot be one, and what to do)."""
    shown = label(repr(value))
    try:
        parsed = dt.datetime.fromisoformat(str(value))
    except ValueError:
        raise ValueError(f"{what}: created_at {shown} is not an ISO timestamp") from None
    offset = parsed.utcoffset()
    if offset is None:
        notes["created_at values had no UTC offset and were read as UTC"] += 1
        return parsed.replace(tzinfo=dt.UTC)
    if abs(offset) > MAX_UTC_OFFSET:
        raise ValueError(
            f"{what}: created_at {shown} has a UTC offset no time zone has (they are within "
            "-12:00 and +14:00); correct the timestamp in the source"
        )
    try:
        return parsed.astimezone(dt.UTC)
    except OverflowError:  # 0001-01-01T00:00:00+14:00 is in year 0 in UTC
        raise ValueError(
            f"{what}: created_at {shown} is outside the dates a timestamp holds in UTC (years 1 "
            "to 9999); correct the timestamp in the source"
        ) from None


def content_sha256(values: Mapping[str, Any], columns: Sequence[str]) -> str:
    """Hash of the source's own columns (as coerced by ``_coerced``), so a run hashes the same
    whether it came from the database or from result.json (600 and 600.0, true and 1)."""
    canon = {name: _plain(values.get(name)) for name in columns}
    payload = json.dumps(canon, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


def _json(fields: Mapping[str, Any]) -> str | None:
    """source_fields as JSON DuckDB accepts (no NaN, no bytes), or None when there are none."""
    return json.dumps(_plain(fields), sort_keys=True) if fields else None


def _plain(value: Any) -> Any:
    """``value`` as strict JSON: numbers as floats (non-finite ones as text), bytes as hex."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        number = float(value)
        return number if math.isfinite(number) else repr(number)
    if isinstance(value, bytes | bytearray):
        return value.hex()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return str(value)
