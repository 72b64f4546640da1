"""Duplicate submissions (issue 13): the real loader and the real dbt build over records whose
submission fingerprints repeat in the ways that matter and in the ways that must not count."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import pytest

from runner.attempts.records import RunRecord, write_record
from tests.support.workers import shared_session_dir
from tools.dbt_in_process import run_in_process
from tools.dbt_warehouse import (
    SCENARIO_EXCLUDE,
    SCENARIO_VARS,
    count_every_setting,
    read_suite_mart,
)
from tools.records import make_record
from warehouse.db import apply_ddl, connect
from warehouse.loader import load_runs
from warehouse.marts import build_marts

# integration: real dbt builds of test warehouses
# xdist_group: its module fixtures (dbt builds) are built once, on one worker, not on each
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("duplicate_submissions")]


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# canonical fingerprints (submission_normalized_sha256)
REPLAYED = sha("replayer's cached answer")
SHARED = sha("one answer, two agents")
SAME_IN_TWO_TASKS = sha("same rows in two tasks")
SUITE = "dup"  # every attempt's suite: the duplicate marts are per suite (issue 15)


def fingerprinted(record: RunRecord, normalized: str | None, raw: str | None = None) -> RunRecord:
    """The record with its submission's fingerprints (raw bytes default to the canonical one)."""
    return record.model_copy(
        update={
            "submission_normalized_sha256": normalized,
            "submission_sha256": raw if raw is not None else normalized,
        }
    )


def scenario() -> list[RunRecord]:
    """The suite's records: a replayer, an honest agent, and a copycat sharing one answer."""
    records = []
    # replayer, t1 at 60 s: five successes; the 2nd and 4th submit the same answer (written out
    # differently: other bytes, same canonical content): a replay among the counted attempts
    for minute in range(5):
        normalized = REPLAYED if minute in (1, 3) else sha(f"replayer t1 60 {minute}")
        raw = sha(f"bytes {minute}")
        records.append(
            fingerprinted(make_record("replayer", "t1", 60, minute, score=0.7), normalized, raw)
        )
    # replayer at 600 s and honest everywhere: distinct answers
    for minute in range(5):
        records.append(
            fingerprinted(
                make_record("replayer", "t1", 600, minute, score=0.72),
                sha(f"replayer t1 600 {minute}"),
            )
        )
    for budget in (60, 600):
        for minute in range(5):
            normalized = sha(f"honest t1 {budget} {minute}")
            if (budget, minute) == (600, 2):
                normalized = SHARED  # the copycat submitted the same answer
            records.append(
                fingerprinted(make_record("honest", "t1", budget, minute, score=0.6), normalized)
            )
    # failures have no fingerprint: two in one setting are not a duplicate
    for minute in (7, 8):
        records.append(make_record("honest", "t1", 60, minute, status="timeout"))
    # the same canonical rows for two different tasks: not a duplicate
    records.append(fingerprinted(make_record("honest", "t2", 60, 0), SAME_IN_TWO_TASKS))
    records.append(fingerprinted(make_record("honest", "t3", 60, 0), SAME_IN_TWO_TASKS))
    # a record from before schema 5: no fingerprint, nothing known
    records.append(make_record("legacy", "t1", 60, 0, schema_version=4))

    # another agent of the suite, at another budget, submitting honest's answer
    records.append(fingerprinted(make_record("copycat", "t1", 300, 0, score=0.6), SHARED))
    return records


# A 6th success of honest on t1 at 60 s (not counted) repeating a counted one's answer: suite
# LATE holds SUITE's records and this one (its own folder, the same warehouse and build).
LATE = "dup-late"


def late_record() -> RunRecord:
    return fingerprinted(make_record("honest", "t1", 60, 30, score=0.6), sha("honest t1 60 0"))


def build(root: Path) -> None:
    """Both suites' records written to their folders, loaded by the real loader, marts built."""
    suites = {SUITE: scenario(), LATE: [*scenario(), late_record()]}
    for suite, records in suites.items():
        for record in records:
            run_dir = root / "runs" / suite / record.run_id  # the suite's folder
            run_dir.mkdir(parents=True)
            write_record(run_dir, record.model_copy(update={"suite_id": suite}))
    path = root / "warehouse.duckdb"
    con = connect(path)
    try:
        apply_ddl(con)
        report = load_runs(con, root / "runs")
        written = sum(len(records) for records in suites.values())
        assert not report.rejected and report.new == written, report.rejected
    finally:
        con.close()
    count_every_setting(path)  # each suite file: every setting of its folder
    build_marts(
        path,
        dbt_vars=SCENARIO_VARS,
        artifacts_dir=root / "dbt",
        exclude=SCENARIO_EXCLUDE,
        run=run_in_process,
    )


