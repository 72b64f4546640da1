"""Writes 10 GiB to stdout, then a valid submission.

argv: workspace, --gib N (default 10), --marker. Progress goes to progress.json in the
workspace every 256 MiB; the report (bytes the harness accepted) to stderr at the end.
"""

import argparse
import json
import os
import sys

from _report import emit, submit_sample

p = argparse.ArgumentParser()
p.add_argument("workspace")
p.add_argument("--gib", type=float, default=10)
p.add_argument("--marker")
a = p.parse_args()
target = int(a.gib * 1024**3)
chunk = (b"y" * 1023 + b"\n") * 1024
written = 0
while written < target:
    written += os.write(1, chunk)
    if written % (256 * len(chunk)) == 0:
        with open("progress.json", "w") as f:
            json.dump({"stdout_bytes": written}, f)
report = {"stdout_bytes": written, "finished": True}
submit_sample()
emit(report, sys.stderr)
