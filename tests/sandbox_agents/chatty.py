"""Writes sys.argv[1] MiB to stdout and to stderr, then exits 0."""

import sys

chunk = b"x" * 65536 + b"\n"
for _ in range(int(sys.argv[1]) * 16):
    sys.stdout.buffer.write(chunk)
    sys.stderr.buffer.write(chunk)
print("done", flush=True)
