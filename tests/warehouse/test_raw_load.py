"""One raw load as the orchestrator runs it (what to load, then specs and records, and what the
raw tables hold after), and the version of what the marts are built from."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from runner.config import Paths
from runner.errors import TmlbenchError
from runner.specs.registry import load_suite
from runner.suites.benchmark_settings import SuiteLayout, suite_settings
from tests.support.run_folders import write
from tools.records import make_record
from warehouse.marts_inputs import has_marts, marts_inputs_version
from warehouse.raw_load import NO_RUNS_DIR, RAW_TABLES, LoadScope, load_raw

BANK = "bank-customer-churn-ict-u-ai"
CONSTANT = f"baseline-constant|{BANK}|30"
LINEAR = f"baseline-linear|{BANK}|30"


@pytest.fixture
def tiny(tmp_path: Path) -> Paths:
    """One suite ``tiny`` (two settings) with two records of each under ``<tmp>/runs/tiny``."""
    suites = tmp_path / "suites"
    suites.mkdir()
    suite = {
        "id": "tiny", "title": "tiny", "tasks": [BANK],
        "agents": ["baseline-constant", "baseline-linear"], "budgets": [30], "runs_subdir": "tiny",
    }  # fmt: skip
    (suites / "tiny.yaml").write_text(yaml.safe_dump(suite))
    paths = replace(Paths.from_env(), suites_dir=suites, runs_dir=tmp_path / "runs")
    spec = load_suite(suites, "tiny")
    runs_dir = SuiteLayout.of(spec, paths).runs_dir
    for setting in suite_settings(spec, paths):
        for index in range(2):
            record = make_record(
                agent=setting.agent.id, task=setting.task.id, budget=30, minute=index,
                run_id=setting.plan(index).run_id, suite_id="tiny",
            )  # fmt: skip
            write(runs_dir, record)
    return paths


def test_a_load_of_every_record_reports_every_raw_table(con, tiny: Paths):
    load = load_raw(con, tiny, LoadScope())
    assert (load.scope, load.runs.new, load.runs.unchanged) == ("every record", 4, 0)
    assert set(load.rows) == set(load.versions) == set(RAW_TABLES)
    assert load.rows["raw.runs"] == 4 and load.rows["raw.suites"] >= 1
    assert load.status_problems == [] and load.warnings() == []
    assert (
        load.summary() == "raw load (every record): 4 new, 0 unchanged, 0 rejected, 4 files parsed"
    )
    again = load_raw(con, tiny, LoadScope())
    assert (again.runs.new, again.runs.unchanged) == (0, 4)
    assert again.versions == load.versions  # the same rows, the same versions


def test_a_load_of_settings_reads_their_run_folders_only(con, tiny: Paths):
    scope = LoadScope.of_settings(tiny, {"tiny": [LINEAR]})
    assert scope.describe() == "1 settings" and scope.prefixes is not None
    load = load_raw(con, tiny, scope)
    assert (load.scope, load.runs.new, load.rows["raw.runs"]) == ("1 settings", 2, 2)
    agents = {a for (a,) in con.execute("select distinct agent_id from raw.runs").fetchall()}
    assert agents == {"baseline-linear"}


def test_settings_that_cannot_be_located_fail_or_widen_the_load_to_every_record(tiny: Paths):
    with pytest.raises(TmlbenchError, match="not settings of suite tiny"):
        LoadScope.of_settings(tiny, {"tiny": ["nobody|nothing|1"]})
    assert LoadScope.of_settings(tiny, {"gone": [LINEAR]}, unknown_ok=True) == LoadScope()
    assert LoadScope.of_settings(tiny, {"tiny": ["a|b|1"]}, unknown_ok=True).prefixes is None


def test_without_a_runs_folder_the_specs_load_and_the_load_says_so(con, tiny: Paths, tmp_path):
    paths = replace(tiny, runs_dir=tmp_path / "none")
    load = load_raw(con, paths, LoadScope())
    assert load.scope == NO_RUNS_DIR and load.rows["raw.runs"] == 0
    assert load.rows["raw.tasks"] > 0
    assert load.warnings() == [f"no runs directory at {paths.runs_dir}: no records to load"]


def test_the_marts_inputs_version_follows_the_raw_content(con, tiny: Paths):
    load_raw(con, tiny, LoadScope())
    version = marts_inputs_version(con)
    load_raw(con, tiny, LoadScope())
    assert marts_inputs_version(con) == version  # loaded again, nothing new
    write(tiny.runs_dir / "tiny", make_record(run_id="by-hand", minute=9, suite_id="tiny"))
    load_raw(con, tiny, LoadScope())
    assert marts_inputs_version(con) != version
    assert not has_marts(con)
    con.execute("create schema marts; create table marts.leaderboard (x int)")
    assert has_marts(con)
