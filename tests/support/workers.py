"""What the pytest-xdist workers of one test session share (`make test` runs pytest with
``-n 4``, tests/README.md): a folder built once for the whole session, and the machine, which a
test marked ``exclusive`` has to itself. The two pytest hooks at the end share it out;
tests/conftest.py imports them (a conftest's hooks are those of its module).

Both live in the session's root temp folder: under xdist, the folder every worker's own
``tmp_path_factory.getbasetemp()`` sits in (``.../pytest-N/popen-gw0``); without xdist, the
session's own base temp. Never ``getbasetemp().parent`` alone: without xdist that is
``pytest-of-<user>``, shared by every session, so a folder built there would outlive its session.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

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


EXCLUSIVE_GROUP = "exclusive"


class MachineShare:
    """This worker's share of the machine: shared by ordinary tests, whole for a test that must
    run alone, which waits until the tests running on other workers end and keeps new ones from
    starting until it ends.

    A reader–writer lock of two ``flock`` files in the session's root: the machine (shared or
    exclusive) and a turnstile every test passes on its way in, holding it until it has its
    share. A test that wants the machine alone waits for it inside the turnstile, so the other
    workers cannot keep the machine busy forever by starting test after test: their next tests
    queue behind it. Session fixtures are set up inside the hold (in their first test's setup),
    so ``shared_session_dir``'s lock is only ever taken by a worker that holds its share
    already: a worker waiting here holds no such lock, and none that another worker waits for
    (no deadlock).

    Each worker holds at most one share at a time. An exclusive share may be kept from one test
    to the next when both must run alone (``release(keep_alone=True)``): the exclusive tests are
    one xdist group, run one after another on one worker, and the other workers then drain once
    for all of them rather than once each (tests/README.md, "Running in parallel").
    """

    def __init__(self) -> None:
        self._machine: IO[str] | None = None
        self._alone = False

    def take(self, tmp_path_factory: pytest.TempPathFactory, alone: bool) -> None:
        if not under_xdist():  # one process: every test already runs alone
            return
        if self._machine is not None:
            if alone and self._alone:  # kept from the exclusive test before
                return
            self.release()
        root = session_root(tmp_path_factory)
        machine = open(root / "machine.lock", "a")  # noqa: SIM115 (held across hook calls)
        with open(root / "turnstile.lock", "a") as gate:
            fcntl.flock(gate, fcntl.LOCK_EX)
            try:
                fcntl.flock(machine, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
            except BaseException:
                machine.close()
                raise
            finally:
                fcntl.flock(gate, fcntl.LOCK_UN)
        self._machine, self._alone = machine, alone

    def release(self, keep_alone: bool = False) -> None:
        """Give the share back; an exclusive one stays held when ``keep_alone``."""
        if self._machine is None or (keep_alone and self._alone):
            return
        self._machine.close()  # closing the file releases its flock
        self._machine, self._alone = None, False


MACHINE = MachineShare()


def _alone(item: pytest.Item | None) -> bool:
    return item is not None and item.get_closest_marker("exclusive") is not None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every ``exclusive`` test joins one xdist group, so they run one after another on one
    worker and the others drain once for all of them (before xdist reads the groups)."""
    for item in items:
        if _alone(item):
            item.add_marker(pytest.mark.xdist_group(EXCLUSIVE_GROUP))


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Each test holds a share of the machine from its setup to its teardown; one marked
    ``exclusive`` holds all of it, and keeps it for the next when that one is exclusive too
    (``MachineShare``). Outermost of the hook's wrappers (tryfirst), so the wait for a
    share is not counted in pytest-timeout's limit of the test."""
    # pytest's own TempPathFactory (config._tmp_path_factory, what the tmp_path_factory
    # fixture returns): a hook has no fixtures.
    MACHINE.take(item.config._tmp_path_factory, _alone(item))  # type: ignore[attr-defined]
    try:
        yield
    finally:
        MACHINE.release(keep_alone=_alone(nextitem))
