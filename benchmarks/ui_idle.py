"""What `make ui` costs while nobody uses it: the CPU of `dagster dev`, idle, with the warehouse's
automation sensor running and then stopped.

Starts `dagster dev` as ui_loop.py does (the instance settings of `make ui`, throwaway folders,
the repository's suite files), waits until the code location has loaded and the sensors have
ticked for a while, then reads the CPU time (user + system) of every process of it (those whose
DAGSTER_HOME is its throwaway home) over a window; then stops the automation sensor, as its
toggle in the UI does, and reads them again. The difference is what the automation's ticks
cost (every AUTOMATION_INTERVAL_SECONDS, orchestration/schedules.py): the price of a short UI
loop (ui_loop.py), paid as long as the UI is open.

    uv run python benchmarks/ui_idle.py               # 60 s windows
    uv run python benchmarks/ui_idle.py --window 120
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from machine import describe_machine

from orchestration.schedules import AUTOMATION_INTERVAL_SECONDS, AUTOMATION_SENSOR_NAME
from tools.dagster_ui import dagster_env, running_dagster

SETTLE = 30.0  # seconds after loading: the daemon's first ticks write the sensors' states
KINDS = [  # a part of `dagster dev`, by what its command line runs
    ("daemon", "dagster._daemon"),
    ("webserver", "dagster_webserver"),
    ("code servers", "dagster code-server"),
    ("code servers", "dagster api grpc"),
    ("dagster dev", "dagster dev"),
]


def cpu_seconds(home: Path) -> dict[int, tuple[str, float]]:
    """pid → (its part of `dagster dev`, its CPU seconds so far), for every process of it."""
    tick = os.sysconf("SC_CLK_TCK")
    marker = f"DAGSTER_HOME={home}".encode()
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if marker not in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                continue
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        kind = next((k for k, part in KINDS if part in command), "other")
        found[int(entry)] = (kind, (int(fields[11]) + int(fields[12])) / tick)
    return found


def used_over(home: Path, window: float) -> dict[str, float]:
    """CPU seconds each part of `dagster dev` used over ``window`` seconds."""
    before = cpu_seconds(home)
    time.sleep(window)
    after = cpu_seconds(home)
    used: dict[str, float] = collections.Counter()
    for pid, (kind, seconds) in after.items():
        used[kind] += seconds - before.get(pid, (kind, 0.0))[1]
    return dict(used)


def show(label: str, used: dict[str, float], window: float) -> float:
    total = sum(used.values())
    parts = ", ".join(f"{k} {v:.1f} s" for k, v in sorted(used.items(), key=lambda kv: -kv[1]))
    share = 100 * total / window
    print(f"{label}: {total:.1f} s of CPU in {window:.0f} s = {share:.0f} % of a core ({parts})")
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window", type=float, default=60.0, help="seconds per measurement")
    args = parser.parse_args()
    print(describe_machine())
    with (
        tempfile.TemporaryDirectory(prefix="tmlbench-ui-idle-") as tmp,
        running_dagster(Path(tmp), dagster_env(Path(tmp))) as ui,
    ):
        time.sleep(SETTLE)
        on = show("idle, automation on", used_over(ui.home, args.window), args.window)
        ui.stop_sensor(AUTOMATION_SENSOR_NAME)
        time.sleep(2 * AUTOMATION_INTERVAL_SECONDS)  # a tick under way ends
        off = show("idle, automation off", used_over(ui.home, args.window), args.window)
    ticks = args.window / AUTOMATION_INTERVAL_SECONDS
    print(
        f"the automation's ticks (every {AUTOMATION_INTERVAL_SECONDS} s): {on - off:.1f} s of CPU "
        f"per {args.window:.0f} s, {(on - off) / ticks:.2f} s per tick"
    )


if __name__ == "__main__":
    main()
