"""What the Dagster definitions need to load in these tests: a dbt manifest made now."""

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestration.resources import DBT_TARGET_ENV
from tests.support.workers import shared_session_dir
from warehouse.db import warehouse_path
from warehouse.dbt import DBT_PROJECT_DIR, run_dbt, vars_args


def _parse(target: Path) -> None:
    # `make manifest`'s parse cache, when there is one, saves most of a full parse: it was made
    # for the same warehouse var, and dbt checks it file by file.
    cache = DBT_PROJECT_DIR / "target" / "partial_parse.msgpack"
    if cache.is_file():
        shutil.copy(cache, target / cache.name)
    parse = ["parse", "--quiet", "--target-path", str(target), "--log-path", str(target)]
    parse += vars_args(warehouse_path())
    result = run_dbt(parse)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture(scope="session")
def dbt_manifest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The dbt manifest the definitions load, parsed as `make manifest` does (the YAML's
    descriptions as they are now), once per session for every xdist worker, into a temp target:
    never into the repository's dbt_project/target, which `make run`/`make ui` use and which two
    workers parsing at once would tear. $TMLBENCH_DBT_TARGET points the definitions at it (in
    this process and the servers it starts) for the rest of the session; nothing writes to it."""
    target = shared_session_dir(tmp_path_factory, "dbt-target", _parse)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(DBT_TARGET_ENV, str(target))
        yield target / "manifest.json"
