"""The code location loads however it is started, with no virtualenv activated.

`.venv/bin/dg check defs` with a PATH that lacks `.venv/bin` must load the definitions: the dbt
resource runs the dbt CLI beside the interpreter, never whichever `dbt` PATH finds (or none).
tests/test_suites_in_ui.py starts `.venv/bin/dagster dev` the same way.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from runner.config import REPO_ROOT

BIN = Path(sys.executable).parent


def test_dbt_resource_uses_the_dbt_beside_the_interpreter():
    from orchestration.resources import dbt_resource

    assert dbt_resource().dbt_executable == str(BIN / "dbt")


# `dg check defs` reads the repository's dbt_project/target/manifest.json: not while a
# `tmlbench warehouse build` rewrites it (tests/README.md)
@pytest.mark.slow
@pytest.mark.xdist_group("dbt_project_target")
def test_dg_check_defs_without_the_venv_on_path(tmp_path: Path):
    assert (REPO_ROOT / "dbt_project" / "target" / "manifest.json").is_file(), "make manifest"
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": os.environ.get("HOME", str(tmp_path)),
        "LANG": "C.UTF-8",
        "DAGSTER_HOME": str(tmp_path),
    }
    result = subprocess.run(
        [str(BIN / "dg"), "check", "defs"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "All definitions loaded successfully" in output
    assert "not found on PATH" not in output