@pytest.fixture(scope="session")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_session_dir(tmp_path_factory, "duplicates", build) / "warehouse.duckdb"


def _run_id(agent: str, task: str, budget: int, minute: int) -> str:
    return make_record(agent, task, budget, minute).run_id


def test_the_duplicate_mart_flags_the_replayed_submission_and_nothing_else(warehouse: Path):
    groups = read_suite_mart(warehouse, "duplicate_submissions", SUITE).set_index(
        "submission_normalized_sha256"
    )
    assert sorted(groups.index) == sorted([REPLAYED, SHARED])
    assert set(groups["task_id"]) == {"t1"}
    assert (groups["suite_id"] == SUITE).all()

    replayed = groups.loc[REPLAYED]
    assert bool(replayed["within_setting"]) and bool(replayed["within_setting_counted"])
    assert not bool(replayed["across_agents"])
    assert (replayed["n_attempts"], replayed["n_agents"], replayed["n_settings"]) == (2, 1, 1)
    assert list(replayed["agent_ids"]) == ["replayer"]
    first, second = _run_id("replayer", "t1", 60, 1), _run_id("replayer", "t1", 60, 3)
    assert list(replayed["run_ids"]) == [first, second] and replayed["first_run_id"] == first

    shared = groups.loc[SHARED]
    assert bool(shared["across_agents"]) and not bool(shared["within_setting"])
    assert list(shared["agent_ids"]) == ["copycat", "honest"]
    assert (shared["n_attempts"], shared["n_settings"], shared["n_counted"]) == (2, 2, 2)


def test_twins_list_exactly_the_attempts_of_the_two_groups(warehouse: Path):
    twins = read_suite_mart(warehouse, "submission_twins", SUITE).set_index("run_id")
    assert set(twins.index) == {
        _run_id("replayer", "t1", 60, 1),
        _run_id("replayer", "t1", 60, 3),
        _run_id("honest", "t1", 600, 2),
        _run_id("copycat", "t1", 300, 0),
    }
    replay = twins.loc[_run_id("replayer", "t1", 60, 3)]
    assert (replay["n_twins"], replay["n_same_setting_twins"], replay["n_other_agent_twins"]) == (
        1,
        1,
        0,
    )
    assert bool(replay["is_counted"]) and replay["success_index"] == 4
    assert (
        replay["submission_sha256"]
        != twins.loc[_run_id("replayer", "t1", 60, 1)]["submission_sha256"]
    )  # other bytes, same answer
    assert twins.loc[_run_id("copycat", "t1", 300, 0), "n_other_agent_twins"] == 1


def test_setting_duplicates_flag_only_the_replayed_setting(warehouse: Path):
    settings = read_suite_mart(warehouse, "setting_duplicates", SUITE).set_index(
        ["agent_id", "task_id", "budget_seconds"]
    )
    flagged = settings[settings["duplicated_counted"].fillna(False).astype(bool)]
    assert list(flagged.index) == [("replayer", "t1", 60)]
    row = flagged.iloc[0]
    assert (row["n_counted"], row["n_distinct_counted_submissions"]) == (5, 4)
    assert settings["duplicated"].fillna(False).astype(bool).sum() == 1

    honest = settings.loc[("honest", "t1", 60)]  # two timeouts without a fingerprint
    assert (honest["n_fingerprinted"], honest["n_distinct_submissions"]) == (5, 5)
    assert not bool(honest["duplicated_counted"])
    shared = settings["n_shared_with_other_agents"]
    assert shared[shared > 0].to_dict() == {("honest", "t1", 600): 1, ("copycat", "t1", 300): 1}
    legacy = settings.loc[("legacy", "t1", 60)]  # unknown, not "distinct"
    assert pd.isna(legacy["duplicated_counted"]) and pd.isna(legacy["duplicated"])


def test_a_replay_after_the_counted_attempts_is_flagged_but_not_counted(warehouse: Path):
    """A 6th success (not counted) repeating a counted one: within_setting, not counted."""
    groups = read_suite_mart(warehouse, "duplicate_submissions", LATE)
    groups = groups.set_index("submission_normalized_sha256")
    assert len(groups) == 3
    late_group = groups.loc[sha("honest t1 60 0")]
    assert bool(late_group["within_setting"]) and not bool(late_group["within_setting_counted"])
    assert (late_group["n_attempts"], late_group["n_counted"]) == (2, 1)
    settings = read_suite_mart(warehouse, "setting_duplicates", LATE).set_index(
        ["agent_id", "task_id", "budget_seconds"]
    )
    honest = settings.loc[("honest", "t1", 60)]
    assert bool(honest["duplicated"]) and not bool(honest["duplicated_counted"])
