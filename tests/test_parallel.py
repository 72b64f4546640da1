"""`make test`'s pytest-xdist rules hold (tests/README.md, "Running in parallel"): small sessions
of generated tests, run on two workers as `make test` runs the suite, keep every test of an
``xdist_group`` on one worker, build a ``shared_session_dir`` once for both workers, and run the
``exclusive`` tests one after another with nothing beside them but light tests at the lowest
CPU priority.

Both failed silently once: under pytest 9.2, pytest-xdist 3.8's loadgroup stopped grouping with no
error (pytest-xdist issue 1386), and a whole suite went green with its groups ignored.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from runner.config import REPO_ROOT
from tests.support import workers
from tests.support.workers import LIGHT_NICENESS, MachineShare

# integration: a pytest session with two xdist workers in a subprocess
pytestmark = pytest.mark.integration

CONFTEST = """
import os
import time
from pathlib import Path

import pytest

from tests.support.workers import (
    pytest_collection_modifyitems,
    pytest_runtest_protocol,
    shared_session_dir,
)

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
    start, nice = time.time(), os.getpriority(os.PRIO_PROCESS, 0)
    yield
    with open(OUT / "spans", "a") as spans:  # when each test ran, inside its share of the machine
        spans.write(f"{request.node.name} {start} {time.time()} {nice}\\n")
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


ORDINARY = """
import time
import pytest

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("i", range(6))
def test_ordinary(i):
    time.sleep(0.3)
"""

LIGHT = """
import time


def test_light_first():
    time.sleep(0.6)  # on the light worker while the other waits for it to take the machine


def test_light():
    for _ in range(12):  # beside the exclusive tests, at the lowest priority
        time.sleep(0.1)
"""

ALONE = """
import time
import pytest

pytestmark = pytest.mark.exclusive


@pytest.mark.parametrize("i", range(3))
def test_alone(i):
    time.sleep(0.2)
"""


