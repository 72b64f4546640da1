"""warehouse/dbt.py: the folders dbt commands write their artifacts to, and what they were parsed for."""

from __future__ import annotations

import os
import time
from pathlib import Path

from warehouse.dbt import IN_USE_SECONDS, KEPT_STEPS, WAREHOUSE_STAMP, stamp_target, step_target


def test_step_targets_keep_the_newest_and_those_in_use(tmp_path: Path) -> None:
    steps = tmp_path / "steps"
    now = time.time()
    ages = {f"old{i:02d}": IN_USE_SECONDS + 60 * (i + 1) for i in range(KEPT_STEPS + 5)}
    ages |= {f"busy{i}": 60.0 * (i + 1) for i in range(KEPT_STEPS + 2)}  # being written
    for name, age in ages.items():
        (steps / name).mkdir(parents=True)
        (steps / name / "dbt.log").write_text("x")
        os.utime(steps / name, (now - age, now - age))
    (steps / "a-file").write_text("not a folder")  # left as it is

    first = step_target("0123456789abcdef", steps)
    second = step_target("0123456789abcdef", steps)

    assert first != second and first.name.startswith("01234567-")
    assert not first.exists()  # dbt makes it
    left = {p.name for p in steps.iterdir()}
    # every folder in use stays, however many; old ones only while fewer than KEPT_STEPS are newer
    assert {name for name in ages if name.startswith("busy")} <= left
    assert not {name for name in ages if name.startswith("old")} & left
    assert "a-file" in left


def test_step_targets_keep_the_newest_old_ones_when_few_are_in_use(tmp_path: Path) -> None:
    steps = tmp_path / "steps"
    now = time.time()
    for i in range(KEPT_STEPS + 3):
        folder = steps / f"old{i:02d}"
        folder.mkdir(parents=True)
        age = IN_USE_SECONDS + 60 * (i + 1)  # old00 is the newest
        os.utime(folder, (now - age, now - age))

    step_target("run", steps)

    left = sorted(p.name for p in steps.iterdir())
    assert left == [f"old{i:02d}" for i in range(KEPT_STEPS - 1)]  # and the new one: KEPT_STEPS
    assert step_target("run", tmp_path / "none").parent == tmp_path / "none"


def test_a_target_stamp_names_the_warehouse_and_is_left_alone_when_it_already_does(
    tmp_path: Path,
) -> None:
    target, stamp = tmp_path / "target", tmp_path / "target" / WAREHOUSE_STAMP
    first, second = tmp_path / "a.duckdb", tmp_path / "b.duckdb"

    stamp_target(target, first)  # the folder is made
    assert stamp.read_text() == f"{first.resolve()}\n"
    os.utime(stamp, (1.0, 1.0))
    stamp_target(target, first)
    assert stamp.stat().st_mtime == 1.0  # make would see no change, and parse nothing again
    stamp_target(target, second)
    assert stamp.read_text() == f"{second.resolve()}\n" and stamp.stat().st_mtime > 1.0
