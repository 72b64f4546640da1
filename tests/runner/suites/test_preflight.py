"""Faults every attempt of a setting would hit alike (``runner.suites.preflight``): each refuses the run
before any attempt starts, writes no record, and says in one line per fault what to do.

No attempt runs here: the sandboxes are made (they check the machine) but never started.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from runner.attempts.records import load_records, write_record
from runner.config import REPO_ROOT, Paths
from runner.sandbox import get_sandbox
from runner.specs import SuiteSpec
from runner.suites.bench import Bench
from runner.suites.preflight import CliRemedies, RunRefused, task_faults
from runner.suites.scheduling import host_cpus
from runner.tasks.prepared_files import prepared_task
from tools.records import make_record

BANK = "bank-customer-churn-ict-u-ai"
S6E1 = "playground-series-s6e1"
KILO = "kilo-glm-4.7"


def suite(**fields) -> SuiteSpec:
    base = {
        "id": "pf", "title": "preflight", "tasks": [BANK], "agents": ["baseline-constant"],
        "budgets": [30], "attempts": 1, "twin_rows": 300, "data_subdir": "pf", "runs_subdir": "pf",
    }  # fmt: skip
    return SuiteSpec.model_validate({**base, **fields})


def refused(bench: Bench) -> RunRefused:
    """The run's refusal; and the proof that it recorded nothing."""
    with pytest.raises(RunRefused) as caught:
        bench.run()
    runs = bench.layout.runs_dir
    assert not runs.exists() or load_records(runs) == [], "a refused run records no attempt"
    assert not runs.exists() or not any(p.is_dir() for p in runs.iterdir()), "no run folder"
    return caught.value


def fault_lines(exc: RunRefused) -> list[str]:
    header, *lines = str(exc).splitlines()
    assert header.startswith("suite pf: ") and "no attempt was started" in header
    return lines


def test_an_unprepared_task_is_one_line_for_all_its_settings(paths: Paths):
    spec = suite(
        tasks=[BANK, S6E1], agents=["baseline-constant", "baseline-linear"], budgets=[30, 60]
    )
    bench = Bench(spec, paths, get_sandbox("process"))
    bench.prepare([BANK])  # S6E1 stays unprepared
    exc = refused(bench)
    (line,) = fault_lines(exc)  # one fault, however many settings it stops
    root = prepared_task(bench.layout.data_dir, S6E1).root
    assert line == (
        f"- task {S6E1} is not prepared ({root}) (4 settings): "
        f"run `tmlbench tasks prepare --suite pf {S6E1}`"
    )
    assert sorted(exc.settings) == sorted(s.key for s in bench.settings if s.task.id == S6E1)
    assert len(str(exc)) < 400  # short: not one sentence per attempt


def test_prepared_data_that_does_not_match_its_manifest_is_made_again_by_the_fix(paths: Paths):
    bench = Bench(suite(), paths, get_sandbox("process"))
    data = bench.prepare()[BANK]
    train = data.public / "train.csv"
    train.write_bytes(train.read_bytes()[:-10])
    (line,) = fault_lines(refused(bench))
    assert line.startswith(f"- task {BANK}'s prepared data does not match its manifest: {train}")
    assert line.endswith(f"run `tmlbench tasks prepare --suite pf {BANK}`")

    (faults,) = [task_faults(BANK, data)]
    assert [f.kind for f in faults] == ["task_data_mismatch"]
    bench.prepare()  # what the fix does (the CLI's command, Dagster's prepared_tasks): made again
    assert task_faults(BANK, data) == []

    (data.private / "meta.json").write_text("{not json")  # every record reads its trivial score
    (fault,) = task_faults(BANK, data)
    assert fault.kind == "task_data_mismatch" and "meta.json: not readable" in fault.problem


def test_a_missing_cli_and_key_are_named_once_per_agent(paths: Paths, tmp_path: Path, monkeypatch):
    monkeypatch.delenv("CHUTES_API_KEY", raising=False)
    empty = replace(paths, clis_dir=tmp_path / "no-clis")
    bench = Bench(suite(agents=[KILO], budgets=[30, 60]), empty, get_sandbox("bwrap"))
    bench.prepare()
    lines = fault_lines(refused(bench))
    assert lines == [
        f"- agent {KILO} needs the environment variable CHUTES_API_KEY (its provider's API key), "
        "which is not set (2 settings): export it before running",
        f"- agent {KILO}'s CLI (npm @kilocode/cli 7.7.7) is not installed (2 settings): "
        f"run `tmlbench agents install {KILO}`",
    ]


