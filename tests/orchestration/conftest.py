"""What the Dagster definitions need to load in these tests: a dbt manifest made now."""

from pathlib import Path

import pytest

from warehouse.db import warehouse_path
from warehouse.dbt import DBT_PROJECT_DIR, run_dbt, vars_args


@pytest.fixture(scope="session")
def dbt_manifest() -> Path:
    """The dbt manifest the definitions load, parsed once per session as `make manifest` does
    (the YAML's descriptions as they are now). Parsed for the warehouse `make manifest` would
    use: dbt's parse cache, kept beside the manifest, stays right for `make run`/`make ui`."""
    target = DBT_PROJECT_DIR / "target"
    parse = ["parse", "--quiet", "--target-path", str(target), *vars_args(warehouse_path())]
    result = run_dbt(parse)
    assert result.returncode == 0, result.stdout + result.stderr
    return target / "manifest.json"
