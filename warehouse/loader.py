"""Load run records into ``raw.runs`` (and task/agent/suite specs into ``raw.tasks``,
``raw.agents`` and ``raw.suites``).

Rules (the warehouse half of "records are immutable"):

* keyed by run_id; a record already loaded with the same content hash (sha256 of the file's
  bytes) is *unchanged*; the same run_id with other content is *rejected*, never overwritten;
* a malformed record (bad JSON, schema violation, unknown status, out-of-range value) is
  rejected with a message naming the file and the problem, and the others still load;
* one transaction per load: all new rows go in together, or (on any failure) none do.

Speed: records are parsed by pydantic-core straight from bytes, turned into one Arrow table
and inserted with one ``INSERT ... BY NAME`` statement; existing run_ids are looked up with one
join. 100,000 records load in a few seconds (see benchmarks/warehouse_load.py).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import operator
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa
from pydantic import ValidationError

from runner.config import Paths
from runner.errors import TmlbenchError, describe_validation_error
from runner.records import RunRecord, iter_record_paths
from runner.registry import list_agents, list_tasks, load_suite, task_spec_sha256
from runner.specs import AgentSpec, SuiteSpec, TaskSpec
from warehouse.db import apply_ddl

SOURCE_TMLBENCH = "tmlbench"
RUN_FIELDS: tuple[str, ...] = tuple(RunRecord.model_fields)
_FIELD_GETTER = operator.itemgetter(*RUN_FIELDS)
BOOKKEEPING = ("source", "source_path", "record_sha256", "loaded_at", "source_fields")

_ARROW_TYPES = {
    "VARCHAR": pa.string(),
    "INTEGER": pa.int64(),
    "BIGINT": pa.int64(),
    "DOUBLE": pa.float64(),
    "BOOLEAN": pa.bool_(),
    "DATE": pa.date32(),
    "TIMESTAMP WITH TIME ZONE": pa.timestamp("us", tz="UTC"),
    "MAP(VARCHAR, INTEGER)": pa.map_(pa.string(), pa.int64()),
    "VARCHAR[]": pa.list_(pa.string()),
}
_INT_RANGES = {"INTEGER": (-(2**31), 2**31 - 1), "BIGINT": (-(2**63), 2**63 - 1)}


@dataclass(frozen=True)
class LoadReport:
    """What one load did: rows inserted, records already there, records refused (path, why)."""

    new: int
    unchanged: int
    rejected: list[tuple[str, str]] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.new + self.unchanged + len(self.rejected)


@dataclass(frozen=True)
class Candidate:
    """One parsed, valid record on its way in: where it came from and its content hash."""

    record: RunRecord
    source_path: str
    record_sha256: str
    # Imports: JSON of the source's fields that raw.runs has no column for.
    source_fields: str | None = None


def load_runs(con: duckdb.DuckDBPyConnection, runs_dir: Path) -> LoadReport:
    """Ingest every ``record.json`` under ``runs_dir`` (workspaces are never searched)."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        raise TmlbenchError(f"runs directory {runs_dir} does not exist")
    candidates: list[Candidate] = []
    rejected: list[tuple[str, str]] = []
    for path, data in _read_all(iter_record_paths(runs_dir.resolve())):
        if isinstance(data, OSError):
            rejected.append((str(path), f"{path}: cannot read: {data.strerror or data}"))
            continue
        try:
            record = RunRecord.model_validate_json(data)
        except ValidationError as exc:
            rejected.append(
                (str(path), f"{path}: not a valid run record: {describe_validation_error(exc)}")
            )
            continue
        candidates.append(Candidate(record, str(path), hashlib.sha256(data).hexdigest()))
    return ingest(con, candidates, rejected, source=SOURCE_TMLBENCH)


def _read_all(paths: Sequence[Path], chunk: int = 1000) -> Iterator[tuple[Path, bytes | OSError]]:
    """The bytes of every file, in order, read ahead by worker threads.

    File I/O releases the GIL, so reading overlaps with validating the previous chunk.
    """

    def read_chunk(part: Sequence[Path]) -> list[tuple[Path, bytes | OSError]]:
        out: list[tuple[Path, bytes | OSError]] = []
        for path in part:
            try:
                with open(path, "rb") as fh:
                    out.append((path, fh.read()))
            except OSError as exc:
                out.append((path, exc))
        return out

    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="tmlbench-read") as pool:
        futures = [
            pool.submit(read_chunk, paths[i : i + chunk]) for i in range(0, len(paths), chunk)
        ]
        for future in futures:
            yield from future.result()


