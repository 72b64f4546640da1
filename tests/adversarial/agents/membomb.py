"""A memory bomb: allocates (and touches) 16 MiB at a time until something stops it.

argv: workspace, mode, --marker. Modes: ``heap`` (Python objects) or ``tmpfs`` (files in
the sandbox's memory-backed /dev/shm, /tmp and /dev first, then the heap). A report is
printed after every step, so the last one says how far it got.
"""

import argparse
import os

from _report import emit

p = argparse.ArgumentParser()
p.add_argument("workspace")
p.add_argument("mode", choices=["heap", "tmpfs"])
p.add_argument("--marker")
a = p.parse_args()
CHUNK = 16 * 1024**2
block = b"\x01" * CHUNK
report: dict = {"mode": a.mode, "heap_mib": 0, "files_mib": {}, "errors": {}}

if a.mode == "tmpfs":
    # Many files, so the filesystem's size (not the per-file size cap) is what stops it.
    for where in ("/dev/shm", "/tmp", "/dev"):
        report["files_mib"][where] = 0
        try:
            for i in range(1000):
                with open(os.path.join(where, f"ballast-{i}.bin"), "wb", buffering=0) as f:
                    for _ in range(2):
                        f.write(block)
                        report["files_mib"][where] += 16
                        emit(report)
        except OSError as exc:
            report["errors"][where] = f"{type(exc).__name__}:{exc.errno}"
            emit(report)

hog = []
while True:
    hog.append(bytearray(block))  # a copy: every page is touched
    report["heap_mib"] += 16
    emit(report)
