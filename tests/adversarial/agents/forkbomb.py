"""A fork bomb: every process forks as fast as it can until --seconds have passed, then
sleeps forever ignoring SIGTERM. The first process then reports and exits with code 3.

argv: workspace, --seconds S, --marker.
"""

import argparse
import os
import signal
import time

from _report import emit

p = argparse.ArgumentParser()
p.add_argument("workspace")
p.add_argument("--seconds", type=float, default=2.0)
p.add_argument("--marker")
a = p.parse_args()
signal.signal(signal.SIGTERM, signal.SIG_IGN)
stop = time.time() + a.seconds
root = os.getpid()
forks = refused = 0
errors: set[str] = set()
while time.time() < stop:
    try:
        pid = os.fork()
    except OSError as exc:
        refused += 1
        errors.add(f"{type(exc).__name__}:{exc.errno}")
        time.sleep(0.001)
        continue
    if pid:
        forks += 1
if os.getpid() != root:
    while True:  # the children linger: the harness must clean them up
        time.sleep(1)
emit({"forks": forks, "refused": refused, "errors": sorted(errors)})
os._exit(3)
