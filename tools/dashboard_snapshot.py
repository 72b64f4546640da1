"""A published snapshot for the dashboard's tests, built from hand-made records by the real loader,
dbt and the publish step, as the pipeline runs them."""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path
from typing import Any

import duckdb

from runner.attempts.records import RunRecord, write_record
from tools.dbt_in_process import run_in_process
from tools.dbt_warehouse import (
    SCENARIO_EXCLUDE,
    SCENARIO_VARS,
    count_every_setting,
    insert_agents,
    insert_suites,
    insert_tasks,
)
from tools.records import T0, make_record
from warehouse.db import apply_ddl, connect
from warehouse.loader import load_runs
from warehouse.marts import build_marts
from warehouse.snapshot import publish_snapshot

# (task, direction): alpha wins t1 and t3, beta wins t2; gamma never completes its settings
TASKS = {"t1": "maximize", "t2": "minimize", "t3": "maximize"}
BUDGETS = (60, 600)
# alpha's model knew t1 (cutoff after its start), beta's none, gamma's cutoff is unknown
TASK_STARTS = {"t1": dt.date(2025, 1, 1), "t2": dt.date(2025, 6, 1), "t3": dt.date(2025, 6, 1)}
CUTOFFS = {"alpha": dt.date(2025, 3, 1), "beta": dt.date(2024, 12, 1), "gamma": None}
ALPHA_COST = 0.01  # per attempt; beta's and gamma's cost is unknown
LATE_DAY = (T0 + dt.timedelta(days=3)).date()  # gamma's last attempt, alone on its day
# raw.suites: suite → harness_error_ceiling (and its folder); "idle" is a suite file never run
SUITES = {"demo": 3, "idle": 3, "other": 3}
# Submission fingerprints: every success's answer is its own, except alpha's t3 at 600 s, whose
# first two counted attempts submitted one answer (a replay), and one answer beta and gamma share.
REPLAY, SHARED = "f" * 64, "e" * 64
SAME_ANSWER = {
    ("alpha", "t3", 600, 0): REPLAY,
    ("alpha", "t3", 600, 1): REPLAY,
    ("beta", "t1", 60, 0): SHARED,
    ("gamma", "t1", 60, 0): SHARED,
}


def _fingerprint(record: RunRecord) -> RunRecord:
    """A success's canonical fingerprint: its own, or the answer it repeats (SAME_ANSWER)."""
    if record.status != "success":
        return record
    key = (record.agent_id, record.task_id, record.budget_seconds, record.attempt_index)
    normalized = SAME_ANSWER.get(key, hashlib.sha256(record.run_id.encode()).hexdigest())
    return record.model_copy(
        update={"submission_normalized_sha256": normalized, "submission_sha256": normalized}
    )


def snapshot_records() -> list[RunRecord]:
    """The hand-made records the snapshot is built from (alpha, beta, gamma on t1–t3)."""
    records: list[RunRecord] = []
    for agent, edge in (("alpha", 0.1), ("beta", 0.0)):
        for task, direction in TASKS.items():
            for budget in BUDGETS:
                for minute in range(5):
                    base = 0.5 + budget / 10000 + minute / 1000
                    # t2 is an rmse: beta's is lower (better)
                    score = 1.0 - base + 2 * edge if task == "t2" else base + edge
                    cost: dict[str, Any] = (
                        {"tokens_in": 1000, "tokens_out": 100, "cost_usd": ALPHA_COST}
                        if agent == "alpha"
                        else {}
                    )
                    records.append(
                        make_record(
                            agent,
                            task,
                            budget,
                            minute,
                            score=score,
                            direction=direction,
                            suite_id="demo",
                            **cost,
                        )
                    )
    records.append(make_record("beta", "t1", 60, 7, status="timeout", suite_id="demo"))
    records.append(make_record("gamma", "t1", 60, 0, score=0.9, suite_id="demo"))
    records.append(make_record("gamma", "t1", 60, 1, status="runtime_error", suite_id="demo"))
    records.append(
        make_record("gamma", "t1", 60, 3 * 24 * 60, status="no_submission", suite_id="demo")
    )
    # alpha's t3 at 600 s: two attempts ended by the provider's faults (not alpha's: its success
    # rate stays 1) and faults it recovered from on a success
    for minute in (20, 21):
        records.append(
            make_record(
                "alpha", "t3", 600, minute, status="provider_error", suite_id="demo",
                provider_faults=2, provider_fault_evidence=["call 3: HTTP 429 without Retry-After"],
            )
        )  # fmt: skip
    records[0] = records[0].model_copy(update={"provider_faults": 1, "interrupted_calls": 1})
    # gamma's t2 at 600 s: three harness faults, its suite's ceiling: stopped there
    for minute in (10, 11, 12):
        records.append(
            make_record("gamma", "t2", 600, minute, status="harness_error", suite_id="demo")
        )
    return [_fingerprint(r) for r in records]


def other_suite_records() -> list[RunRecord]:
    """Suite other's folder: gamma on t1 at 60 s again, under the same run ids as in the demo's
    folder (each suite's own runs), with a score no demo mart may show."""
    return [
        make_record("gamma", "t1", 60, 0, score=0.123, suite_id="other"),
        make_record("gamma", "t1", 60, 1, status="runtime_error", suite_id="other"),
    ]


def build_snapshot(root: Path) -> Path:
    """Write records, load them, build the marts (few bootstrap replicates), publish."""
    runs_dir = root / "runs"
    for record in (*snapshot_records(), *other_suite_records()):
        assert record.suite_id is not None  # every hand-made record here names its suite
        run_dir = runs_dir / record.suite_id / record.run_id  # each suite's folder
        run_dir.mkdir(parents=True)
        write_record(run_dir, record)
    warehouse = root / "warehouse.duckdb"
    con = connect(warehouse)
    try:
        apply_ddl(con)
        report = load_runs(con, runs_dir)
    finally:
        con.close()
    assert not report.rejected, report.rejected
    insert_tasks(warehouse, {t: (d, TASK_STARTS[t]) for t, d in TASKS.items()})
    insert_agents(warehouse, CUTOFFS)
    insert_suites(warehouse, SUITES)
    count_every_setting(warehouse)
    with duckdb.connect(str(warehouse)) as con:  # demo's file lists every agent × task × budget
        con.execute(
            "insert or ignore into raw.suite_settings select 'demo', agent_id, task_id, budget "
            "from (select distinct agent_id from raw.runs where run_space = 'demo'), "
            "unnest(?::varchar[]) as t(task_id), unnest(?::integer[]) as b(budget)",
            [list(TASKS), list(BUDGETS)],
        )
    build_marts(
        warehouse,
        dbt_vars=SCENARIO_VARS,
        artifacts_dir=root / "dbt",
        exclude=SCENARIO_EXCLUDE,
        run=run_in_process,
    )
    snapshot = root / "warehouse.snapshot.duckdb"
    publish_snapshot(warehouse, snapshot)
    return snapshot


def run_id_of(agent: str, task: str, budget: int, minute: int) -> str:
    """The run id of the hand-made record of this setting and minute."""
    return make_record(agent, task, budget, minute).run_id
