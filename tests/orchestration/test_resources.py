"""orchestration/resources.py: the dbt resource starts the dbt command and nothing before it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from packaging import version

# runs the dbt CLI (its --version: the cheapest command that goes through the resource's cli())
pytestmark = pytest.mark.integration


def test_a_dbt_command_runs_no_dbt_version_and_makes_no_adapter_first(
    monkeypatch: pytest.MonkeyPatch, dbt_manifest: Path, tmp_path: Path
) -> None:
    """dagster-dbt's resource would run `dbt --version` and load dbt's macros in-process (3 s of
    CPU) before every command; ours knows the version and needs no adapter."""
    import dagster_dbt.core.resource as upstream
    from dagster_dbt import DbtCliResource

    from orchestration.resources import dbt_resource

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"dagster-dbt's start-up ran: {args}")

    monkeypatch.setattr(upstream, "check_output", refuse)
    monkeypatch.setattr(DbtCliResource, "_initialize_dbt_core_adapter", refuse)
    resource = dbt_resource()
    invocation = resource.cli(["--version"], manifest=dbt_manifest, target_path=tmp_path)
    assert invocation.is_successful()
    assert invocation.adapter is None
    # the version it takes for granted is the one the CLI reports
    reported = subprocess.run(
        [resource.dbt_executable, "--version"], capture_output=True, text=True, check=True
    ).stdout
    installed = re.search(r"installed:\s*(\d+\.\d+\.\d+)", reported)
    assert installed is not None, reported
    assert resource._cli_version == version.parse(installed.group(1))
