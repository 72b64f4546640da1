"""The spec files into the raw schema: ``raw.tasks``, ``raw.agents``, ``raw.suites`` and
``raw.suite_settings``.

Each load replaces the rows with what the files say now (``runner.specs.registry`` lists and validates
them). A spec file that does not validate is skipped and reported, never a reason to load
nothing; the rows its id had stay as the last valid load left them.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa

from runner.config import Paths
from runner.specs import (
    AgentSpec,
    SpecProblem,
    SuiteSpec,
    TaskSpec,
    TokenPrices,
    list_agents,
    list_suites,
    list_tasks,
    task_spec_sha256,
)
from warehouse.db import apply_ddl


@dataclass(frozen=True)
class SpecReport:
    """What one spec load did: valid specs loaded, and the spec files it skipped (and why)."""

    tasks: int
    agents: int
    suites: int
    skipped: list[SpecProblem] = field(default_factory=list)


def load_specs(con: duckdb.DuckDBPyConnection, paths: Paths) -> SpecReport:
    """Replace raw.tasks, raw.suites (with raw.suite_settings) and the spec rows of raw.agents with
    the current spec files.

    Agents that exist only in imported data (source 'tml-bench') keep their rows; an agent
    with a spec gets the spec's row, whatever was there before. Suites are loaded for the rules
    their runner applies per setting (the harness-error ceiling) that the marts report on: the
    current file's rule, as the next run of the suite will apply it.

    An invalid spec file is skipped and reported, never a reason to load nothing: every valid
    file still loads, and the rows its id had from an earlier load stay (the file is broken
    now, the runs it describes are not: dropping its rows would drop them from the marts).
    """
    apply_ddl(con)
    now = dt.datetime.now(dt.UTC)
    tasks, agents, suites = (
        list_tasks(paths.tasks_dir),
        list_agents(paths.agents_dir),
        list_suites(paths.suites_dir),
    )
    task_rows = _task_rows(tasks.specs, paths.tasks_dir, now)
    agent_rows = _agent_rows(agents.specs, now)
    suite_rows = _suite_rows(suites.specs, paths.suites_dir, now)
    setting_rows = _suite_setting_rows(suites.specs)
    # the ids of invalid files: their rows are kept as the last valid load left them
    kept = {
        "tasks": [p.spec_id for p in tasks.problems],
        "agents": [p.spec_id for p in agents.problems],
        "suites": [p.spec_id for p in suites.problems],
    }
    con.execute("begin transaction")
    try:
        con.register("_tmlbench_tasks", task_rows)
        con.register("_tmlbench_agents", agent_rows)
        con.register("_tmlbench_suites", suite_rows)
        con.register("_tmlbench_suite_settings", setting_rows)
        con.execute(
            "delete from raw.tasks where not list_contains($kept, task_id)",
            {"kept": kept["tasks"]},
        )
        con.execute("insert into raw.tasks by name select * from _tmlbench_tasks")
        for table in ("raw.suites", "raw.suite_settings"):
            con.execute(
                f"delete from {table} where not list_contains($kept, suite_id)",
                {"kept": kept["suites"]},
            )
        con.execute("insert into raw.suites by name select * from _tmlbench_suites")
        con.execute("insert into raw.suite_settings by name select * from _tmlbench_suite_settings")
        con.execute(
            "delete from raw.agents where (source = 'spec' "
            "or agent_id in (select agent_id from _tmlbench_agents)) "
            "and not list_contains($kept, agent_id)",
            {"kept": kept["agents"]},
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
    return SpecReport(
        tasks=len(tasks.specs),
        agents=len(agents.specs),
        suites=len(suites.specs),
        skipped=[*tasks.problems, *agents.problems, *suites.problems],
    )


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
            "price_in_per_mtok_usd": pa.array(
                [p.input_per_mtok if (p := _prices(a)) else None for a in agents], pa.float64()
            ),
            "price_out_per_mtok_usd": pa.array(
                [p.output_per_mtok if (p := _prices(a)) else None for a in agents], pa.float64()
            ),
            "source": pa.array(["spec"] * len(agents), pa.string()),
            "loaded_at": pa.array([now] * len(agents), pa.timestamp("us", tz="UTC")),
        }
    )


def _suite_rows(suites: list[SuiteSpec], suites_dir: Path, now: dt.datetime) -> pa.Table:
    """raw.suites rows of the suite specs, with the sha256 of each file's bytes."""
    shas = [hashlib.sha256((suites_dir / f"{s.id}.yaml").read_bytes()).hexdigest() for s in suites]
    return pa.table(
        {
            "suite_id": pa.array([s.id for s in suites], pa.string()),
            "title": pa.array([s.title for s in suites], pa.string()),
            "attempts": pa.array([s.attempts for s in suites], pa.int32()),
            "attempt_ceiling": pa.array([s.attempt_ceiling for s in suites], pa.int32()),
            "harness_error_ceiling": pa.array(
                [s.harness_error_ceiling for s in suites], pa.int32()
            ),
            "provider_error_ceiling": pa.array(
                [s.provider_error_ceiling for s in suites], pa.int32()
            ),
            "runs_subdir": pa.array([s.runs_subdir for s in suites], pa.string()),
            "spec_sha256": pa.array(shas, pa.string()),
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


def _prices(agent: AgentSpec) -> TokenPrices | None:
    """The token prices of an llm agent or a command agent's gateway, where given."""
    return agent.llm.prices if agent.llm else agent.gateway.prices if agent.gateway else None
