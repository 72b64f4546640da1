"""`make test`'s pytest-xdist rules hold (tests/README.md, "Running in parallel"): a small session
of generated tests, run on two workers as `make test` runs the suite, keeps every test of an
``xdist_group`` on one worker and builds a ``shared_session_dir`` once for both workers.

Both failed silently once: under pytest 9.2, pytest-xdist 3.8's loadgroup stopped grouping with no
error (pytest-xdist issue 1386), and a whole suite went green with its groups ignored.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from runner.config import REPO_ROOT

# integration: a pytest session with two xdist workers in a subprocess
pytestmark = pytest.mark.integration

CONFTEST = """
import os
from pathlib import Path

import pytest

from tests.support.workers import shared_session_dir

OUT = Path(os.environ["PARALLEL_OUT"])


def _build(folder):
    with open(OUT / "builds", "a") as builds:  # one line per build, whichever worker made it
        builds.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")


@pytest.fixture(scope="session")
def shared(tmp_path_factory):
    return shared_session_dir(tmp_path_factory, "shared", _build)


@pytest.fixture(autouse=True)
def where(request):
    (OUT / request.node.name).write_text(os.environ["PYTEST_XDIST_WORKER"])
"""

GROUPED = """
import time
import pytest

pytestmark = pytest.mark.xdist_group("together")


@pytest.mark.parametrize("i", range(6))
def test_grouped(i, shared):
    time.sleep(0.05)
"""

LOOSE = """
import time
import pytest


@pytest.mark.parametrize("i", range(6))
def test_loose(i, shared):
    time.sleep(0.05)
"""


def test_groups_stay_on_one_worker_and_a_shared_folder_is_built_once(tmp_path: Path):
    session, out = tmp_path / "session", tmp_path / "out"
    session.mkdir()
    out.mkdir()
    (session / "conftest.py").write_text(CONFTEST)
    (session / "test_grouped_a.py").write_text(GROUPED)
    (session / "test_grouped_b.py").write_text(GROUPED.replace("test_grouped(", "test_other("))
    (session / "test_loose.py").write_text(LOOSE)
    env = {**os.environ, "PARALLEL_OUT": str(out), "PYTHONPATH": str(REPO_ROOT)}
    env.pop("PYTEST_XDIST_WORKER", None)  # this test may itself run on a worker
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2"]
    command += ["--dist", "loadgroup", "--basetemp", str(tmp_path / "basetemp"), str(session)]
    result = subprocess.run(
        command, cwd=session, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr

    grouped = [p for p in out.iterdir() if p.name.startswith(("test_grouped", "test_other"))]
    assert len(grouped) == 12
    assert len({p.read_text() for p in grouped}) == 1, {p.name: p.read_text() for p in grouped}
    assert len(list(out.glob("test_loose*"))) == 6
    assert len((out / "builds").read_text().splitlines()) == 1
