"""raw.resumptions: each suite's resumption log, loaded with the runs, read as the runner reads it."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner.errors import TmlbenchError
from runner.suites.resumptions import (
    RESUMPTIONS_FILE,
    RESUMPTIONS_MAX_BYTES,
    Resumption,
    append_resumption,
    forgiven_run_ids,
    parse_resumption,
)
from tests.support.run_folders import write
from tools.dbt_in_process import run_in_process
from tools.records import make_record as rec
from warehouse.db import apply_ddl, connect
from warehouse.loader import content_version, load_runs

NOW = dt.datetime(2026, 12, 5, 12, 0, tzinfo=dt.UTC)


def resume(folder: Path, *run_ids: str, setting: str = "a|t|60") -> None:
    append_resumption(folder, Resumption(setting, run_ids, NOW, "tmlbench resume", "s"))


def forgiven(con: duckdb.DuckDBPyConnection) -> set[tuple[str, str]]:
    return set(con.execute("select run_space, run_id from raw.resumptions").fetchall())


def test_a_log_loads_one_row_per_forgiven_run_and_loading_again_changes_nothing(con, tmp_path):
    runs = tmp_path / "runs"
    write(runs, rec(minute=1, status="harness_error"), sub="suite-a")
    resume(runs / "suite-a", "h1", "h2", "h1")  # a run named twice is forgiven once
    resume(runs, "x1", setting="b|t|600")  # the runs root is a suite's folder too ('.')
    first = load_runs(con, runs)
    assert first.rejected == [] and first.new == 1
    assert forgiven(con) == {("suite-a", "h1"), ("suite-a", "h2"), (".", "x1")}
    row = con.execute(
        "select suite_id, setting, resumed_at, resumed_by, line_number, source_path "
        "from raw.resumptions where run_id = 'x1'"
    ).fetchone()
    assert row == (
        "s",
        "b|t|600",
        NOW,
        "tmlbench resume",
        1,
        str(runs.resolve() / RESUMPTIONS_FILE),
    )
    version = content_version(con, "raw.resumptions")
    loaded_at = con.execute("select max(loaded_at) from raw.resumptions").fetchone()
    assert load_runs(con, runs).rejected == []
    assert content_version(con, "raw.resumptions") == version
    # an unchanged log is not written again
    assert con.execute("select max(loaded_at) from raw.resumptions").fetchone() == loaded_at
    resume(runs / "suite-a", "h3")
    load_runs(con, runs)
    assert ("suite-a", "h3") in forgiven(con) and len(forgiven(con)) == 4


def test_a_malformed_line_is_refused_by_file_and_line_and_the_others_load(con, tmp_path):
    runs = tmp_path / "runs"
    write(runs, rec(minute=1), sub="s")
    resume(runs / "s", "h1")
    log = runs / "s" / RESUMPTIONS_FILE
    with log.open("a") as f:
        f.write('{"forgiven": "h9"}\n\nnot json\n')
    resume(runs / "s", "h2")
    report = load_runs(con, runs)
    assert report.new == 1  # the runs still load
    messages = [why for _, why in report.rejected]
    assert len(messages) == 2
    assert messages[0].startswith(f"{log.resolve()}, line 2: not a resumption")
    assert messages[1].startswith(f"{log.resolve()}, line 4: not a resumption (not JSON")
    assert forgiven(con) == {("s", "h1"), ("s", "h2")}
    # the runner refuses the same log (it would not run the suite), naming the same line
    with pytest.raises(TmlbenchError, match="line 2: not a resumption"):
        forgiven_run_ids(runs / "s")


def test_a_log_that_cannot_be_read_is_refused_and_keeps_its_rows(con, tmp_path):
    runs = tmp_path / "runs"
    (runs / "s").mkdir(parents=True)
    resume(runs / "s", "h1")
    load_runs(con, runs)
    log = runs / "s" / RESUMPTIONS_FILE
    log.unlink()
    resume(tmp_path, "not-mine")  # a log outside the runs folder, linked into it
    os.symlink(tmp_path / RESUMPTIONS_FILE, log)
    report = load_runs(con, runs)
    assert [why for _, why in report.rejected] == [
        f"{runs.resolve() / 's' / RESUMPTIONS_FILE}: is a symbolic link; links are never followed"
    ]
    assert forgiven(con) == {("s", "h1")}  # as the last readable log left it
    with pytest.raises(TmlbenchError, match="symbolic link"):
        forgiven_run_ids(runs / "s")  # the runner does not follow it either
    log.unlink()
    with log.open("wb") as f:  # sparse: large without writing it
        f.truncate(RESUMPTIONS_MAX_BYTES + 1)
    (why,) = [why for _, why in load_runs(con, runs).rejected]
    assert "too large for a resumption log" in why
    assert forgiven(con) == {("s", "h1")}
    with pytest.raises(TmlbenchError, match="too large"):
        forgiven_run_ids(runs / "s")


def test_a_log_gone_is_gone_from_the_table_and_a_setting_load_touches_its_folder_only(
    con, tmp_path
):
    runs = tmp_path / "runs"
    for sub in ("a", "b"):
        write(runs, rec(minute=1, run_id=f"{sub}__t__60s__0"), sub=sub)
        resume(runs / sub, f"{sub}-h1")
    load_runs(con, runs)
    assert forgiven(con) == {("a", "a-h1"), ("b", "b-h1")}
    (runs / "a" / RESUMPTIONS_FILE).unlink()
    (runs / "b" / RESUMPTIONS_FILE).unlink()
    resume(runs / "b", "b-h2")
    # a load of setting a's folders: a's log is gone (the runner would forgive nothing), b's
    # folder was not searched, so b's rows are as they were
    load_runs(con, runs, prefixes=["a/a__"])
    assert forgiven(con) == {("b", "b-h1")}
    load_runs(con, runs)  # a full load sees b's log as it is now
    assert forgiven(con) == {("b", "b-h2")}


_VALID = st.builds(
    lambda ids, setting: Resumption(setting, tuple(ids), NOW, "dagster run 1", "s").to_json(),
    st.lists(st.text("abc_-0123456789", min_size=1, max_size=8), max_size=4),
    st.sampled_from(["a|t|60", "b|u|600"]),
)
# hostile lines: arbitrary text, JSON of other shapes, a resumption with a field of another type
_HOSTILE = st.one_of(
    st.text(st.characters(categories=["L", "N", "P", "S", "Zs"]), max_size=40),
    st.builds(
        json.dumps, st.dictionaries(st.sampled_from(["forgiven", "setting", "by"]), st.integers())
    ),
    _VALID.map(lambda line: line.replace('"by": "dagster run 1"', '"by": 7')),
)


# 40 generated logs of up to 8 lines, valid and hostile mixed
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=st.lists(st.one_of(_VALID, _HOSTILE), max_size=8))
def test_any_log_loads_its_valid_lines_and_refuses_the_others_by_line(tmp_path, lines):
    runs = tmp_path / f"runs-{os.urandom(4).hex()}"
    folder = runs / "s"
    folder.mkdir(parents=True)
    text = "".join(f"{line}\n" for line in lines)
    (folder / RESUMPTIONS_FILE).write_text(text, encoding="utf-8")
    with connect(runs / "wh.duckdb") as con:
        apply_ddl(con)
        report = load_runs(con, runs)
        loaded = {run_id for _, run_id in forgiven(con)}
    refused_lines = {why.split(", line ")[1].split(":")[0] for _, why in report.rejected}
    try:
        runner_forgives = forgiven_run_ids(folder)
    except TmlbenchError as exc:
        assert report.rejected, "the runner refused a log the warehouse accepted"
        assert f", line {min(int(n) for n in refused_lines)}:" in str(exc)
    else:
        assert report.rejected == []
        assert loaded == runner_forgives  # the marts forgive what the runner forgives
    assert loaded == {run_id for line in lines for run_id in _forgives(line) or ()}
    assert len(report.rejected) == sum(
        1 for line in lines if line.strip() and _forgives(line) is None
    )


def _forgives(line: str) -> tuple[str, ...] | None:
    try:
        return parse_resumption(line).forgiven
    except ValueError:
        return None


# integration: a real dbt build of the marts
@pytest.mark.integration
def test_the_marts_stop_a_setting_exactly_when_the_runner_does(tmp_path):
    """Through the real log, loader and dbt: setting 60 s resumed after its 3 harness faults
    (not stopped), setting 600 s resumed and then faulted 3 times more (stopped again); the
    marts' ceiling says what the runner's ceiling count says, setting by setting."""
    from runner.attempts.records import load_records
    from runner.suites.benchmark_settings import ceiling_count
    from tools.dbt_warehouse import declare_suite, read_mart
    from warehouse.marts import UNIT_TESTS, build_marts

    runs = tmp_path / "runs"
    folder = runs / "s"
    for budget in (60, 600):
        for i in range(3):
            write(
                runs,
                rec(budget=budget, minute=i, status="harness_error", run_id=f"{budget}-{i}"),
                sub="s",
            )
        resume(folder, *(f"{budget}-{i}" for i in range(3)), setting=f"a|t|{budget}")
    for i in range(3, 6):  # new faults after the resumption
        write(runs, rec(budget=600, minute=i, status="harness_error", run_id=f"600-{i}"), sub="s")
    path = tmp_path / "warehouse.duckdb"
    with connect(path) as con:
        assert load_runs(con, runs).rejected == []
        declare_suite(con, "s", "s")  # harness_error_ceiling 3
    build_marts(
        path,
        select="+setting_success_rates",
        artifacts_dir=tmp_path / "dbt",
        exclude=UNIT_TESTS,
        run=run_in_process,
    )
    rates = read_mart(path, "setting_success_rates").set_index("budget_seconds")
    forgiven_ids = forgiven_run_ids(folder)
    for budget in (60, 600):
        records = [r for r in load_records(folder) if r.budget_seconds == budget]
        runner_stops = ceiling_count(records, "harness_error", forgiven_ids) >= 3
        assert rates.loc[budget, "harness_error_ceiling_reached"] == runner_stops
        assert rates.loc[budget, "n_harness_error"] == len(records)
    assert rates["harness_error_ceiling_reached"].to_dict() == {60: False, 600: True}
