"""Writes 1 MiB blocks into new workspace files (10 MiB each) at ~100 MiB/s, forever."""

import itertools
import time

block = b"\x02" * 2**20
for i in itertools.count():
    with open(f"fill-{i}.bin", "wb") as f:
        for _ in range(10):
            f.write(block)
            f.flush()
            time.sleep(0.01)
