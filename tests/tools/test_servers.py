"""tools.servers.stop ends a server's whole process group and says what outlived it."""

from __future__ import annotations

import subprocess
import sys

from tools.servers import group_members, stop

# A leader that ignores SIGTERM, with a child that has exited but is never reaped (a zombie)
# and one that sleeps: SIGTERM is not enough, and the zombie must not count as alive.
GROUP = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
if os.fork() == 0:
    os._exit(0)
sleeper = subprocess.Popen(["sleep", "300"])
print(sleeper.pid, flush=True)
time.sleep(300)
"""


def test_stop_kills_a_group_that_ignores_sigterm_and_zombies_do_not_count() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", GROUP], stdout=subprocess.PIPE, start_new_session=True
    )
    assert proc.stdout is not None
    sleeper = int(proc.stdout.readline())
    members = group_members(proc.pid)
    assert set(members) == {proc.pid, sleeper}, members  # the zombie child is not listed
    assert members[sleeper].endswith("sleep")

    stop(proc, grace=0.2)

    assert proc.returncode == -9
    assert group_members(proc.pid) == {}
