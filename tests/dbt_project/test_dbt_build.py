"""`dbt build` of the marts on temporary warehouses: empty (the session's one build of dbt's unit
tests), failing, and one warehouse of every hand-made scenario, built once and read by a test
per scenario (with the suites it compares, built alone)."""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import duckdb
import pandas as pd
import pytest
import yaml

from runner.attempts.records import STATUSES, RunRecord
from runner.config import REPO_ROOT
from runner.errors import TmlbenchError
from tests.support.workers import shared_session_dir
from tools.dbt_in_process import run_in_process
from tools.dbt_warehouse import (
    SCENARIO_EXCLUDE,
    SCENARIO_VARS,
    declare_suite,
    insert_agents,
    insert_runs,
    insert_suites,
    insert_tasks,
    read_mart,
    read_suite_mart,
)
from tools.records import make_record as run_record
from warehouse.dbt import WAREHOUSE_STAMP, run_dbt
from warehouse.marts import MartsResult, build_marts

# integration: real dbt builds of test warehouses
# xdist_group: its module fixtures (a dbt build) are built once, on one worker, not on each
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("dbt_build")]

# The public SQL interface (ARCHITECTURE.md): every mart and the columns users rely on.
PUBLIC_MARTS = {
    "setting_scores": [
        "agent_id", "task_id", "budget_seconds", "median_score", "q1", "q3", "iqr",
        "min_score", "max_score", "n_counted", "attempts", "successes", "median_score_hib",
        "rel_iqr",
    ],
    "normalized_scores": ["agent_id", "task_id", "budget_seconds", "points", "points_paper"],
    "leaderboard": ["agent_id", "variant", "score", "rank", "score_paper", "rank_paper"],
    "task_ranks": ["agent_id", "task_id", "best_points", "rank"],
    "rank_stability": ["agent_id", "mean_rank", "rank_std"],
    "success_rates": [
        "agent_id", "attempts", "successes", "success_rate", *(f"n_{s}" for s in STATUSES),
    ],
    "setting_success_rates": [
        "agent_id", "task_id", "budget_seconds", "attempts", "successes", "success_rate",
        "n_success", "n_harness_error", "harness_error_ceiling", "harness_error_ceiling_reached",
    ],
    "run_stability": ["agent_id", "rel_iqr"],
    "time_scaling": ["agent_id", "budget_seconds", "mean_points"],
    "time_scaling_monotone": ["agent_id", "curves", "monotone_curves", "share_monotone"],
    "time_scaling_gains": [
        "agent_id", "from_budget_seconds", "to_budget_seconds", "from_mean_points",
        "to_mean_points", "gain",
    ],
    "coverage": [
        "agent_id", "task_id", "budget_seconds", "successes", "missing", "n_harness_error",
        "harness_error_ceiling", "harness_error_ceiling_reached", "counted_successes",
        "n_provider_error", "provider_error_ceiling", "provider_error_ceiling_reached",
    ],
    "contamination_flags": [
        "agent_id", "task_id", "knowledge_cutoff", "task_start_date", "contaminated",
    ],
    "leaderboard_uncertainty": ["agent_id", "score_low", "score_high", "p_rank_1"],
    "leaderboard_rank_probabilities": ["agent_id", "rank", "probability", "provisional"],
    "suite_status": [
        "counted_successes", "settings_expected", "settings_complete", "agents_expected",
        "agents_ranked", "provisional",
    ],
    "duplicate_submissions": [
        "task_id", "submission_normalized_sha256", "n_attempts", "n_agents", "within_setting",
        "within_setting_counted", "across_agents", "agent_ids", "run_ids",
    ],
    "setting_duplicates": [
        "agent_id", "task_id", "budget_seconds", "duplicated", "duplicated_counted",
        "n_shared_with_other_agents",
    ],
    "submission_twins": [
        "run_id", "task_id", "submission_normalized_sha256", "agent_id", "budget_seconds",
        "n_twins", "n_same_setting_twins", "n_other_agent_twins",
    ],
    "setting_pass_k": [
        "agent_id", "task_id", "budget_seconds", "k", "agent_attempts", "successes", "pass_k",
        "expected_worst_points",
    ],
    "agent_pass_k": ["agent_id", "k", "mean_pass_k", "mean_expected_worst_points"],
}  # fmt: skip


# --- builds of their own ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("dbt-artifacts")


def _columns(path: Path) -> dict[tuple[str, str], list[str]]:
    with duckdb.connect(str(path), read_only=True) as con:
        rows = con.sql(
            "select table_schema, table_name, list(column_name order by ordinal_position) "
            "from information_schema.columns group by all"
        ).fetchall()
    return {(schema, table): columns for schema, table, columns in rows}


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, MartsResult]:
    """The suite's one build of every node, on an empty warehouse (its dbt artifacts, the
    manifest among them, in ../dbt)."""
    folder = tmp_path_factory.mktemp("fresh")
    path = folder / "fresh.duckdb"
    return path, build_marts(path, artifacts_dir=folder / "dbt")


