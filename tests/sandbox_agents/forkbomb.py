"""Forks as fast as it can forever; every child does the same."""

import os
import time

while True:
    try:
        os.fork()
    except OSError:
        time.sleep(0.01)
