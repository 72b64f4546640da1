"""What the pytest-xdist workers of one test session share (`make test` runs pytest with
``-n 4``, tests/README.md): a folder built once for the whole session, and the machine, which a
test marked ``exclusive`` has to itself.

Both live in the session's root temp folder: under xdist, the folder every worker's own
``tmp_path_factory.getbasetemp()`` sits in (``.../pytest-N/popen-gw0``); without xdist, the
session's own base temp. Never ``getbasetemp().parent`` alone: without xdist that is
``pytest-of-<user>``, shared by every session, so a folder built there would outlive its session.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from filelock import FileLock

# Written by a build that finished; a folder without it is a build that died half-way.
BUILT = ".built"


def under_xdist() -> bool:
    """True in an xdist worker (xdist sets this variable in each worker process)."""
    return "PYTEST_XDIST_WORKER" in os.environ


def session_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The temp folder every worker of this session sees, and no other session."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if under_xdist() else base


def shared_session_dir(
    tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], object]
) -> Path:
    """``<session root>/<name>``, made by ``build(folder)`` once per test session, whichever
    worker asks first; the others wait for it and reuse it. For session fixtures that are
    expensive (a dbt build, a parse): with ``-n 4`` a plain session fixture is built once per
    worker.

    ``build`` fills the empty folder it is given (what it returns is ignored); the folder is published only when ``build``
    returns, so no worker ever sees half a build (if it raises, the next worker to ask builds
    again, and most likely fails the same way, with its own error). What it returns is shared:
    the tests that use it read it and never write to it (copy what you must change).
    """
    root = session_root(tmp_path_factory)
    folder = root / name
    with FileLock(root / f"{name}.lock"):
        if not (folder / BUILT).is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            build(folder)
            (folder / BUILT).touch()
    return folder


@contextlib.contextmanager
def machine_share(tmp_path_factory: pytest.TempPathFactory, alone: bool) -> Iterator[None]:
    """Held around every test under xdist: shared by ordinary tests, whole for a test that must
    run alone (``alone``), which waits until the tests running on other workers end and keeps
    new ones from starting until it ends.

    A reader–writer lock of two ``flock`` files: the machine (shared or exclusive) and a
    turnstile every test passes on its way in, holding it until it has its share. A test that
    wants the machine alone waits for it inside the turnstile, so the other workers cannot keep
    the machine busy forever by starting test after test: their next tests queue behind it.
    Each worker holds at most one test's share at a time. Session fixtures are set up inside the
    hold (in their first test's setup), so ``shared_session_dir``'s lock is only ever taken by a
    worker that holds its share already: a worker waiting here holds no such lock, and none that
    another worker waits for (no deadlock).
    """
    if not under_xdist():  # one process: every test already runs alone
        yield
        return
    root = session_root(tmp_path_factory)
    with open(root / "machine.lock", "a") as machine, open(root / "turnstile.lock", "a") as gate:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(machine, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(machine, fcntl.LOCK_UN)
