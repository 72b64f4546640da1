"""What a fresh ``tmlbench`` process imports: the CLI's start-up discipline, checked by name.

Timing depends on the machine (benchmarks/command_latency.py measures it); the packages a
command imports do not, so tests pin those instead.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from runner.config import REPO_ROOT

# Seconds to import each: pandas and scikit-learn (task preparation, attempts), dbt and
# Dagster (the marts, orchestration), pyarrow and streamlit (the dashboard).
HEAVY = frozenset(
    {"pandas", "numpy", "sklearn", "duckdb", "dbt", "dagster", "pyarrow", "streamlit"}
)

PROBE = """
import json, sys
from runner.command_line import cli
from runner.errors import TmlbenchError
try:
    cli.main(sys.argv[1:], prog_name="tmlbench", standalone_mode=False)
except (SystemExit, TmlbenchError) as exc:
    print(exc)
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})), file=sys.stderr)
"""


def imported_by(*args: str, warehouse: Path | None = None) -> set[str]:
    """The top-level packages a fresh ``tmlbench ARGS`` process has imported when it ends
    (a TmlbenchError ends it like the real entry point, after the imports it needed)."""
    env = {"PATH": "", "TMLBENCH_WAREHOUSE": str(warehouse or "/nonexistent.duckdb")}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return set(json.loads(proc.stderr.strip().splitlines()[-1]))
