"""Run folders written by hand, as the runner leaves them: a record.json per run, valid or not."""

from __future__ import annotations

import json
from pathlib import Path

from runner.attempts.records import RunRecord, write_record


def write(runs_dir: Path, record: RunRecord, sub: str = "") -> Path:
    run_dir = runs_dir / sub / record.run_id
    run_dir.mkdir(parents=True)
    return write_record(run_dir, record)


def write_raw(runs_dir: Path, name: str, content: str | dict) -> Path:
    run_dir = runs_dir / name
    run_dir.mkdir(parents=True)
    path = run_dir / "record.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path
