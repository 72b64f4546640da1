"""One bad spec file never refuses everything (issue 25): listings hold every valid spec and
name each bad file with what is wrong; a suite runs only when all it lists is valid."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from runner.config import REPO_ROOT, Paths
from runner.errors import SpecError
from runner.specs import SuiteSpec
from runner.specs.registry import list_agents, list_suites, list_tasks, load_agent, load_task
from runner.suites.benchmark_settings import suite_settings
from tests.support.tmlbench_cli import invoke

BANK = "bank-customer-churn-ict-u-ai"
S6E1 = "playground-series-s6e1"


@pytest.fixture
def specs(tmp_path: Path) -> Paths:
    """Copies of the repository's agents and tasks, and a suites folder, that a test may break."""
    shutil.copytree(REPO_ROOT / "agents", tmp_path / "agents")
    shutil.copytree(REPO_ROOT / "tasks", tmp_path / "tasks")
    (tmp_path / "suites").mkdir()
    for suite_id, agents in (("good", ["baseline-constant"]), ("bad", ["broken", "ghost"])):
        suite = {"id": suite_id, "title": suite_id, "tasks": [BANK, "nowhere"], "budgets": [30]}
        suite["agents"] = agents
        if suite_id == "good":
            suite["tasks"] = [BANK]
        (tmp_path / "suites" / f"{suite_id}.yaml").write_text(yaml.safe_dump(suite))
    return Paths(
        tasks_dir=tmp_path / "tasks",
        agents_dir=tmp_path / "agents",
        suites_dir=tmp_path / "suites",
        data_dir=tmp_path / "data",
        runs_dir=tmp_path / "runs",
    )


def break_agent(paths: Paths, agent_id: str = "broken", **changes) -> Path:
    spec = yaml.safe_load((paths.agents_dir / "baseline-constant.yaml").read_text())
    path = paths.agents_dir / f"{agent_id}.yaml"
    path.write_text(yaml.safe_dump({**spec, "id": agent_id, "limits": {"cpus": 0}, **changes}))
    return path


def break_task(paths: Paths) -> Path:
    path = paths.tasks_dir / S6E1 / "task.yaml"
    spec = yaml.safe_load(path.read_text())
    spec["metric"]["direction"] = "sideways"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_a_listing_holds_every_valid_spec_and_names_each_bad_file(specs: Paths):
    agents_before = list_agents(specs.agents_dir).ids
    broken = break_agent(specs)
    (specs.agents_dir / "not-yaml.yaml").write_text("id: [unclosed\n")
    renamed = break_agent(specs, "renamed", id="other-id", limits={"cpus": 1})
    agents = list_agents(specs.agents_dir)
    assert agents.ids == agents_before  # all the valid ones, none of the bad
    problems = {p.spec_id: p for p in agents.problems}
    assert sorted(problems) == ["broken", "not-yaml", "renamed"]
    assert problems["broken"].path == broken
    assert problems["broken"].message.startswith(f"{broken}: invalid AgentSpec: limits.cpus")
    assert "not valid YAML" in problems["not-yaml"].message
    assert problems["renamed"].message == (
        f"{renamed}: id 'other-id' does not match its file name 'renamed'"
    )

    task_file = break_task(specs)
    tasks = list_tasks(specs.tasks_dir)
    assert BANK in tasks.ids and S6E1 not in tasks.ids and len(tasks.ids) == 3
    [problem] = tasks.problems
    assert (problem.spec_id, problem.path) == (S6E1, task_file)
    assert problem.message.startswith(f"{task_file}: invalid TaskSpec: metric.direction")

    (specs.suites_dir / "typo.yaml").write_text("id: typo\ntitle: t\n")
    suites = list_suites(specs.suites_dir)
    assert suites.ids == ["bad", "good"]
    assert [p.spec_id for p in suites.problems] == ["typo"]
    assert "invalid SuiteSpec: tasks: Field required" in suites.problems[0].message


def test_an_unknown_id_is_unknown_whatever_else_is_broken(specs: Paths):
    """Before: the message listing the known agents failed on the first bad file instead."""
    break_agent(specs)
    with pytest.raises(SpecError, match=r"unknown agent 'ghost'.*known agents: .*baseline-gbm"):
        load_agent(specs.agents_dir, "ghost")
    with pytest.raises(SpecError, match=r"; 1 more file\(s\) invalid\)"):
        load_agent(specs.agents_dir, "ghost")
    break_task(specs)
    with pytest.raises(SpecError, match=rf"unknown task 'nowhere'.*known tasks: {BANK}"):
        load_task(specs.tasks_dir, "nowhere")


def test_a_suite_listing_a_bad_or_missing_spec_refuses_to_run_and_others_run(specs: Paths):
    broken = break_agent(specs)
    bad = SuiteSpec.model_validate(yaml.safe_load((specs.suites_dir / "bad.yaml").read_text()))
    with pytest.raises(SpecError) as refused:
        suite_settings(bad, specs)
    message = str(refused.value)
    assert message.startswith(f"suite 'bad' ({specs.suites_dir / 'bad.yaml'}) cannot run:\n")
    assert len(message.splitlines()) == 5  # the head, a line per problem, what to do
    # every problem at once, each naming its file and what is wrong
    assert f"agents: 'broken': {broken}: invalid AgentSpec: limits.cpus" in message
    assert f"agents: 'ghost': unknown agent 'ghost': {specs.agents_dir / 'ghost.yaml'}" in message
    assert "tasks: 'nowhere': unknown task 'nowhere'" in message
    good = SuiteSpec.model_validate(yaml.safe_load((specs.suites_dir / "good.yaml").read_text()))
    assert [s.key for s in suite_settings(good, specs)] == [f"baseline-constant|{BANK}|30"]


def list_specs(paths: Paths, *args: str):
    env = {
        "TMLBENCH_TASKS_DIR": str(paths.tasks_dir),
        "TMLBENCH_AGENTS_DIR": str(paths.agents_dir),
        "TMLBENCH_SUITES_DIR": str(paths.suites_dir),
        "TMLBENCH_DATA_DIR": str(paths.data_dir),
        "TMLBENCH_RUNS_DIR": str(paths.runs_dir),
        "COLUMNS": "300",
    }
    return invoke(env, *args)


def test_agents_list_shows_the_good_ones_and_warns_per_bad_file_then_exits_1(specs: Paths):
    assert list_specs(specs, "agents", "list").exit_code == 0
    broken = break_agent(specs)
    result = list_specs(specs, "agents", "list")
    assert result.exit_code == 1
    for agent_id in ("baseline-constant", "baseline-gbm", "baseline-linear"):  # (long ids wrap)
        assert agent_id in result.stdout
    assert "broken" not in result.stdout  # the table holds valid agents only
    lines = result.stderr.splitlines()
    assert (
        f"skipped {broken}: invalid AgentSpec: limits.cpus: Input should be greater than 0"
        in (lines[0])
    )
    assert "1 agent spec file(s) skipped, the others were used" in result.stderr


def test_tasks_list_shows_the_good_ones_and_warns_per_bad_file_then_exits_1(specs: Paths):
    task_file = break_task(specs)
    result = list_specs(specs, "tasks", "list")
    assert result.exit_code == 1
    assert BANK in result.stdout and S6E1 not in result.stdout
    assert f"skipped {task_file}: invalid TaskSpec: metric.direction" in result.stderr
    assert "1 task spec file(s) skipped" in result.stderr
