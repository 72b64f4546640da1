"""Fills the disk: the sandbox's /tmp and /dev/shm until full, then the workspace with
64 MiB files written as fast as possible, forever, ignoring SIGTERM.

argv: workspace, --marker. Reports after every file that changed the report: once the
workspace is full the retries fail at once, and reporting each would flood stdout past the
log cap (cutting the last report in half).
"""

import argparse
import copy
import itertools
import os
import signal

from _report import emit

p = argparse.ArgumentParser()
p.add_argument("workspace")
p.add_argument("--marker")
a = p.parse_args()
signal.signal(signal.SIGTERM, signal.SIG_IGN)
block = b"\x02" * (8 * 1024**2)
report: dict = {"tmpfs_mib": {}, "errors": {}, "workspace_mib": 0}

for where in ("/tmp", "/dev/shm"):
    report["tmpfs_mib"][where] = 0
    try:  # 32 MiB files: the filesystem's size, not the per-file cap, must stop this
        for i in itertools.count():
            with open(os.path.join(where, f"fill-{i}.bin"), "wb", buffering=0) as f:
                for _ in range(4):
                    report["tmpfs_mib"][where] += f.write(block) / 2**20
    except OSError as exc:
        report["errors"][where] = f"{type(exc).__name__}:{exc.errno}"
    for name in os.listdir(where):  # room for the next trick
        os.unlink(os.path.join(where, name))

last: dict = {}
for i in itertools.count():
    try:
        with open(f"fill-{i}.bin", "wb", buffering=0) as f:
            for _ in range(8):
                f.write(block)
                report["workspace_mib"] += 8
    except OSError as exc:
        report["errors"]["workspace"] = f"{type(exc).__name__}:{exc.errno}"
    if report != last:
        emit(report)
        last = copy.deepcopy(report)
