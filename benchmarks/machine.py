"""One line describing the machine a benchmark ran on, for the result tables of benchmarks/README.md."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def describe_machine() -> str:
    model = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3
    return (
        f"{model}, {os.cpu_count()} cores ({usable} usable), {memory_gib:.0f} GiB, "
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}"
    )
