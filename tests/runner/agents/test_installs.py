"""Pinned agent CLIs: found where ``tmlbench agents install`` puts them, version reported, runnable."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from runner.agents.drivers import preflight
from runner.agents.installs import MANIFEST, find_installed, install, install_dir
from runner.errors import TmlbenchError
from runner.specs import AgentSpec
from tests.support.attempts import attempt

TASK = "bank-customer-churn-ict-u-ai"

FAKE_CLI = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "fakecli 9.8.7 (test build)"; exit 0; fi
# Behaves like an agent: proves where it runs from and leaves a submission.
echo "which: $(command -v fakecli)"
echo "config: $(cat "$HOME/.fakecli/config.toml")"
echo "env: $FAKECLI_MODEL"
cp sample_submission.csv submission.csv
"""


def fake_cli(tmp_path: Path) -> Path:
    root = tmp_path / "fakecli"
    (root / "bin").mkdir(parents=True)
    exe = root / "bin" / "fakecli"
    exe.write_text(FAKE_CLI)
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return root


def agent_with(cli: dict) -> AgentSpec:
    return AgentSpec.model_validate(
        {
            "id": "fake-cli",
            "kind": "command",
            "title": "a CLI from a folder",
            "harness": "fakecli",
            "harness_version": "unpinned",
            "model": {"model_id": "m-1"},
            "cli": cli,
            "env": {"FAKECLI_MODEL": "{model}"},
            "files": {".fakecli/config.toml": 'model = "{model}"\n[table]\nx = {y = 1}\n'},
            "command": ["fakecli", "{prompt}"],
        }
    )


def test_a_path_cli_reports_its_version_and_runs_in_the_sandbox_from_its_read_only_mount(
    small_paths, tmp_path: Path
):
    agent = agent_with({"path": str(fake_cli(tmp_path)), "version": "9.8.7", "bin": "fakecli"})
    installed = install(agent)
    assert installed.reported_version == "fakecli 9.8.7 (test build)"
    assert installed.runtime == "native"  # a shell script needs nothing but /bin/sh
    record = attempt(small_paths, agent, TASK)
    assert record.status == "success", record.error_message
    assert record.harness_version == "fakecli 9.8.7 (test build)"
    stdout = (small_paths.runs_dir / record.run_id / "stdout.log").read_text()
    assert "which: /opt/tmlbench/cli/bin/fakecli" in stdout
    assert 'config: model = "m-1"' in stdout and "x = {y = 1}" in stdout
    assert "env: m-1" in stdout


def test_an_installed_cli_is_found_by_its_manifest_and_a_missing_one_is_not(tmp_path: Path):
    agent = agent_with({"npm": "@example/agent", "version": "1.2.3", "bin": "agent"})
    assert find_installed(agent.cli, tmp_path) is None
    root = install_dir(agent.cli, tmp_path)
    assert root == tmp_path / "npm" / "@example+agent" / "1.2.3"
    root.mkdir(parents=True)
    info = {"bin_dir": "node_modules/.bin", "reported_version": "agent 1.2.3", "runtime": "node"}
    (root / MANIFEST).write_text(json.dumps(info))
    found = find_installed(agent.cli, tmp_path)
    assert found is not None and found.reported_version == "agent 1.2.3"
    assert found.executable == root / "node_modules/.bin/agent"


def test_docker_refuses_a_cli_that_needs_a_runtime_its_image_lacks(tmp_path: Path):
    agent = agent_with({"npm": "@example/agent", "version": "1.2.3", "bin": "agent"})
    root = install_dir(agent.cli, tmp_path)
    root.mkdir(parents=True)
    info = {"bin_dir": "node_modules/.bin", "reported_version": "agent 1.2.3", "runtime": "node"}
    (root / MANIFEST).write_text(json.dumps(info))
    docker = type("Docker", (), {"name": "docker"})()
    with pytest.raises(TmlbenchError, match=r"needs Node\.js.*--backend bwrap"):
        preflight(agent, docker, tmp_path)
    assert preflight(agent, type("B", (), {"name": "bwrap"})(), tmp_path) is not None


def test_a_path_cli_without_its_executable_is_a_clear_error(tmp_path: Path):
    agent = agent_with({"path": str(tmp_path), "version": "1", "bin": "fakecli"})
    with pytest.raises(TmlbenchError, match="no executable 'fakecli'"):
        install(agent)
