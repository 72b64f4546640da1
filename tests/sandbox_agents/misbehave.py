"""Ignores SIGTERM, double-forks a setsid() grandchild that ignores SIGTERM, sleeps forever.

Each process appends "<role> <pid>" to ./pids.txt (pids as seen inside the sandbox).
"""

import os
import signal
import time


def note(role: str) -> None:
    with open("pids.txt", "a") as f:
        f.write(f"{role} {os.getpid()}\n")


signal.signal(signal.SIGTERM, signal.SIG_IGN)
note("main")
if os.fork() == 0:
    if os.fork() == 0:
        os.setsid()
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        note("grandchild")
        while True:
            time.sleep(3600)
    os._exit(0)
if os.fork() == 0:
    note("child")
    while True:
        time.sleep(3600)
print("spawned", flush=True)
while True:
    time.sleep(3600)