def test_an_untrusted_agent_on_a_backend_that_does_not_isolate(paths: Paths, monkeypatch):
    monkeypatch.setenv("CHUTES_API_KEY", "k")
    bench = Bench(suite(agents=[KILO]), paths, get_sandbox("process"))
    bench.prepare()
    (line,) = fault_lines(refused(bench))
    assert "the process backend does not isolate it" in line
    assert line.endswith(
        "use `--backend bwrap`, or pass `--unsafe-no-isolation` to accept the risk"
    )
    unsafe = Bench(suite(agents=[KILO]), paths, get_sandbox("process"), allow_unsafe=True)
    unsafe.preflight(unsafe.settings)  # accepted: nothing to refuse


def test_a_cli_the_docker_image_cannot_run(paths: Paths, monkeypatch):
    monkeypatch.setenv("CHUTES_API_KEY", "k")
    bench = Bench(suite(agents=[KILO]), paths, get_sandbox("docker"))  # its CLI is installed
    bench.prepare()
    (line,) = fault_lines(refused(bench))
    assert "CLI needs Node.js, which the docker sandbox's image does not carry" in line
    assert line.endswith("run it with `--backend bwrap`")


def test_more_cpus_than_the_machine_has_and_a_missing_code_folder(paths: Paths, tmp_path: Path):
    too_wide = suite(cpus_per_attempt=len(host_cpus()) + 1)
    bench = Bench(too_wide, paths, get_sandbox("process"))
    bench.prepare()
    (line,) = fault_lines(refused(bench))
    assert f"wants {len(host_cpus()) + 1} CPUs per attempt" in line
    assert line.endswith("fix the spec file named")

    agents = tmp_path / "agents"
    agents.mkdir()
    spec = yaml.safe_load((REPO_ROOT / "agents" / "baseline-constant.yaml").read_text())
    (agents / "baseline-constant.yaml").write_text(yaml.safe_dump({**spec, "code_dir": "gone"}))
    bench = Bench(suite(), replace(paths, agents_dir=agents), get_sandbox("process"))
    (line,) = fault_lines(refused(bench))
    assert "code_dir 'gone' is not a folder" in line


def test_only_settings_that_want_attempts_are_checked(paths: Paths):
    """A finished setting never blocks the run, even with its data gone."""
    bench = Bench(suite(budgets=[30, 60]), paths, get_sandbox("process"))
    done, _ = bench.settings
    record = make_record("baseline-constant", BANK, 30, run_id=done.plan(0).run_id, suite_id="pf")
    (bench.layout.runs_dir / record.run_id).mkdir(parents=True)
    write_record(bench.layout.runs_dir / record.run_id, record)
    bench.preflight([done])  # finished: not checked, so not refused
    with pytest.raises(RunRefused) as caught:
        bench.preflight(bench.settings)
    assert caught.value.settings == [f"baseline-constant|{BANK}|60"]


def test_every_fault_kind_has_a_remedy():
    from typing import get_args

    from runner.suites.preflight import Fault, FaultKind

    remedies = CliRemedies("demo")
    fixes = {kind: remedies.fix(Fault(kind, "x", "p")) for kind in get_args(FaultKind)}
    assert all(fixes.values()), fixes  # a kind without a remedy would say nothing to do


def test_a_backend_that_cannot_run_anything_here(paths: Paths, monkeypatch):
    docker = get_sandbox("docker")  # the engine and image are there
    bench = Bench(suite(budgets=[30, 60]), paths, docker)
    bench.prepare()
    monkeypatch.setattr("runner.sandbox.docker.os.geteuid", lambda: 1000)  # a harness not root
    (line,) = fault_lines(refused(bench))
    assert "the docker backend hands the workspace to the sandbox user" in line
    assert "(2 settings)" in line and line.endswith("fix that, or choose another `--backend`")
