"""warehouse/dbt.py: the folders Dagster's dbt commands write their artifacts to."""

from __future__ import annotations

import os
import time
from pathlib import Path

from warehouse.dbt import IN_USE_SECONDS, KEPT_STEPS, step_target


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