def ingest(
    con: duckdb.DuckDBPyConnection,
    candidates: Sequence[Candidate],
    rejected: Iterable[tuple[str, str]] = (),
    *,
    source: str,
    in_transaction: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
) -> LoadReport:
    """Insert the candidates that are new, in one transaction; report unchanged and conflicts.

    ``in_transaction`` runs after the insert, inside the same transaction (importers use it to
    add agents and renumber attempts), so it too is all-or-nothing.
    """
    apply_ddl(con)
    rejected = list(rejected)
    columns = _run_columns(con)
    int_checks = _int_checks(columns)

    # Values the raw schema's constraints would refuse are rejected per record here, so one bad
    # record cannot fail the whole insert.
    first: dict[str, Candidate] = {}
    unchanged = 0
    for cand in candidates:
        problem = _constraint_problem(cand.record, int_checks)
        if problem:
            rejected.append((cand.source_path, f"{cand.source_path}: {problem}"))
            continue
        seen = first.get(cand.record.run_id)
        if seen is None:
            first[cand.record.run_id] = cand
        elif seen.record_sha256 == cand.record_sha256:
            unchanged += 1
        else:
            rejected.append(
                (
                    cand.source_path,
                    f"records are immutable; {cand.source_path} differs from the loaded one "
                    f"(loaded from {seen.source_path}, run_id {cand.record.run_id})",
                )
            )

    con.execute("begin transaction")
    try:
        existing = _existing(con, first.values())
        new: list[Candidate] = []
        for run_id, cand in first.items():
            hit = existing.get(run_id)
            if hit is None:
                new.append(cand)
            elif hit[0] == cand.record_sha256:
                unchanged += 1
            else:
                rejected.append(
                    (
                        cand.source_path,
                        f"records are immutable; {cand.source_path} differs from the loaded one "
                        f"(loaded from {hit[1]}, run_id {run_id})",
                    )
                )
        if new:
            _insert_runs(con, _runs_table(new, columns, source))
        if in_transaction is not None:
            in_transaction(con)
        con.execute("commit")
    except BaseException as exc:
        con.execute("rollback")
        if isinstance(exc, duckdb.Error):
            raise TmlbenchError(
                f"loading into raw.runs failed, nothing was loaded (rolled back): {exc}"
            ) from exc
        raise
    return LoadReport(new=len(new), unchanged=unchanged, rejected=rejected)


