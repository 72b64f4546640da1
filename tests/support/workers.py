"""What the pytest-xdist workers of one test session share (`make test` runs pytest with
``-n 4``, tests/README.md): a folder built once for the whole session, and the machine, which a
test marked ``exclusive`` has to itself but for light tests at the lowest CPU priority. The two
pytest hooks at the end share it out; tests/conftest.py imports them (a conftest's hooks are
those of its module).

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
LIGHT_GROUP = "light"
# What `make test-unit` leaves out (pyproject.toml's markers): a test marked none of these starts
# no sandbox, server, subprocess or dbt build, so it can share the cores with an exclusive one.
HEAVY_MARKERS = ("sandbox", "integration", "slow", "exclusive")
# The lowest CPU priority: on a core a nice-0 thread wants too it gets ~1.5 % of the time (CFS
# weights 15 and 1024); a core nobody else wants is all its own.
LIGHT_NICENESS = 19


class MachineShare:
    """This worker's share of the machine: shared by ordinary tests, whole for a test that must
    run alone, which waits until the tests running on other workers end and keeps new ones from
    starting until it ends, except light tests at the lowest CPU priority.

    A reader–writer lock of ``flock`` files in the session's root: the machine (shared or
    exclusive) and a turnstile every test passes on its way in. A test that wants the machine
    alone waits for it inside the turnstile, so the other workers cannot keep the machine busy
    forever by starting test after test: their next tests queue behind it. A test that wants a
    share while an exclusive one has the machine leaves the turnstile and waits outside.

    A light test takes no share at all while an exclusive test has the machine or waits for it
    (it says so in a third file, ``alone.lock``, before it queues): it runs beside, at
    ``LIGHT_NICENESS`` (``take`` says so; the hook lowers and restores the priority), so the
    cores the exclusive test leaves idle, and those the others leave while they drain, do its
    work. Session fixtures are set up inside the hold (in their first test's setup), or by a
    light test beside, which waits for nothing the exclusive test holds; so
    ``shared_session_dir``'s lock is never taken by a worker that waits here (no deadlock).

    Each worker holds at most one share at a time. An exclusive share may be kept from one test
    to the next when both must run alone (``release(keep_alone=True)``): the exclusive tests are
    one xdist group, run one after another on one worker, and the other workers then drain once
    for all of them rather than once each (tests/README.md, "Running in parallel").
    """

    def __init__(self) -> None:
        self._held: list[IO[str]] = []  # the machine's lock file; an exclusive share's wish too
        self._alone = False

    def take(
        self, tmp_path_factory: pytest.TempPathFactory, alone: bool, light: bool = False
    ) -> bool:
        """Hold this test's share; True if it is light and runs beside an exclusive test
        instead, holding none (only where its priority can be restored: as root)."""
        if not under_xdist():  # one process: every test already runs alone
            return False
        if self._held:
            if alone and self._alone:  # kept from the exclusive test before
                return False
            self.release()
        root = session_root(tmp_path_factory)
        beside = light and os.geteuid() == 0
        if beside and _is_locked(root / "alone.lock"):
            return True
        held: list[IO[str]] = []
        try:
            if alone:  # first, so that light tests stop taking shares it would wait for
                held.append(_open_lock(root / "alone.lock"))
                fcntl.flock(held[-1], fcntl.LOCK_EX)
            machine = _open_lock(root / "machine.lock")
            held.append(machine)
            with open(root / "turnstile.lock", "a") as gate:
                fcntl.flock(gate, fcntl.LOCK_EX)
                try:
                    shared = alone or _try_flock(machine, fcntl.LOCK_SH)
                    if alone:  # the other workers drain; the turnstile keeps new tests out
                        fcntl.flock(machine, fcntl.LOCK_EX)
                finally:
                    fcntl.flock(gate, fcntl.LOCK_UN)
            if not shared and beside:  # the exclusive test came after the look above
                _close(held)
                return True
            if not shared:  # an exclusive test has the machine
                fcntl.flock(machine, fcntl.LOCK_SH)
        except BaseException:
            _close(held)
            raise
        self._held, self._alone = held, alone
        return False

    def release(self, keep_alone: bool = False) -> None:
        """Give the share back; an exclusive one stays held when ``keep_alone``."""
        if not self._held or (keep_alone and self._alone):
            return
        _close(self._held)  # closing a file releases its flock
        self._held, self._alone = [], False


def _open_lock(path: Path) -> IO[str]:
    return open(path, "a")  # held across hook calls, closed by release()


def _close(files: list[IO[str]]) -> None:
    for file in reversed(files):
        file.close()


def _try_flock(file: IO[str], operation: int) -> bool:
    try:
        fcntl.flock(file, operation | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _is_locked(path: Path) -> bool:
    """Whether a worker holds ``path``'s flock exclusively."""
    with open(path, "a") as file:
        return not _try_flock(file, fcntl.LOCK_SH)


MACHINE = MachineShare()


@contextlib.contextmanager
def lowest_priority() -> Iterator[None]:
    """Every thread of this process (and what they start meanwhile) at ``LIGHT_NICENESS``, then
    back: on Linux a niceness is a thread's, and a new thread or process inherits its maker's."""

    def renice(value: int) -> None:
        for tid in os.listdir("/proc/self/task"):
            with contextlib.suppress(ProcessLookupError):  # a thread that has just ended
                os.setpriority(os.PRIO_PROCESS, int(tid), value)

    before = os.getpriority(os.PRIO_PROCESS, 0)
    renice(LIGHT_NICENESS)
    try:
        yield
    finally:
        renice(before)  # raising a priority needs root, which take() asked for


def _alone(item: pytest.Item | None) -> bool:
    return item is not None and item.get_closest_marker("exclusive") is not None


def _light(item: pytest.Item) -> bool:
    """Marked none of ``HEAVY_MARKERS``, in no xdist group but the light tests' own."""
    group = item.get_closest_marker("xdist_group")
    if group is not None and group.args != (LIGHT_GROUP,):
        return False
    return not any(item.get_closest_marker(name) for name in HEAVY_MARKERS)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every ``exclusive`` test joins one xdist group, so they run one after another on one
    worker and the others drain once for all of them; with them, the light tests join one group
    too, one of the first work units xdist hands out (it starts the largest groups first), so
    a worker has light tests to run beside the exclusive ones (before xdist reads the groups).

    Not in a session that selects with ``-m`` or ``-k``: they deselect after this hook, and
    when they drop every exclusive test (``make test-unit``) a light group would only put the
    whole session on one worker."""
    alone = [item for item in items if _alone(item)]
    selecting = config.getoption("markexpr") or config.getoption("keyword")
    light = [item for item in items if _light(item)] if alone and not selecting else []
    for group, members in ((EXCLUSIVE_GROUP, alone), (LIGHT_GROUP, light)):
        for item in members:
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Each test holds a share of the machine from its setup to its teardown; one marked
    ``exclusive`` holds all of it, and keeps it for the next when that one is exclusive too,
    and a light test may run beside it at the lowest priority (``MachineShare``). Outermost of
    the hook's wrappers (tryfirst), so the wait for a share is not counted in pytest-timeout's
    limit of the test."""
    # pytest's own TempPathFactory (config._tmp_path_factory, what the tmp_path_factory
    # fixture returns): a hook has no fixtures.
    factory = item.config._tmp_path_factory  # type: ignore[attr-defined]
    beside = MACHINE.take(factory, _alone(item), _light(item))
    try:
        with lowest_priority() if beside else contextlib.nullcontext():
            yield
    finally:
        MACHINE.release(keep_alone=_alone(nextitem))
