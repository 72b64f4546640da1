"""``tmlbench warehouse load``, ``tmlbench import tml-bench`` and ``tmlbench sql``."""

from __future__ import annotations

import csv
import io
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from runner.command_line import cli
from runner.config import REPO_ROOT
from runner.errors import TmlbenchError
from runner.specs.registry import list_agents
from tests.support import tml_bench as tb
from tests.support.cli_imports import HEAVY, imported_by
from tests.support.run_folders import write, write_raw
from tests.support.tmlbench_cli import invoke
from tools.dbt_warehouse import CLI_WITHOUT_UNIT_TESTS
from tools.records import make_record as rec
from warehouse.db import connect

QUERIES = REPO_ROOT / "warehouse" / "queries"


def write_suite(suites: Path, suite_id: str, agents: list[str], runs_subdir: str) -> None:
    suites.mkdir(exist_ok=True)
    (suites / f"{suite_id}.yaml").write_text(
        f"id: {suite_id}\ntitle: {suite_id} suite\ntasks: [t]\nagents: [{', '.join(agents)}]\n"
        f"budgets: [60]\nattempts: 1\nruns_subdir: {runs_subdir}\n",
        encoding="utf-8",
    )


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    runs, suites = tmp_path / "runs", tmp_path / "suites"
    for minute in range(3):
        write(runs, rec(minute=minute, wall_seconds=10.0 + minute))
    write(runs, rec(agent="b", status="invalid_submission", validation_message="missing ids"))
    write_suite(suites, "local", ["a", "b"], runs_subdir=".")  # the records above
    return {
        "TMLBENCH_RUNS_DIR": str(runs),
        "TMLBENCH_SUITES_DIR": str(suites),
        "TMLBENCH_WAREHOUSE": str(tmp_path / "wh.duckdb"),
        **CLI_WITHOUT_UNIT_TESTS,  # `warehouse build`: every data test, dbt's unit tests aside
    }


def test_commands_are_registered_through_entry_points():
    assert {"warehouse", "import", "sql", "leaderboard"} <= set(cli.commands)


def test_warehouse_load_prints_counts_and_is_idempotent(env):
    result = invoke(env, "warehouse", "load")
    assert result.exit_code == 0, result.output
    agents = len(list_agents(REPO_ROOT / "agents").specs)
    assert f"4 tasks, {agents} agents" in result.output
    assert "4 new, 0 unchanged, 0 rejected" in result.output
    again = invoke(env, "warehouse", "load")
    assert "0 new, 4 unchanged, 0 rejected" in again.output and again.exit_code == 0


def test_warehouse_load_reports_rejections(env, tmp_path: Path):
    bad = write_raw(Path(env["TMLBENCH_RUNS_DIR"]), "bad", "[]")
    other = tmp_path / "other.duckdb"
    result = invoke(env, "warehouse", "load", "--warehouse", str(other))
    assert result.exit_code == 1
    assert "4 new, 0 unchanged, 1 rejected" in result.output
    assert str(bad.resolve()) in result.output.replace("\n", "")
    assert other.is_file() and not Path(env["TMLBENCH_WAREHOUSE"]).exists()


def test_warehouse_load_skips_a_bad_spec_file_and_loads_everything_else(env, tmp_path: Path):
    """One invalid agent file: every run and every other spec loads; the file is named with
    what is wrong; exit status 1, as for a rejected record."""
    import shutil

    agents = tmp_path / "agents"
    shutil.copytree(REPO_ROOT / "agents", agents)
    broken = agents / "baseline-gbm.yaml"
    broken.write_text(broken.read_text() + "surprise: 1\n")
    result = invoke(env | {"TMLBENCH_AGENTS_DIR": str(agents)}, "warehouse", "load")
    assert result.exit_code == 1, result.output
    output = " ".join(result.output.split())
    valid = len(list_agents(agents).specs)
    assert f"specs: 4 tasks, {valid} agents, 1 suites" in output
    assert (
        f"skipped {broken}: invalid AgentSpec: surprise: Extra inputs are not permitted" in output
    )
    assert "1 spec file(s) skipped" in output
    assert "4 new, 0 unchanged, 0 rejected" in output


