"""One line describing the machine a benchmark ran on, for the result tables of benchmarks/README.md."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def describe_machine() -> str:
    cpu = _cpu()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3
    return (
        f"{cpu}, {os.cpu_count()} cores ({usable} usable), {memory_gib:.0f} GiB, "
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}"
    )


def _cpu() -> str:
    """The CPU's name, with its family and model numbers: a virtual machine's name may be only
    "Intel(R) Xeon(R) Processor", and hosts of one name have run the suite 30 % apart
    (benchmarks/README.md, "Machines"); the numbers tell them apart."""
    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            name, _, value = line.partition(":")
            if not name.strip():
                break  # the first processor's block ends here
            fields.setdefault(name.strip(), value.strip())
    except OSError:
        pass
    name = fields.get("model name") or platform.processor() or "unknown CPU"
    if "cpu family" in fields and "model" in fields:
        name += f" (family {fields['cpu family']}, model {fields['model']})"
    return name
