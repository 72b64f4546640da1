"""Resuming a setting stopped at a fault ceiling: an append-only log beside the suite's runs.

Records are the benchmark's data and are never deleted or rewritten, so a ceiling cannot be
reset by removing its faults. Resuming appends one line to ``<runs>/<runs_subdir>/resumptions.jsonl``
naming the fault records it forgives; the ceilings count only a setting's faults that no
resumption forgave (``runner.settings``). The forgiven records stay as they are, in the
warehouse and in every mart (a harness or provider fault is shown apart either way).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import dataclass
from pathlib import Path

from runner.errors import HarnessError, TmlbenchError

RESUMPTIONS_FILE = "resumptions.jsonl"


@dataclass(frozen=True)
class Resumption:
    """One resumed setting: which, when, by what, and the fault records it forgives."""

    setting: str  # the setting key, agent|task|budget
    forgiven: tuple[str, ...]  # run ids
    resumed_at: dt.datetime
    by: str  # what resumed it: a command, a Dagster run
    suite_id: str | None = None  # the suite whose runs folder holds the log (for a reader)

    def to_json(self) -> str:
        return json.dumps(
            {
                "suite_id": self.suite_id,
                "setting": self.setting,
                "forgiven": list(self.forgiven),
                "resumed_at": self.resumed_at.isoformat(),
                "by": self.by,
            },
            sort_keys=True,
        )


def forgiven_run_ids(runs_dir: Path) -> frozenset[str]:
    """Every run id some resumption of this suite forgave (none if nothing was ever resumed)."""
    path = runs_dir / RESUMPTIONS_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return frozenset()
    except (OSError, UnicodeDecodeError) as exc:
        raise TmlbenchError(f"{path}: not readable ({exc})") from exc
    forgiven: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            run_ids = entry["forgiven"]
            if not isinstance(run_ids, list) or not all(isinstance(r, str) for r in run_ids):
                raise TypeError("'forgiven' is not a list of run ids")
        except (ValueError, KeyError, TypeError) as exc:
            raise TmlbenchError(
                f"{path}, line {number}: not a resumption ({exc}); the file is written only by "
                "resuming a setting: restore the line as it was"
            ) from exc
        forgiven.update(run_ids)
    return frozenset(forgiven)


def append_resumption(runs_dir: Path, resumption: Resumption) -> None:
    """Add one line to the log, whole or not at all (one ``write`` of an ``O_APPEND`` file)."""
    path = runs_dir / RESUMPTIONS_FILE
    line = (resumption.to_json() + "\n").encode("utf-8")
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            if os.write(fd, line) != len(line):
                raise OSError(f"short write to {path}")
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise HarnessError(f"cannot write {path}: {exc.strerror or exc}") from exc