def test_fresh_warehouse_builds_empty_marts_in_schema_marts(fresh: tuple[Path, MartsResult]):
    """The suite's one build of every node: the other builds of test data leave the unit tests
    (the models' SQL on fixed inputs) to this one, which fails if any of them fails."""
    path, result = fresh

    assert result.count("error") == result.count("fail") == 0
    # its target says which warehouse its parse was made for (what `make manifest` checks)
    assert (path.parent / "dbt" / "target" / WAREHOUSE_STAMP).read_text() == f"{path.resolve()}\n"
    assert sum(1 for n in result.nodes if n.unique_id.startswith("unit_test.")) >= 9
    # a build runs the cross-mart tests unless told not to (the other builds here skip them)
    cross_mart = {n.unique_id for n in result.nodes if ".composite_relationships_" in n.unique_id}
    assert len(cross_mart) >= 20 and result.count("pass") > len(cross_mart)
    columns = _columns(path)
    assert not any(schema.endswith("_marts") for schema, _ in columns)
    for mart, expected in PUBLIC_MARTS.items():
        assert ("marts", mart) in columns, mart
        assert set(expected) <= set(columns["marts", mart]), mart
        assert read_mart(path, mart).empty, mart
    # every mart and display model is keyed by suite: suite_id first (issue 15)
    published = {(schema, table) for schema, table in columns if schema in ("marts", "display")}
    assert {("marts", mart) for mart in PUBLIC_MARTS} <= published
    not_first = sorted(f"{s}.{t}" for s, t in published if columns[s, t][0] != "suite_id")
    assert not not_first, f"suite_id is not the first column of {not_first}"


# The dbt CLI in a subprocess (the product's) and dbt in this process (the test warehouses'
# builds, tools/dbt_in_process.py) fail alike.
@pytest.mark.parametrize("run", [run_dbt, run_in_process], ids=["subprocess", "in-process"])
def test_failing_data_test_names_the_node(
    tmp_path: Path, artifacts: Path, run: Callable[[Sequence[str]], CompletedProcess[str]]
):
    path = tmp_path / "warehouse.duckdb"
    bad = run_record("a", "t1", 60, 0, score=0.7)
    insert_runs(path, [bad.model_copy(update={"score_hib": -0.7})])

    with pytest.raises(TmlbenchError, match=r"expression_is_true_stg_raw__runs") as failure:
        build_marts(
            path, select="stg_raw__runs", artifacts_dir=artifacts, exclude=SCENARIO_EXCLUDE, run=run
        )
    assert "test.tmlbench.expression_is_true_stg_raw__runs" in str(failure.value)
    assert ": fail: Got 1 result" in str(failure.value)
    with duckdb.connect(str(path)) as con:  # closed by the build: writable again
        assert con.sql("select count(*) from raw.runs").fetchone() == (1,)


# --- constraints: the contracted tables hold no bad row --------------------------------------
#
# A contracted model's per-column rules (not null, a value range) are column constraints that
# DuckDB enforces when dbt fills the table (dbt_project/README.md, "How the models are tested"),
# not data tests: no query per column after the build, and the table never holds a bad row.


