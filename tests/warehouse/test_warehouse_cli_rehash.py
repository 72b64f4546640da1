"""``tmlbench warehouse load --rehash`` (issue 15): every file read and hashed again."""

from __future__ import annotations

from pathlib import Path

from tests.support.run_folders import write
from tests.support.tmlbench_cli import invoke
from tools.records import make_record


def test_rehash_reads_every_file_and_finds_it_unchanged(tmp_path: Path):
    runs = tmp_path / "runs"
    for minute in range(2):
        write(runs, make_record(minute=minute))
    env = {"TMLBENCH_RUNS_DIR": str(runs), "TMLBENCH_WAREHOUSE": str(tmp_path / "wh.duckdb")}
    assert invoke(env, "warehouse", "load").exit_code == 0
    result = invoke(env, "warehouse", "load", "--rehash")
    assert result.exit_code == 0, result.output
    assert "0 new, 2 unchanged, 0 rejected" in result.output