def test_sql_prints_a_table_and_csv(env):
    invoke(env, "warehouse", "load")
    result = invoke(
        env, "sql", "select agent_id, count(*) as n from raw.runs group by 1 order by 1"
    )
    assert result.exit_code == 0, result.output
    assert "agent_id" in result.output and "2 rows" in result.output
    as_csv = invoke(
        env, "sql", "--csv", "select agent_id, count(*) as n from raw.runs group by 1 order by 1"
    )
    assert list(csv.reader(io.StringIO(as_csv.output))) == [
        ["agent_id", "n"],
        ["a", "3"],
        ["b", "1"],
    ]


def test_sql_is_read_only_unless_write(env):
    invoke(env, "warehouse", "load")
    with pytest.raises(TmlbenchError, match="read-only") as refused:
        invoke(env, "sql", "delete from raw.runs")
    assert "--write" in str(refused.value)
    con = connect(Path(env["TMLBENCH_WAREHOUSE"]), read_only=True)
    assert con.execute("select count(*) from raw.runs").fetchone()[0] == 4
    con.close()
    written = invoke(env, "sql", "--write", "delete from raw.runs where agent_id = 'b'")
    assert written.exit_code == 0, written.output


@pytest.mark.parametrize(
    "name", ["attempts_by_status", "slowest_attempts", "invalid_submissions", "setting_medians"]
)
def test_example_queries_on_raw_run(env, name):
    invoke(env, "warehouse", "load")
    result = invoke(env, "sql", "--csv", "-f", str(QUERIES / f"{name}.sql"))
    assert result.exit_code == 0, result.output
    rows = list(csv.reader(io.StringIO(result.output)))
    assert len(rows) >= 2
    if name == "invalid_submissions":
        assert "missing ids" in result.output


def table_rows(output: str) -> list[list[str]]:
    """The body rows of every rich table in ``output``, as lists of stripped cells."""
    lines = [line for line in output.splitlines() if line.startswith("│")]
    return [[cell.strip() for cell in line.split("│")[1:-1]] for line in lines]


# integration: a real dbt build through the CLI, into the repository's dbt_project/target
# (`tmlbench warehouse build` has no other): one writer of it at a time (tests/README.md). One
# build for what the example queries and the leaderboard command read (a build is ~25 s of CPU).
@pytest.mark.integration
@pytest.mark.xdist_group("dbt_project_target")
def test_warehouse_build_loads_and_builds_marts_the_example_queries_and_leaderboard_read(env):
    """The real dbt build behind `tmlbench warehouse build`, then the mart example queries and
    `tmlbench leaderboard`. Agent c ran in suite demo's folder, a and b in suite local's: each
    suite's marts rank its own agents, and the demo board shows c's rows only."""
    runs = Path(env["TMLBENCH_RUNS_DIR"])
    write_suite(Path(env["TMLBENCH_SUITES_DIR"]), "demo", ["c"], runs_subdir="demo")
    write_suite(Path(env["TMLBENCH_SUITES_DIR"]), "tml-v1", ["c"], runs_subdir="tml-v1")  # idle
    for minute in range(2):
        record = rec(agent="c", minute=minute, score=0.75 + minute / 10, suite_id="demo")
        write(runs, record, sub="demo")
    built = invoke(env, "warehouse", "build")  # N = the suite files' attempts: 1
    assert built.exit_code == 0, built.output
    assert "6 new" in built.output and "marts built in" in built.output

    board = invoke(env, "sql", "--csv", "-f", str(QUERIES / "leaderboard.sql"))
    assert board.exit_code == 0, board.output
    # agent "a" has successes in every setting; "b" only an invalid submission: not ranked
    ranked = [row[:3] for row in csv.reader(io.StringIO(board.output))][1:]
    assert ranked == [["demo", "1", "c"], ["local", "1", "a"]]
    scores = invoke(env, "sql", "--csv", "-f", str(QUERIES / "setting_scores.sql"))
    assert scores.exit_code == 0 and ",a," in scores.output.replace("\n", ",")

    board = invoke(env, "leaderboard", "--suite", "demo")
    assert board.exit_code == 0, board.output
    assert board.output.startswith("tmlbench leaderboard: ") and "(demo)" in board.output
    ranking, medians = table_rows(board.output)[:1], table_rows(board.output)[1:]
    # c alone in its suite: every task's range is one score, worth the middle points (0.5)
    assert ranking == [["1", "c", "0.500", "0.500", "0.500", "1.00 ± -", "100%", "0", "0.0000"]]
    assert "setting medians (first 1 successes)" in board.output  # the suite file's attempts
    assert "final: 1 of 1 settings complete" in board.output
    assert "provisional" not in board.output
    assert medians == [["t", "c", "0.7500"]]  # the first success only
    assert "not ranked" not in board.output  # b lacks successes, but outside the suite
    warehouse = Path(env["TMLBENCH_WAREHOUSE"])
    # not even the pandas DuckDB's client imports to inspect a bound parameter
    loaded = imported_by("leaderboard", "--suite", "demo", warehouse=warehouse)
    assert not loaded & (HEAVY - {"duckdb"})

    with pytest.raises(TmlbenchError, match="unknown suite 'nope'") as unknown:
        invoke(env, "leaderboard", "--suite", "nope")
    assert "demo" in str(unknown.value)
    with pytest.raises(TmlbenchError, match="no attempt of suite 'tml-v1'"):
        invoke(env, "leaderboard", "--suite", "tml-v1")


