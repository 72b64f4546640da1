"""The spec files into the raw schema (warehouse/specs.py): each load replaces the rows with what
the files say now and keeps imported agents; a bad file is skipped and keeps its last valid rows."""

from __future__ import annotations

from pathlib import Path

from runner.config import REPO_ROOT, Paths
from runner.specs.registry import list_agents
from warehouse.specs import SpecReport, load_specs


def test_load_specs_replaces_specs_and_keeps_imported_agents(con, tmp_path: Path):
    paths = Paths.from_env({})
    con.execute(
        "insert into raw.agents (agent_id, kind, source, loaded_at) values "
        "('gpt-imported', 'command', 'tml-bench', now()), "
        "('baseline-gbm', 'command', 'tml-bench', now()), "
        "('old-spec-agent', 'baseline', 'spec', now())"
    )
    specs = list_agents(paths.agents_dir).specs
    report = load_specs(con, paths)
    suites = sorted(p.stem for p in paths.suites_dir.glob("*.yaml"))
    assert report == SpecReport(tasks=4, agents=len(specs), suites=len(suites), skipped=[])
    assert con.execute("select count(*) from raw.tasks").fetchone() == (4,)
    ceilings = dict(
        con.execute("select suite_id, harness_error_ceiling from raw.suites").fetchall()
    )
    assert sorted(ceilings) == suites and ceilings["demo"] == 3  # the default
    agents = dict(con.execute("select agent_id, source from raw.agents").fetchall())
    assert agents == {a.id: "spec" for a in specs} | {"gpt-imported": "tml-bench"}
    assert {"baseline-gbm", "chutes-qwen3-coder-480b", "kilo-qwen3-coder-480b"} <= set(agents)
    prices = con.execute(
        "select agent_id, price_in_per_mtok_usd, price_out_per_mtok_usd from raw.agents "
        "where price_in_per_mtok_usd is not null"
    ).fetchall()
    priced = {
        a.id: a.llm.prices if a.llm else a.gateway.prices if a.gateway else None for a in specs
    }
    assert sorted(prices) == sorted(
        (agent_id, p.input_per_mtok, p.output_per_mtok) for agent_id, p in priced.items() if p
    )
    assert ("claude-code-sonnet-4-5", 3.0, 15.0) in prices  # a CLI's prices, from its gateway
    task = con.execute(
        "select metric_name, metric_direction, spec_sha256, start_date from raw.tasks "
        "where task_id = 'playground-series-s5e10'"
    ).fetchone()
    assert task[0] and task[1] in ("maximize", "minimize") and len(task[2]) == 64
    assert load_specs(con, paths) == report  # again: same rows, no duplicate keys
    kept = con.execute("select count(*) from raw.agents").fetchone()
    assert kept == (len(specs) + 1,)  # the imported agent is kept


def test_a_bad_spec_file_is_skipped_and_keeps_what_its_last_valid_load_left(con, tmp_path):
    """Every valid spec loads whatever one file says; a file that turns invalid keeps the rows
    it had (its runs stay in the marts); a file that is gone takes its rows with it."""
    import shutil

    import yaml

    for name in ("agents", "tasks", "suites"):
        shutil.copytree(REPO_ROOT / name, tmp_path / name)
    paths = Paths(
        tasks_dir=tmp_path / "tasks",
        agents_dir=tmp_path / "agents",
        suites_dir=tmp_path / "suites",
        data_dir=tmp_path / "data",
        runs_dir=tmp_path / "runs",
    )
    first = load_specs(con, paths)
    assert first.skipped == []

    def rows(table: str) -> list[tuple]:
        dated = table != "suite_settings"
        columns = "* exclude (loaded_at)" if dated else "*"
        return con.execute(f"select {columns} from raw.{table} order by all").fetchall()

    before = {table: rows(table) for table in ("tasks", "agents", "suites", "suite_settings")}

    def edit(path: Path, **changes) -> Path:
        path.write_text(yaml.safe_dump(yaml.safe_load(path.read_text()) | changes))
        return path

    agent = edit(paths.agents_dir / "baseline-gbm.yaml", kind="wizard")
    task = edit(paths.tasks_dir / "playground-series-s6e1" / "task.yaml", task_type="ranking")
    suite = edit(paths.suites_dir / "demo.yaml", attempts=0)
    (paths.agents_dir / "baseline-linear.yaml").unlink()  # gone: its row goes
    report = load_specs(con, paths)
    assert (report.tasks, report.agents, report.suites) == (
        first.tasks - 1,
        first.agents - 2,
        first.suites - 1,
    )
    assert [(p.path, p.spec_id) for p in report.skipped] == [
        (task, "playground-series-s6e1"),
        (agent, "baseline-gbm"),
        (suite, "demo"),
    ]
    assert report.skipped[1].message.startswith(f"{agent}: invalid AgentSpec: kind")
    after = {table: rows(table) for table in before}
    assert after["tasks"] == before["tasks"] and after["suites"] == before["suites"]
    assert after["suite_settings"] == before["suite_settings"]
    assert after["agents"] == [r for r in before["agents"] if r[0] != "baseline-linear"]