def _run_session(tmp_path: Path, modules: dict[str, str], *args: str) -> Path:
    """Run the generated modules (with CONFTEST) on two workers; the folder they wrote to."""
    session, out = tmp_path / "session", tmp_path / "out"
    session.mkdir()
    out.mkdir()
    (session / "conftest.py").write_text(CONFTEST)
    for name, text in modules.items():
        (session / name).write_text(text)
    env = {**os.environ, "PARALLEL_OUT": str(out), "PYTHONPATH": str(REPO_ROOT)}
    env.pop("PYTEST_XDIST_WORKER", None)  # this test may itself run on a worker
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2"]
    command += ["--dist", "loadgroup", "--basetemp", str(tmp_path / "basetemp"), *args]
    command.append(str(session))
    result = subprocess.run(
        command, cwd=session, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def test_groups_stay_on_one_worker_and_a_shared_folder_is_built_once(tmp_path: Path):
    modules = {"test_grouped_a.py": GROUPED, "test_loose.py": LOOSE}
    modules["test_grouped_b.py"] = GROUPED.replace("test_grouped(", "test_other(")
    out = _run_session(tmp_path, modules)

    grouped = [p for p in out.iterdir() if p.name.startswith(("test_grouped", "test_other"))]
    assert len(grouped) == 12
    assert len({p.read_text() for p in grouped}) == 1, {p.name: p.read_text() for p in grouped}
    assert len(list(out.glob("test_loose*"))) == 6
    assert len((out / "builds").read_text().splitlines()) == 1


def _spans(out: Path) -> dict[str, tuple[float, float, int]]:
    """Test name → (start, end, niceness) of each test the generated session ran."""
    lines = (out / "spans").read_text().splitlines()
    return {name: (float(a), float(b), int(nice)) for name, a, b, nice in map(str.split, lines)}


def test_exclusive_tests_run_one_after_another_with_only_light_tests_beside_them(tmp_path: Path):
    """Two modules of exclusive tests become one group on one worker, which keeps the machine
    from the first of them to the last: the other worker's ordinary tests (queued all along)
    start neither between them nor beside them. Its light tests (no heavy marker) do, at the
    lowest CPU priority, and at their own priority again once the machine is free."""
    modules = {"test_alone_a.py": ALONE, "test_ordinary.py": ORDINARY, "test_light.py": LIGHT}
    modules["test_alone_b.py"] = ALONE.replace("test_alone(", "test_also_alone(")
    out = _run_session(tmp_path, modules)

    alone = [p for p in out.iterdir() if p.name.startswith(("test_alone", "test_also_alone"))]
    assert len(alone) == 6 and len({p.read_text() for p in alone}) == 1
    spans = _spans(out)
    first = min(start for name, (start, _, _) in spans.items() if "alone" in name)
    last = max(end for name, (_, end, _) in spans.items() if "alone" in name)
    ordinary = {name: span for name, span in spans.items() if name.startswith("test_ordinary")}
    assert len(ordinary) == 6
    assert all(end <= first or start >= last for start, end, _ in ordinary.values()), spans
    # the ordinary tests had to wait: some ran after the exclusive ones (not all before them)
    assert any(start >= last for start, _, _ in ordinary.values()), (first, last, ordinary)

    # A light test that overlapped them ran at the lowest priority (as root; else none did).
    # Whether one overlaps depends on when each worker got going, which a loaded host decides:
    # that a light test does run beside, waiting and running, the in-process test below shows.
    beside = [
        nice
        for name, (start, end, nice) in spans.items()
        if name.startswith("test_light") and start < last and end > first
    ]
    if os.geteuid() == 0:  # a light test runs beside only where its priority comes back
        assert all(nice == LIGHT_NICENESS for nice in beside), spans
    else:
        assert not beside, spans
    # and after them, every test runs at the priority it had
    assert all(nice == 0 for start, _, nice in spans.values() if start >= last), spans


class _Worker:
    """What ``MachineShare.take`` reads of pytest's TempPathFactory: a worker's base temp."""

    def __init__(self, root: Path):
        self.root = root

    def getbasetemp(self) -> Path:
        return self.root / "gw0"


def _light_take(share: MachineShare, factory: Any) -> bool:
    """``take`` of a light test, which must not wait: True if it runs beside."""
    result: list[bool] = []
    taker = threading.Thread(target=lambda: result.append(share.take(factory, False, True)))
    taker.start()
    taker.join(5)
    assert result, "a light test waited for a share"
    return result[0]


def test_light_tests_run_beside_an_exclusive_test_while_it_waits_and_while_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Four workers' shares in one process (a flock is an open file's, so they contend): an
    exclusive test waits for the ordinary one running, a light test runs beside it meanwhile
    and while it runs, and an ordinary test waits until it ends."""
    assert os.geteuid() == 0, "as root only a light test runs beside (make test runs as root)"
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    factory: Any = _Worker(tmp_path)
    ordinary, exclusive, light, late = (MachineShare() for _ in range(4))

    assert ordinary.take(factory, alone=False) is False
    wants = threading.Thread(target=exclusive.take, args=(factory, True))
    wants.start()
    deadline = time.monotonic() + 10
    while not workers._is_locked(tmp_path / "alone.lock"):
        assert time.monotonic() < deadline, "the exclusive test never said it waits"
        time.sleep(0.01)
    assert _light_take(light, factory) is True  # beside, while it waits
    assert wants.is_alive()  # still waiting: for the ordinary test, never for the light one
    ordinary.release()
    wants.join(10)
    assert not wants.is_alive()

    assert _light_take(light, factory) is True  # beside, while it runs
    queued = threading.Thread(target=late.take, args=(factory, False))
    queued.start()
    queued.join(0.5)
    assert queued.is_alive()  # an ordinary test waits...
    exclusive.release()
    queued.join(10)
    assert not queued.is_alive()  # ...until the machine is free
    assert _light_take(light, factory) is False  # and then takes a share
    late.release()
    light.release()


def test_a_selection_without_exclusive_tests_spreads_the_light_ones(tmp_path: Path):
    """``-m`` deselects after the light tests are grouped: ``make test-unit`` (no exclusive
    test left) must not run on one worker."""
    modules = {"test_alone.py": ALONE, "test_loose.py": LOOSE.replace("0.05", "0.3")}
    out = _run_session(tmp_path, modules, "-m", "not exclusive")
    assert not list(out.glob("test_alone*"))
    assert len({p.read_text() for p in out.glob("test_loose*")}) == 2  # both workers ran some