def _manifest(fresh: tuple[Path, MartsResult]) -> dict[str, Any]:
    manifest = fresh[0].parent / "dbt" / "target" / "manifest.json"
    return json.loads(manifest.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def _contracted(manifest: dict[str, Any]) -> dict[str, Any]:
    return {
        unique_id: node
        for unique_id, node in manifest["nodes"].items()
        if node["resource_type"] == "model" and node["config"]["contract"]["enforced"]
    }


def _yaml_of(model: dict[str, Any]) -> str:
    """The file that declares a model's columns (patch_path is `<project>://models/....yml`)."""
    return str(model.get("patch_path") or model["original_file_path"]).split("://")[-1]


def _sql_text(expression: str) -> str:
    """An expression as DuckDB prints it back, compared loosely: lower case, without blanks,
    parentheses or identifier quotes (`rank >= 1` is stored as `(rank >= 1)`)."""
    return re.sub(r'[\s()"]', "", expression.lower())


def test_contracted_columns_carry_their_constraints(fresh: tuple[Path, MartsResult]):
    """Every not_null and check constraint the YAML declares on a contracted model is on the
    built table (and no other), so DuckDB refuses a row that breaks one."""
    declared_not_null, declared_checks = set(), []
    for node in _contracted(_manifest(fresh)).values():
        table = (node["schema"], node["alias"])
        for column in node["columns"].values():
            for constraint in column["constraints"]:
                if constraint["type"] == "not_null":
                    declared_not_null.add((*table, column["name"]))
                elif constraint["type"] == "check":
                    declared_checks.append(
                        (*table, column["name"], _sql_text(constraint["expression"]))
                    )
    with duckdb.connect(str(fresh[0]), read_only=True) as con:
        rows = con.sql(
            "select schema_name, table_name, constraint_column_names[1], constraint_type, "
            "coalesce(expression, '') from duckdb_constraints() "
            "where schema_name in ('marts', 'display') and constraint_type in ('NOT NULL', 'CHECK')"
        ).fetchall()
    built_not_null = {(s, t, c) for s, t, c, kind, _ in rows if kind == "NOT NULL"}
    built_checks = [(s, t, c, _sql_text(e)) for s, t, c, kind, e in rows if kind == "CHECK"]

    assert len(declared_not_null) > 300 and len(declared_checks) > 100  # today 321 and 142
    assert built_not_null == declared_not_null
    assert sorted(built_checks) == sorted(declared_checks)
    assert ("marts", "leaderboard", "rank", "rank>=1") in built_checks  # a keyword as a column


def test_no_contracted_model_has_a_not_null_or_between_data_test(
    fresh: tuple[Path, MartsResult],
):
    """A guard: on a contracted model these rules are constraints, enforced as the table is
    filled; a data test would query the table again after every build for the same rule."""
    manifest = _manifest(fresh)
    contracted = _contracted(manifest)
    tests = [
        node
        for node in manifest["nodes"].values()
        if node["resource_type"] == "test" and node.get("attached_node") in contracted
    ]
    assert len(tests) > 50  # the rules constraints cannot say stay data tests (keys, relations)
    offending = sorted(
        f"{_yaml_of(contracted[node['attached_node']])}: "
        f"{node['test_metadata']['name']} on {node['column_name']}"
        for node in tests
        if (node.get("test_metadata") or {}).get("name") in ("not_null", "between")
    )
    assert not offending, (
        "a contracted model's column rule is a constraint, not a data test: write "
        "`constraints: [{type: not_null}]` or `{type: check, expression: <column> between <min> "
        "and <max>}` in the column instead of\n" + "\n".join(offending)
    )


def test_a_built_mart_refuses_a_row_that_breaks_a_constraint(
    fresh: tuple[Path, MartsResult], tmp_path: Path
):
    path = tmp_path / "copy.duckdb"
    shutil.copyfile(fresh[0], path)
    row = "select 's' as suite_id, 'a' as agent_id, 'best_budget' as variant, 0.5 as score, "
    row += "1 as rank, 1 as n_cells, 0.5 as score_paper, 1 as rank_paper"
    with duckdb.connect(str(path)) as con:
        con.execute(f"insert into marts.leaderboard by name {row}")  # the row itself is fine
        with pytest.raises(duckdb.ConstraintException, match=r"NOT NULL .*leaderboard\.score\b"):
            con.execute(
                f"insert into marts.leaderboard by name {row.replace('0.5 as score,', 'null as score,')}"
            )
        with pytest.raises(duckdb.ConstraintException, match=r"leaderboard .*\(rank >= 1\)"):
            con.execute(
                f"insert into marts.leaderboard by name {row.replace('1 as rank,', '0 as rank,')}"
            )
        assert con.sql("select count(*) from marts.leaderboard").fetchone() == (1,)


def test_a_build_that_makes_a_bad_value_fails_naming_the_model_and_the_rule(
    tmp_path: Path, artifacts: Path
):
    """The real path: raw rows that give a mart a value its constraint refuses fail the build;
    the error names the model and the rule, and no table holds the bad row."""
    path = tmp_path / "bad.duckdb"
    insert_runs(path, [run_record("a", "t1", 60, 0, score=0.7)], tokens_out=-5)

    with pytest.raises(TmlbenchError) as failure:
        build_marts(
            path,
            select="+counted_attempts",
            artifacts_dir=artifacts,
            exclude=f"{SCENARIO_EXCLUDE} resource_type:test",  # the models only
        )
    assert "model.tmlbench.counted_attempts: error" in str(failure.value)
    assert "CHECK((tokens_out >= 0))" in str(failure.value)
    with duckdb.connect(str(path), read_only=True) as con:
        tables = con.sql("select table_name from duckdb_tables() where schema_name = 'marts'")
        assert ("counted_attempts",) not in tables.fetchall()


# --- the scenarios: one warehouse, built once ----------------------------------------------
#
# Every scenario below is one or more suites of its own in one warehouse (suites never mix: the
# tests comparing a suite together and alone prove it), built once for the session; each test
# reads its suites' rows. A scenario's later state (a run dropped, a ceiling raised) is a suite
# of its own beside the first. The few bootstrap replicates change no assertion.


def insert_specs(path: Path) -> None:
    """raw.tasks and raw.agents (the same rows for every suite): every warehouse below has them,
    so a suite's contamination flags are the same together and alone."""
    insert_tasks(
        path,
        {
            "t1": ("maximize", dt.date(2025, 6, 1)),
            "auc": ("maximize", None),
            "rmse": ("minimize", None),
        },
    )
    insert_agents(path, {"a": dt.date(2025, 6, 1), "b": None, "c": None, "z": None})


def _in_suite(records: list[RunRecord], suite: str) -> list[RunRecord]:
    return [r.model_copy(update={"suite_id": suite}) for r in records]


# Hand-made rows: suite hand-made; its suite file lists t2 for a too (never run). covered is
# the same without t2 (its lone attempt and its setting dropped).
def hand_made_records() -> list[RunRecord]:
    records = [
        run_record(agent, task, budget, minute, score=base + budget / 1000 + minute / 100)
        for agent, base in (("a", 0.5), ("b", 0.6))
        for task in ("t1",)
        for budget in (60, 600)
        for minute in range(5)
    ]
    records.append(run_record("a", "t1", 60, 9, status="timeout"))
    records.append(run_record("b", "t2", 60, 3, score=4.0, direction="minimize"))
    return records


# Harness faults: suites strict (ceiling 3) and loose (5), and raised: strict's runs with its
# ceiling raised to 4 (the suite file changed).
def _faults(agent: str, n: int, suite: str | None, first: int = 0) -> list[RunRecord]:
    return [
        run_record(agent, "t1", 60, first + i, status="harness_error", suite_id=suite)
        for i in range(n)
    ]


def ceiling_records() -> list[RunRecord]:
    strict = [
        *_faults("stuck", 3, "strict"),  # 3 of 3: stopped, lacks every success
        *_faults("unlucky", 2, "strict"),  # 2 of 3 and 4 successes
        *(run_record("unlucky", "t1", 60, 10 + i, suite_id="strict") for i in range(4)),
    ]
    lenient = _faults("lenient", 3, "loose")  # 3 of 5
    return [*strict, *lenient, *_in_suite(strict, "raised")]


CEILINGS = {"strict": 3, "loose": 5, "raised": 4}


def _suite_records(suite: str, agents: dict[str, float], first_minute: float) -> list[RunRecord]:
    """Five successes per setting on t1 (60 s, 600 s) and t2 (60 s) for each agent, plus a
    timeout; run ids carry the suite (a run id is unique within a suite)."""
    records = []
    for agent, base in agents.items():
        for task, budget in (("t1", 60), ("t1", 600), ("t2", 60)):
            for i in range(5):
                score = base + budget / 10_000 + i / 100
                records.append(
                    run_record(
                        agent,
                        task,
                        budget,
                        first_minute + i,
                        score=score,
                        suite_id=suite,
                        run_id=f"{suite}-{agent}-{task}-{budget}-{i}",
                    )
                )
            records.append(
                run_record(
                    agent,
                    task,
                    budget,
                    first_minute + 9,
                    status="timeout",
                    suite_id=suite,
                    run_id=f"{suite}-{agent}-{task}-{budget}-t",
                )
            )
    return records


# Two suites sharing agents and tasks (issue 15): s2's attempts of the shared agent a are
# earlier (they would take s1's first-N slots), s2 has a much better agent c (it would move
# s1's normalization) and a budget s1 never ran would change s1's largest budget.
def s1_records() -> list[RunRecord]:
    return _suite_records("s1", {"a": 0.5, "b": 0.6}, first_minute=100)


def s2_records() -> list[RunRecord]:
    s2 = _suite_records("s2", {"a": 0.9, "c": 0.99}, first_minute=0)
    s2 += [
        run_record("a", "t1", 1200, 50 + i, score=0.95, suite_id="s2", run_id=f"s2-a-1200-{i}")
        for i in range(5)
    ]
    s2.append(run_record("c", "t1", 1200, 60, score=0.1, suite_id="s2", run_id="s2-c-1200"))
    return s2


S12_SUITES = {"s1": 3, "s2": 3}


# The demo's and tml-v1's folders hold the same run ids (baselines on the same tasks): suites a
# and b; suite c shares a's folder but lists only agent x (as tml-v1-llm shares tml-v1's
# baselines). Alone, c's runs lie in a folder of their own.
def same_run_ids_records(suite: str, edges: dict[str, float]) -> list[RunRecord]:
    return [
        run_record(agent, task, 60, minute, score=0.5 + edge + minute / 100, suite_id=suite)
        for agent, edge in edges.items()
        for task in ("t1", "t2")
        for minute in range(5)
    ]  # default run ids: the same in both folders


def suite_a_records() -> list[RunRecord]:
    return same_run_ids_records("a", {"x": 0.1, "y": 0.0})


def suite_b_records() -> list[RunRecord]:
    return same_run_ids_records("b", {"x": 0.0, "y": 0.2})


def suite_c_alone_records() -> list[RunRecord]:
    return _in_suite([r for r in suite_a_records() if r.agent_id == "x"], "c")


# Issue 25: one folder of runs (suite absurd's), two suites over it: sane lists a, b and c;
# absurd lists them and z, whose RMSE is 5.3e152 and whose AUC is 0.3.
QUALITY = {"a": 0.9, "b": 0.8, "c": 0.7}


def absurd_records() -> list[RunRecord]:
    records = []
    for agent, base in [*QUALITY.items(), ("z", None)]:
        for budget in (60, 600):
            for i in range(5):
                auc = 0.3 if base is None else base + budget / 10_000 + i / 100
                rmse = 5.3e152 if base is None else 3 - 2 * (base + budget / 10_000) + i / 100
                for task, score, direction, trivial in (
                    ("auc", auc, "maximize", 0.5),
                    ("rmse", rmse, "minimize", 3.0),
                ):
                    records.append(
                        run_record(
                            agent,
                            task,
                            budget,
                            10 * i,
                            score=score,
                            direction=direction,
                            suite_id="absurd",
                            trivial_score=trivial,
                            run_id=f"{agent}-{task}-{budget}-{i}",
                        )
                    )
    return records


# Suite three's file says `attempts: 3`; suite part lists 2 agents × 2 tasks and ran one setting.
def three_and_part_records() -> list[RunRecord]:
    three = [
        run_record(agent, task, 60, minute, score=0.5 + edge + minute / 100, suite_id="three")
        for agent, edge in (("x", 0.1), ("y", 0.0))
        for task in ("t1", "t2")
        for minute in range(3)
    ]
    part = [run_record("x", "t1", 60, minute, score=0.7, suite_id="part") for minute in range(5)]
    return three + part


def build_scenarios(folder: Path) -> None:
    path = folder / "warehouse.duckdb"
    records = [
        *_in_suite(hand_made_records(), "hand-made"),
        *_in_suite([r for r in hand_made_records() if r.task_id != "t2"], "covered"),
        *ceiling_records(),
        *s1_records(),
        *s2_records(),
        *suite_a_records(),
        *suite_b_records(),
        *absurd_records(),
        *three_and_part_records(),
    ]
    insert_runs(path, records)
    # imported runs: their source is their suite, which has no suite file: ceiling unknown
    insert_runs(path, _faults("imported", 4, None), source="tml-bench", run_space="tml-bench")
    insert_suites(path, {**CEILINGS, **S12_SUITES})
    insert_suites(path, {"three": 3, "part": 3}, attempts={"three": 3, "part": 5})
    insert_specs(path)
    with duckdb.connect(str(path)) as con:
        # hand-made's suite file lists t2 for a too (never run)
        con.execute("insert into raw.suite_settings values ('hand-made', 'a', 't2', 60)")
        declare_suite(con, "c", "a", agents=["x"])  # suite c: a's folder, x's settings
        declare_suite(con, "sane", "absurd", agents=list(QUALITY))
        # part's file lists what it never ran
        con.execute(
            "insert or ignore into raw.suite_settings select 'part', agent, task, 60 "
            "from (values ('x'), ('y')) as a(agent), (values ('t1'), ('t2')) as t(task)"
        )
    build_marts(
        path,
        dbt_vars=SCENARIO_VARS,
        artifacts_dir=folder / "dbt",
        exclude=SCENARIO_EXCLUDE,
        run=run_in_process,
    )


@pytest.fixture(scope="session")
def scenarios(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The warehouse of every scenario, its marts built (its dbt artifacts in ../dbt)."""
    return (
        shared_session_dir(tmp_path_factory, "dbt-scenarios", build_scenarios) / "warehouse.duckdb"
    )


# Suites alone: s1 (beside c in a folder of its own, with which it shares no agent, run id or
# folder), a alone and b alone (same run ids: neither may be beside the other, nor beside c,
# whose runs are a's). These builds make the marts only: the tests compare their rows with the
# scenarios build's, whose data tests ran on those same rows.
ALONE_EXCLUDE = f"{SCENARIO_EXCLUDE} resource_type:test"
ALONE = {
    "s1-and-c": lambda: [*s1_records(), *suite_c_alone_records()],
    "a": suite_a_records,
    "b": suite_b_records,
}


def build_alone(folder: Path) -> None:
    for name, records in ALONE.items():
        path = folder / name / "warehouse.duckdb"  # one name: one parse of the project serves all
        path.parent.mkdir()
        insert_runs(path, records())
        if name == "s1-and-c":
            insert_suites(path, S12_SUITES)
        insert_specs(path)
        build_marts(
            path,
            dbt_vars=SCENARIO_VARS,
            artifacts_dir=folder / f"dbt-{name}",
            exclude=ALONE_EXCLUDE,
            run=run_in_process,
        )


@pytest.fixture(scope="session")
def alone(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """suite → a warehouse without the suites it shares agents, run ids or a folder with."""
    folder = shared_session_dir(tmp_path_factory, "dbt-alone", build_alone)
    paths = {name: folder / name / "warehouse.duckdb" for name in ALONE}
    return {"s1": paths["s1-and-c"], "c": paths["s1-and-c"], "a": paths["a"], "b": paths["b"]}


def test_the_scenarios_build_runs_every_data_test_but_no_cross_mart_or_unit_test(
    scenarios: Path,
):
    results = json.loads((scenarios.parent / "dbt" / "target" / "run_results.json").read_text())
    ids = [result["unique_id"] for result in results["results"]]
    assert not [i for i in ids if ".composite_relationships_" in i or i.startswith("unit_test.")]
    assert sum(1 for i in ids if i.startswith("test.")) > 100
    assert {result["status"] for result in results["results"]} <= {"success", "pass"}


def test_hand_made_rows_build_and_fill_the_marts(scenarios: Path):
    path = scenarios
    # nobody has 5 successes on t2 at 60 s: no one is ranked, coverage says why
    coverage = read_suite_mart(path, "coverage", "hand-made")
    coverage = coverage.set_index(["agent_id", "task_id", "budget_seconds"])
    assert coverage.loc[("a", "t2", 60), "missing"] == 5
    assert coverage.loc[("b", "t2", 60), "missing"] == 4
    assert read_suite_mart(path, "leaderboard", "hand-made").empty
    scores = read_suite_mart(path, "setting_scores", "hand-made")
    scores = scores.set_index(["agent_id", "task_id", "budget_seconds"])
    assert scores.loc[("a", "t1", 60), "median_score"] == pytest.approx(0.58)
    assert scores.loc[("a", "t1", 60), "attempts"] == 6
    assert scores.loc[("b", "t2", 60), "median_score_hib"] == pytest.approx(-4.0)
    rates = read_suite_mart(path, "success_rates", "hand-made").set_index("agent_id")
    assert rates.loc["a", "success_rate"] == pytest.approx(10 / 11)
    flags = read_suite_mart(path, "contamination_flags", "hand-made").set_index("agent_id")
    assert bool(flags.loc["a", "contaminated"]) is True
    assert pd.isna(flags.loc["b", "contaminated"])

    assert read_suite_mart(path, "suite_status", "hand-made")["provisional"].tolist() == [True]
    # t2 dropped from the suite file and its lone attempt (suite covered): both agents are
    # covered and ranked
    board = read_suite_mart(path, "leaderboard", "covered")
    assert len(board) == 6
    best = board[board["variant"] == "best_budget"].set_index("agent_id")
    assert best.loc["b", "rank"] == 1 and best.loc["b", "score"] == pytest.approx(1.0)
    uncertainty = read_suite_mart(path, "leaderboard_uncertainty", "covered").set_index("agent_id")
    assert uncertainty.loc["b", "p_rank_1"] == pytest.approx(1.0)
    assert not uncertainty["provisional"].any()


def test_harness_errors_reach_the_ceiling_of_their_suite(scenarios: Path):
    """The ceiling comes from raw.suites (the suite files), for the suite that counts the run."""
    path = scenarios
    suites = ("strict", "loose", "tml-bench")
    rates = read_suite_mart(path, "setting_success_rates", *suites).set_index("agent_id")
    assert rates["n_harness_error"].to_dict() == {
        "stuck": 3, "unlucky": 2, "lenient": 3, "imported": 4
    }  # fmt: skip
    ceilings = rates["harness_error_ceiling"]
    assert ceilings.drop("imported").astype(int).to_dict() == {
        "stuck": 3, "unlucky": 3, "lenient": 5
    }  # fmt: skip
    assert pd.isna(ceilings["imported"])  # no suite: unknown, never reached
    reached = rates["harness_error_ceiling_reached"].astype(bool).to_dict()
    assert reached == {"stuck": True, "unlucky": False, "lenient": False, "imported": False}
    assert pd.isna(rates.loc["stuck", "success_rate"])  # harness faults are not the agent's
    assert rates.loc["unlucky", "success_rate"] == 1.0

    coverage = read_suite_mart(path, "coverage", *suites).set_index("agent_id")
    stopped = coverage[coverage["harness_error_ceiling_reached"] & (coverage["missing"] > 0)]
    assert list(stopped.index) == ["stuck"] and stopped.loc["stuck", "n_harness_error"] == 3

    # the ceiling raised in the suite file (suite raised: strict's runs, ceiling 4): not reached
    rates = read_suite_mart(path, "setting_success_rates", "raised", "loose", "tml-bench")
    assert set(rates["agent_id"]) == {"stuck", "unlucky", "lenient", "imported"}
    assert not rates["harness_error_ceiling_reached"].any()


def _rows(path: Path, suite: str) -> dict[str, pd.DataFrame]:
    """Every mart and display model's rows of ``suite``, sorted, without the index."""
    with duckdb.connect(str(path), read_only=True) as con:
        tables = con.sql(
            "select table_schema, table_name from information_schema.tables "
            "where table_schema in ('marts', 'display') order by 1, 2"
        ).fetchall()
        out = {}
        for schema, table in tables:
            frame = con.execute(
                f'select * from {schema}."{table}" where suite_id = ?', [suite]
            ).df()
            floats = frame.select_dtypes("float").columns
            frame[floats] = frame[floats].round(12)  # a sum in another order: last bits
            frame = frame.astype(str)  # lists and NaN compare as text
            out[f"{schema}.{table}"] = frame.sort_values(list(frame.columns)).reset_index(drop=True)
    return out


def test_two_suites_in_one_warehouse_give_each_suite_what_it_gives_alone(
    scenarios: Path, alone: dict[str, Path]
):
    """Issue 15: suites sharing agents and tasks never mix (s1 and s2 above, and every other
    scenario beside them)."""
    expected, actual = _rows(alone["s1"], "s1"), _rows(scenarios, "s1")
    assert expected.keys() == actual.keys()
    assert not expected["marts.leaderboard"].empty
    for name, frame in expected.items():
        pd.testing.assert_frame_equal(actual[name], frame, obj=name)
    # and s2 is there, ranked on its own: c lacks successes at 1200 s, a budget only s2 ran
    board = _rows(scenarios, "s2")["marts.leaderboard"]
    assert set(board["agent_id"]) == {"a"}


def test_suites_under_the_same_run_ids_and_a_shared_folder_stay_apart(
    scenarios: Path, alone: dict[str, Path]
):
    """The demo's and tml-v1's folders hold the same run ids (suites a and b); suite c shares a's
    folder but lists only agent x. Each suite's rows equal those of a warehouse without the
    suites it shares run ids with."""
    together = {suite: _rows(scenarios, suite) for suite in ("a", "b", "c")}
    for suite in ("a", "b", "c"):
        by_itself = _rows(alone[suite], suite)
        for name, frame in by_itself.items():
            got = together[suite][name]
            # c's runs lie in a's folder; alone, in c's: where a record lies (and what it says
            # of itself, display.runs_display's record fields) differs, not what a suite counts
            lies = ["run_space", "recorded_suite_id", "source_path", "record_sha256"]
            lies = [column for column in lies if column in frame.columns]
            got, frame = got.drop(columns=lies), frame.drop(columns=lies)
            pd.testing.assert_frame_equal(got, frame, obj=f"{name} of {suite}")
    winners = {
        suite: tables["marts.leaderboard"]
        .query("variant == 'best_budget' and rank == '1'")["agent_id"]
        .tolist()
        for suite, tables in together.items()
    }
    assert winners == {"a": ["x"], "b": ["y"], "c": ["x"]}


def test_an_agent_worse_than_trivial_moves_no_other_agents_numbers(scenarios: Path):
    """Issue 25: one folder of runs, two suites over it. "sane" lists agents a, b and c; "absurd"
    lists them and z, whose RMSE is 5.3e152 (one prediction of 1.3e154) and whose AUC is 0.3,
    both worse than the trivial prediction every record carries. Every number of a, b and c
    (points, task ranks, the leaderboard, rank stability, time scaling, the bootstrap) is the
    same in both suites; only the paper's points, kept beside them, let z flatten the RMSE cell."""
    path = scenarios

    def numbers(suite: str) -> dict[str, pd.DataFrame]:
        out = {}
        for name, frame in _rows(path, suite).items():
            if "agent_id" not in frame.columns:
                continue
            frame = frame[frame["agent_id"].isin(list(QUALITY))]
            if name == "marts.leaderboard_rank_probabilities":  # ranks 1..4 beside 1..3
                frame = frame[frame["probability"].astype(float) > 0]
            paper = [c for c in frame.columns if "paper" in c]
            # the suite's own counts: "absurd" lists one agent more (16 settings, not 12)
            suite_wide = [c for c in ("suite_coverage",) if c in frame.columns]
            out[name] = frame.drop(columns=["suite_id", *paper, *suite_wide])
            out[name] = out[name].reset_index(drop=True)
        return out

    sane, absurd = numbers("sane"), numbers("absurd")
    assert sane.keys() == absurd.keys()
    downstream = ["normalized_scores", "task_ranks", "leaderboard", "rank_stability"]
    downstream += ["time_scaling", "time_scaling_monotone", "leaderboard_uncertainty"]
    downstream += ["leaderboard_rank_probabilities", "setting_costs", "agent_costs"]
    downstream += ["setting_pass_k", "agent_pass_k"]  # the attempts' points: the same scale
    assert {f"marts.{name}" for name in downstream} <= sane.keys()
    for name, frame in sane.items():
        pd.testing.assert_frame_equal(absurd[name], frame, obj=name)

    points = read_suite_mart(path, "normalized_scores", "sane", "absurd")
    points = points.set_index(["suite_id", "agent_id", "task_id"])
    cell = points[points["budget_seconds"] == 60]
    assert cell.loc[("absurd", "b", "rmse"), "points"] == cell.loc[("sane", "b", "rmse"), "points"]
    assert cell.loc[("sane", "b", "rmse"), "points"] == pytest.approx(0.5)
    assert cell.loc[("absurd", "b", "rmse"), "points_paper"] == 1.0  # flattened: b ties a
    assert cell.loc[("absurd", "z", "rmse"), "points"] == 0.0
    assert cell.loc[("absurd", "z", "rmse"), "below_trivial"]


def test_a_suite_with_three_attempts_ranks_its_agents_and_a_partial_one_is_provisional(
    scenarios: Path,
):
    """Suite three's file says `attempts: 3`: agents with 3 successes in every setting are ranked
    (with the paper's 5 none would be). Suite part lists 2 agents × 2 tasks and ran one setting
    to the end (as tml-v1 with 1 of 36): nobody is ranked (no P(rank 1) = 100 %), the suite is
    provisional, 1 of 4 settings, and coverage lists the 3 never run."""
    path = scenarios
    board = read_suite_mart(path, "leaderboard", "three", "part").query("variant == 'best_budget'")
    assert board.set_index("agent_id").query("suite_id == 'three'")["rank"].to_dict() == {
        "x": 1, "y": 2
    }  # fmt: skip
    assert board.query("suite_id == 'part'").empty
    for mart in ("leaderboard_uncertainty", "leaderboard_rank_probabilities"):
        assert read_mart(path, mart).query("suite_id == 'part'").empty
    status = read_suite_mart(path, "suite_status", "three", "part").set_index("suite_id")
    assert status.loc["three", ["counted_successes", "provisional"]].tolist() == [3, False]
    part_status = status.loc["part"]
    assert part_status["provisional"] and part_status["counted_successes"] == 5
    assert (part_status["settings_complete"], part_status["settings_expected"]) == (1, 4)
    coverage = read_mart(path, "coverage").query("suite_id == 'part'")
    assert sorted(coverage.loc[coverage["attempts"] == 0, "agent_id"]) == ["x", "y", "y"]


# --- the project's layout (no build) --------------------------------------------------------

MODELS = REPO_ROOT / "dbt_project" / "models"
# Models without arithmetic of their own (renames, casts, a filter, a join): no unit test.
PASS_THROUGH = {
    "stg_raw__agents", "stg_raw__baselines", "stg_raw__resumptions", "stg_raw__suites",
    "stg_raw__suite_settings", "stg_raw__tasks", "counted_attempts", "suite_runs",
}  # fmt: skip


def test_each_model_has_its_yaml_beside_it_and_its_arithmetic_a_unit_test():
    """<model>.sql and <model>.yml side by side (as in dbt-labs/jaffle-shop); a YAML describes
    and unit-tests only its own model."""
    for sql in sorted(MODELS.rglob("*.sql")):
        described = sql.with_suffix(".yml")
        assert described.exists(), f"{sql.relative_to(MODELS)}: no {described.name} beside it"
        spec = yaml.safe_load(described.read_text())
        assert [m["name"] for m in spec.get("models", [])] == [sql.stem], described.name
        tested = {test["model"] for test in spec.get("unit_tests", [])}
        assert tested <= {sql.stem}, f"{described.name} unit-tests other models: {tested}"
        if sql.parent.name in {"staging", "intermediate", "marts"} and sql.stem not in PASS_THROUGH:
            assert tested, f"{sql.relative_to(MODELS)} has arithmetic and no unit test"
