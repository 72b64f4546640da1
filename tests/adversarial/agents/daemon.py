"""Submits, leaves daemons behind, and exits 0 at once.

argv: workspace, --marker. Daemon a: the classic double fork + setsid, SIGTERM and SIGHUP
ignored, stdio closed. Daemon b: the same, then re-executes Python with an empty
environment (hiding from anyone who looks for the attempt's variables; the marker stays
in its argv so the test can find it). Both write time.time() to heartbeat-<name> every
20 ms for as long as they live.
"""

import argparse
import os
import signal
import sys
import time

from _report import emit, submit_sample

p = argparse.ArgumentParser()
p.add_argument("workspace")
p.add_argument("--marker")
a = p.parse_args()

BEAT = """
import os, signal, sys, time
for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
    signal.signal(sig, signal.SIG_IGN)
name, workspace = sys.argv[1], sys.argv[2]
os.chdir(workspace)
while True:
    with open(".hb-" + name, "w") as f:
        f.write(repr(time.time()))
    os.replace(".hb-" + name, "heartbeat-" + name)
    time.sleep(0.02)
"""


def daemonize(name: str, clean_env: bool) -> None:
    if os.fork():
        return
    os.setsid()
    if os.fork():
        os._exit(0)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    argv = [sys.executable, "-c", BEAT, name, a.workspace, a.marker]
    os.execve(sys.executable, argv, {} if clean_env else dict(os.environ))


submit_sample()
daemonize("a", clean_env=False)
daemonize("b", clean_env=True)
end = time.monotonic() + 5  # exit only once both daemons are up and beating
while time.monotonic() < end and not all(os.path.exists(f"heartbeat-{n}") for n in "ab"):
    time.sleep(0.01)
alive = [n for n in "ab" if os.path.exists(f"heartbeat-{n}")]
emit({"daemons_alive": alive, "parent_exits": True})
sys.exit(0)
