"""Ignores SIGTERM (and SIGINT, SIGHUP) in itself and a child; both keep a heartbeat.

argv: workspace, --marker. Every 20 ms each process writes time.time() to
heartbeat-<role> in the workspace; a SIGTERM is noted in sigterm-<role> and ignored.
"""

import argparse
import os
import signal
import time

from _report import emit

p = argparse.ArgumentParser()
p.add_argument("workspace")
p.add_argument("--marker")
a = p.parse_args()


def beat_forever(role: str) -> None:
    def noted(signum, _frame):
        with open(f"sigterm-{role}", "a") as f:
            f.write(f"{signum} {time.time()}\n")

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, noted)
    while True:
        with open(f".hb-{role}", "w") as f:
            f.write(repr(time.time()))
        os.replace(f".hb-{role}", f"heartbeat-{role}")
        time.sleep(0.02)


emit({"started": time.time(), "pid": os.getpid()})
if os.fork() == 0:
    beat_forever("child")
beat_forever("main")
