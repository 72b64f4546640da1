"""Malformed inputs are refused up front with one message naming the file and the problem.

Broken suite, agent or task YAML → ``tmlbench bench`` exits 2 before anything is prepared or
run; public files that no longer match their manifest → the task is refused before any sandbox
starts; a corrupted ``record.json`` → the loader rejects it and loads the rest.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from runner.attempts.attempt import AttemptContext, AttemptPlan, run_attempt
from runner.attempts.records import RECORD_FILE, load_records, write_record
from runner.config import REPO_ROOT
from runner.errors import TmlbenchError
from runner.sandbox import get_sandbox
from runner.specs.registry import load_agent, load_task, task_spec_sha256
from runner.tasks.preparation import prepare_twin
from runner.tasks.prepared_files import verify_public
from tests.support.tmlbench_cli import tmlbench
from tools.records import make_record
from warehouse.loader import load_runs

BANK = "bank-customer-churn-ict-u-ai"
SUITE = {
    "id": "tiny",
    "title": "tiny suite",
    "tasks": [BANK],
    "agents": ["baseline-constant"],
    "budgets": [30],
    "attempts": 1,
    "twin_rows": 300,
    "data_subdir": "tiny",
    "runs_subdir": "tiny",
}


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Path]:
    """Private copies of the specs (so they can be broken) and empty data/runs folders."""
    dirs = {name: tmp_path / name for name in ("suites", "agents", "tasks", "data", "runs")}
    dirs["suites"].mkdir()
    shutil.copytree(REPO_ROOT / "agents", dirs["agents"])
    shutil.copytree(REPO_ROOT / "tasks", dirs["tasks"])
    (dirs["suites"] / "tiny.yaml").write_text(yaml.safe_dump(SUITE))
    return dirs


def env_of(world: dict[str, Path]) -> dict[str, str]:
    return {
        **os.environ,
        **{f"TMLBENCH_{name.upper()}_DIR": str(path) for name, path in world.items()},
        "COLUMNS": "300",
    }


def edit_yaml(path: Path, change) -> None:
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data))


def broken_suite(world):
    path = world["suites"] / "tiny.yaml"
    edit_yaml(path, lambda d: d.update(attempts=0))
    return path, "attempts"


def broken_suite_syntax(world):
    path = world["suites"] / "tiny.yaml"
    path.write_text(path.read_text() + "budgets: [30\n")
    return path, "not valid YAML"


def broken_agent(world):
    path = world["agents"] / "baseline-constant.yaml"
    edit_yaml(path, lambda d: d.setdefault("limits", {}).update(cpus=0))
    return path, "limits.cpus"


def broken_task(world):
    path = world["tasks"] / BANK / "task.yaml"
    edit_yaml(path, lambda d: d["metric"].update(direction="sideways"))
    return path, "metric.direction"


def broken_task_field_missing(world):
    path = world["tasks"] / BANK / "task.yaml"
    edit_yaml(path, lambda d: d.pop("target_column"))
    return path, "target_column"


def broken_task_submission_path(world):
    path = world["tasks"] / BANK / "task.yaml"
    edit_yaml(path, lambda d: d["submission"].update(file="out/submission.csv"))
    return path, "submission.file"


# integration: each broken spec through the real `tmlbench` command in a subprocess
@pytest.mark.integration
@pytest.mark.parametrize(
    "breaker",
    [
        broken_suite,
        broken_suite_syntax,
        broken_agent,
        broken_task,
        broken_task_field_missing,
        broken_task_submission_path,
    ],
)
def test_a_broken_spec_is_one_clear_error_before_anything_runs(world, breaker):
    path, field = breaker(world)
    result = tmlbench(env_of(world), "bench", "--suite", "tiny")
    assert result.returncode == 2, result.stdout + result.stderr
    output = " ".join((result.stdout + result.stderr).split())  # rich may wrap long lines
    assert "Traceback" not in output
    assert output.count("error:") == 1
    assert str(path) in output and field in output, output
    assert not world["runs"].exists() or not any(world["runs"].rglob("*"))
    assert not world["data"].exists() or not any(world["data"].rglob("*"))


@pytest.mark.sandbox
def test_a_truncated_public_file_is_made_anew_by_the_bench_before_any_attempt(world):
    """Prepared data is derived: the bench's prepare step makes a twin whose files no longer
    match its manifest again (byte for byte what it was), so every attempt runs on the data its
    manifest names. A run that meets such a file without preparing is refused
    (tests/runner/suites/test_preflight.py)."""
    env = env_of(world)
    first = tmlbench(env, "bench", "--suite", "tiny")
    assert first.returncode == 0, first.stdout + first.stderr
    runs = world["runs"] / "tiny"
    assert len(list(runs.iterdir())) == 1

    train = world["data"] / "tiny" / "tasks" / BANK / "public" / "train.csv"
    whole = train.read_bytes()
    train.write_bytes(whole[:-100])  # truncated
    edit_yaml(world["suites"] / "tiny.yaml", lambda d: d.update(attempts=3))
    again = tmlbench(env, "bench", "--suite", "tiny")
    assert again.returncode == 0, again.stdout + again.stderr
    assert train.read_bytes() == whole
    records = load_records(runs)
    assert len(records) == 3 and len({r.public_manifest_sha256 for r in records}) == 1


@pytest.mark.sandbox
def test_a_changed_public_file_is_refused_by_the_attempt(paths):
    task = load_task(paths.tasks_dir, BANK)
    prepared = prepare_twin(task, paths.tasks_dir, paths.data_dir, rows=300)
    verify_public(prepared)  # intact: passes
    train = prepared.public / "train.csv"
    data = bytearray(train.read_bytes())
    data[len(data) // 2] ^= 0x01  # one flipped bit, same size
    train.write_bytes(bytes(data))
    agent = load_agent(paths.agents_dir, "baseline-constant")
    ctx = AttemptContext(
        prepared=prepared,
        runs_dir=paths.runs_dir,
        sandbox=get_sandbox("bwrap"),
        agent_code_dir=None,
        task_spec_sha256=task_spec_sha256(paths.tasks_dir, BANK),
    )
    with pytest.raises(TmlbenchError) as caught:
        run_attempt(AttemptPlan(agent, task, 30, 0), ctx)
    message = str(caught.value)
    assert str(train) in message and "sha256" in message and "does not match" in message
    assert not paths.runs_dir.exists()  # refused before a run folder, let alone a sandbox


def test_a_missing_public_file_or_manifest_entry_is_named(paths):
    task = load_task(paths.tasks_dir, BANK)
    prepared = prepare_twin(task, paths.tasks_dir, paths.data_dir, rows=300)
    (prepared.public / "test.csv").unlink()
    manifest = json.loads(prepared.manifest_path.read_text())
    del manifest["files"]["description.md"]
    prepared.manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(TmlbenchError) as caught:
        verify_public(prepared)
    message = str(caught.value)
    assert f"{prepared.public / 'test.csv'}: missing" in message
    assert f"{prepared.public / 'description.md'}: not listed" in message


def test_a_corrupted_record_is_rejected_and_the_others_load(con, tmp_path):
    runs = tmp_path / "runs"
    paths = []
    for minute in range(3):
        record = make_record(minute=minute)
        (runs / record.run_id).mkdir(parents=True)
        paths.append(write_record(runs / record.run_id, record))
    truncated, flipped = paths[0], paths[1]
    truncated.write_bytes(truncated.read_bytes()[:-40])
    flipped.write_bytes(
        flipped.read_bytes().replace(b'"status": "success"', b'"status": "sUccess"')
    )
    report = load_runs(con, runs)
    assert report.new == 1
    rejected = dict(report.rejected)
    assert set(rejected) == {str(truncated.resolve()), str(flipped.resolve())}
    assert "json" in rejected[str(truncated.resolve())].lower()
    assert "status" in rejected[str(flipped.resolve())]
    loaded = con.execute("select run_id from raw.runs").fetchall()
    assert loaded == [(paths[2].parent.name,)]
    assert paths[2].name == RECORD_FILE