def test_leaderboard_without_marts_says_how_to_build_them(env, tmp_path: Path):
    with pytest.raises(TmlbenchError, match="no warehouse at") as missing:
        invoke(env, "leaderboard", "--warehouse", str(tmp_path / "none.duckdb"))
    assert "tmlbench warehouse build" in str(missing.value)
    assert invoke(env, "warehouse", "load").exit_code == 0
    with pytest.raises(TmlbenchError, match=r"no marts\.leaderboard") as unbuilt:
        invoke(env, "leaderboard")
    assert "tmlbench warehouse build" in str(unbuilt.value)


def test_import_tml_bench_command(env, tmp_path: Path):
    runs = [
        tb.result("a1", "2026-02-01T10:00:00-08:00"),
        tb.result("a2", "2026-02-01T11:00:00-08:00", status="timeout"),
    ]
    db = tb.database(tmp_path / "results.sqlite", runs)
    sql = sqlite3.connect(db)
    sql.execute("alter table runs add column judge_notes text")
    sql.execute("update runs set judge_notes = 'fine'")
    sql.commit()
    sql.close()
    result = invoke(env, "import", "tml-bench", str(db))
    assert result.exit_code == 0, result.output
    assert "2 new, 0 unchanged, 0 rejected" in result.output
    assert "TML-bench baselines: 2 new" in result.output
    assert result.output.count("judge_notes") == 1  # reported once, not per row
    assert "in source_fields: runs.judge_notes (2 values)" in result.output
    again = invoke(env, "import", "tml-bench", str(db))
    assert "0 new, 2 unchanged" in again.output
    sql = sqlite3.connect(db)
    sql.execute("update runs set status = 'exploded' where run_id = 'a2'")
    sql.commit()
    sql.close()
    refused = invoke(env, "import", "tml-bench", str(db))
    assert refused.exit_code == 1 and "unknown status 'exploded'" in refused.output


def test_sql_errors_exit_2_through_the_real_entry_point(env):
    invoke(env, "warehouse", "load")
    run = [sys.executable, "-c", "from runner.command_line import main; main()"]
    proc = subprocess.run(
        [*run, "sql", "selec 1"], env={**env, "PATH": ""}, capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "SQL error" in proc.stdout and "syntax error" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr
    write_attempt = subprocess.run(
        [*run, "sql", "drop table raw.runs"],
        env={**env, "PATH": ""},
        capture_output=True,
        text=True,
    )
    assert write_attempt.returncode == 2 and "read-only" in write_attempt.stdout
