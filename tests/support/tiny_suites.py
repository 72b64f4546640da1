"""A small suite file in temporary folders and the Dagster resources that run it there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def tiny_suite_resources(
    tmp_path: Path, suite: dict[str, Any], agents_dir: Path | None = None
) -> dict[str, Any]:
    """Write ``suite`` to ``<tmp_path>/suites/<id>.yaml``; the resources (bench, sandbox,
    warehouse, dbt) that run it with its data, runs and warehouse under ``tmp_path``.

    ``agents_dir``: where the agent files are (the repository's own when None).
    """
    from orchestration.resources import BenchConfig, DuckDBWarehouse, SandboxBackend, dbt_resource

    suites = tmp_path / "suites"
    suites.mkdir(exist_ok=True)
    (suites / f"{suite['id']}.yaml").write_text(yaml.safe_dump(suite))
    folders = {
        "suites_dir": str(suites),
        "data_dir": str(tmp_path / "data"),
        "runs_dir": str(tmp_path / "runs"),
    }
    if agents_dir is not None:
        folders["agents_dir"] = str(agents_dir)
    return {
        "bench": BenchConfig(**folders),
        "sandbox": SandboxBackend(),
        "warehouse": DuckDBWarehouse(path=str(tmp_path / "wh.duckdb")),
        "dbt": dbt_resource(),
    }
