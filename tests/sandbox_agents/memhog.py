"""Touches sys.argv[1] MiB of memory, 16 MiB at a time."""

import sys

hog = [b"\x01" * (16 * 2**20) for _ in range(int(sys.argv[1]) // 16)]
print("survived", len(hog), flush=True)