def _run_columns(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """raw.runs column -> DuckDB type; checks that every RunRecord field has its column."""
    rows = con.execute(
        "select column_name, data_type from information_schema.columns "
        "where table_schema = 'raw' and table_name = 'runs' order by ordinal_position"
    ).fetchall()
    columns = dict(rows)
    missing = [f for f in (*RUN_FIELDS, *BOOKKEEPING) if f not in columns]
    if missing:
        raise TmlbenchError(
            f"raw.runs has no column for {', '.join(missing)}: warehouse/ddl/raw.sql is behind "
            "runner.records.RunRecord (add the columns there)"
        )
    return columns


def _int_checks(columns: dict[str, str]) -> list[tuple[str, int, int, str]]:
    """(field, low, high, column type) for every integer column of raw.runs."""
    return [
        (name, *_INT_RANGES[columns[name]], columns[name].lower())
        for name in RUN_FIELDS
        if columns[name] in _INT_RANGES
    ]


def _constraint_problem(
    record: RunRecord, int_checks: list[tuple[str, int, int, str]]
) -> str | None:
    values = record.__dict__
    for name, low, high, type_name in int_checks:
        value = values[name]
        if value is not None and not low <= value <= high:
            return f"{name}: {value} does not fit the column's type ({type_name})"
    if record.budget_seconds is not None and record.budget_seconds <= 0:
        return f"budget_seconds: must be > 0, got {record.budget_seconds}"
    if record.status == "success" and record.metric_direction is None:
        return "status success needs a metric (metric_name/metric_direction are empty)"
    if record.status != "success" and (record.score is not None or record.score_hib is not None):
        return f"status {record.status!r} must not carry a score (only success has one)"
    return None


def _existing(
    con: duckdb.DuckDBPyConnection, candidates: Iterable[Candidate]
) -> dict[str, tuple[str, str]]:
    """run_id -> (record_sha256, source_path) of the candidates already in raw.runs (one query)."""
    ids = pa.table({"run_id": pa.array([c.record.run_id for c in candidates], pa.string())})
    if ids.num_rows == 0:
        return {}
    con.register("_tmlbench_candidate_ids", ids)
    try:
        rows = con.execute(
            "select r.run_id, r.record_sha256, r.source_path "
            "from raw.runs r join _tmlbench_candidate_ids c using (run_id)"
        ).fetchall()
    finally:
        con.unregister("_tmlbench_candidate_ids")
    return {run_id: (sha, path) for run_id, sha, path in rows}


def _runs_table(new: Sequence[Candidate], columns: dict[str, str], source: str) -> pa.Table:
    # Transpose records into columns with C-level itemgetter/zip (a comprehension per column is
    # several times slower at 100k rows).
    rows = map(_FIELD_GETTER, (c.record.__dict__ for c in new))
    arrays = {
        name: pa.array(values, _ARROW_TYPES[columns[name]])
        for name, values in zip(RUN_FIELDS, zip(*rows, strict=True), strict=True)
    }
    n = len(new)
    arrays["source"] = pa.array([source] * n, pa.string())
    arrays["source_path"] = pa.array([c.source_path for c in new], pa.string())
    arrays["record_sha256"] = pa.array([c.record_sha256 for c in new], pa.string())
    arrays["source_fields"] = pa.array([c.source_fields for c in new], pa.string())
    now = dt.datetime.now(dt.UTC)
    arrays["loaded_at"] = pa.array([now] * n, pa.timestamp("us", tz="UTC"))
    return pa.table(arrays)


def _insert_runs(con: duckdb.DuckDBPyConnection, table: pa.Table) -> None:
    con.register("_tmlbench_new_runs", table)
    try:
        con.execute("insert into raw.runs by name select * from _tmlbench_new_runs")
    finally:
        con.unregister("_tmlbench_new_runs")


# ---------------------------------------------------------------------------------------------
# specs


def load_specs(con: duckdb.DuckDBPyConnection, paths: Paths) -> dict[str, int]:
    """Replace raw.tasks, raw.suites (with raw.suite_settings) and the spec rows of raw.agents with
    the current spec files.

    Agents that exist only in imported data (source 'tml-bench') keep their rows; an agent
    with a spec gets the spec's row, whatever was there before. Suites are loaded for the rules
    their runner applies per setting (the harness-error ceiling) that the marts report on: the
    current file's rule, as the next run of the suite will apply it.
    """
    apply_ddl(con)
    now = dt.datetime.now(dt.UTC)
    tasks = list_tasks(paths.tasks_dir) if paths.tasks_dir.is_dir() else []
    agents = list_agents(paths.agents_dir) if paths.agents_dir.is_dir() else []
    suites = _suites(paths.suites_dir)
    task_rows = _task_rows(tasks, paths.tasks_dir, now)
    agent_rows = _agent_rows(agents, now)
    suite_rows = _suite_rows(suites, now)
    setting_rows = _suite_setting_rows([suite for suite, _ in suites])
    con.execute("begin transaction")
    try:
        con.register("_tmlbench_tasks", task_rows)
        con.register("_tmlbench_agents", agent_rows)
        con.register("_tmlbench_suites", suite_rows)
        con.register("_tmlbench_suite_settings", setting_rows)
        con.execute("delete from raw.tasks")
        con.execute("insert into raw.tasks by name select * from _tmlbench_tasks")
        con.execute("delete from raw.suites")
        con.execute("insert into raw.suites by name select * from _tmlbench_suites")
        con.execute("delete from raw.suite_settings")
        con.execute("insert into raw.suite_settings by name select * from _tmlbench_suite_settings")
        con.execute(
            "delete from raw.agents where source = 'spec' "
            "or agent_id in (select agent_id from _tmlbench_agents)"
        )
        con.execute("insert into raw.agents by name select * from _tmlbench_agents")
        con.execute("commit")
    except BaseException:
        con.execute("rollback")
        raise
    finally:
        con.unregister("_tmlbench_tasks")
        con.unregister("_tmlbench_agents")
        con.unregister("_tmlbench_suites")
        con.unregister("_tmlbench_suite_settings")
    return {"tasks": len(tasks), "agents": len(agents), "suites": len(suites)}


def _task_rows(tasks: list[TaskSpec], tasks_dir: Path, now: dt.datetime) -> pa.Table:
    """raw.tasks rows of the task specs."""
    return pa.table(
        {
            "task_id": pa.array([t.id for t in tasks], pa.string()),
            "title": pa.array([t.title for t in tasks], pa.string()),
            "task_type": pa.array([t.task_type for t in tasks], pa.string()),
            "metric_name": pa.array([t.metric.name for t in tasks], pa.string()),
            "metric_direction": pa.array([t.metric.direction for t in tasks], pa.string()),
            "id_column": pa.array([t.id_column for t in tasks], pa.string()),
            "target_column": pa.array([t.target_column for t in tasks], pa.string()),
            "start_date": pa.array([t.start_date for t in tasks], pa.date32()),
            "kaggle_competition": pa.array(
                [t.source.kaggle.competition if t.source.kaggle else None for t in tasks],
                pa.string(),
            ),
            "twin_default_rows": pa.array(
                [t.source.twin.default_rows if t.source.twin else None for t in tasks], pa.int64()
            ),
            "spec_sha256": pa.array(
                [task_spec_sha256(tasks_dir, t.id) for t in tasks], pa.string()
            ),
            "loaded_at": pa.array([now] * len(tasks), pa.timestamp("us", tz="UTC")),
        }
    )


def _agent_rows(agents: list[AgentSpec], now: dt.datetime) -> pa.Table:
    """raw.agents rows of the agent specs (source 'spec')."""
    return pa.table(
        {
            "agent_id": pa.array([a.id for a in agents], pa.string()),
            "kind": pa.array([a.kind for a in agents], pa.string()),
            "title": pa.array([a.title for a in agents], pa.string()),
            "harness": pa.array([a.harness for a in agents], pa.string()),
            "harness_version": pa.array([a.harness_version for a in agents], pa.string()),
            "provider": pa.array([a.model.provider for a in agents], pa.string()),
            "model_id": pa.array([a.model.model_id for a in agents], pa.string()),
            "knowledge_cutoff": pa.array([a.model.knowledge_cutoff for a in agents], pa.date32()),
            "price_in_per_mtok_usd": pa.array([_price(a, "input") for a in agents], pa.float64()),
            "price_out_per_mtok_usd": pa.array([_price(a, "output") for a in agents], pa.float64()),
            "source": pa.array(["spec"] * len(agents), pa.string()),
            "loaded_at": pa.array([now] * len(agents), pa.timestamp("us", tz="UTC")),
        }
    )


def _suite_rows(suites: list[tuple[SuiteSpec, str]], now: dt.datetime) -> pa.Table:
    """raw.suites rows of the suite specs, with each file's sha256."""
    return pa.table(
        {
            "suite_id": pa.array([s.id for s, _ in suites], pa.string()),
            "title": pa.array([s.title for s, _ in suites], pa.string()),
            "attempts": pa.array([s.attempts for s, _ in suites], pa.int32()),
            "attempt_ceiling": pa.array([s.attempt_ceiling for s, _ in suites], pa.int32()),
            "harness_error_ceiling": pa.array(
                [s.harness_error_ceiling for s, _ in suites], pa.int32()
            ),
            "runs_subdir": pa.array([s.runs_subdir for s, _ in suites], pa.string()),
            "spec_sha256": pa.array([sha for _, sha in suites], pa.string()),
            "loaded_at": pa.array([now] * len(suites), pa.timestamp("us", tz="UTC")),
        }
    )


def _suite_setting_rows(suites: list[SuiteSpec]) -> pa.Table:
    """raw.suite_settings rows: every (agent, task, budget) each suite lists."""
    rows = [
        (suite.id, agent, task, budget)
        for suite in suites
        for agent in suite.agents
        for task in suite.tasks
        for budget in suite.budgets
    ]
    names = ("suite_id", "agent_id", "task_id", "budget_seconds")
    types = (pa.string(), pa.string(), pa.string(), pa.int32())
    return pa.table(
        {
            name: pa.array([row[i] for row in rows], kind)
            for i, (name, kind) in enumerate(zip(names, types, strict=True))
        }
    )


def _suites(suites_dir: Path) -> list[tuple[SuiteSpec, str]]:
    """Every ``<suites_dir>/<id>.yaml``, validated, with the sha256 of its bytes."""
    if not suites_dir.is_dir():
        return []
    return [
        (load_suite(suites_dir, path.stem), hashlib.sha256(path.read_bytes()).hexdigest())
        for path in sorted(suites_dir.glob("*.yaml"))
    ]


def _price(agent: AgentSpec, side: str) -> float | None:
    """USD per million tokens of an llm agent or a command agent's gateway, where given."""
    prices = agent.llm.prices if agent.llm else agent.gateway.prices if agent.gateway else None
    return getattr(prices, f"{side}_per_mtok") if prices else None
