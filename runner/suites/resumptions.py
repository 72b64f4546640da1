"""Resuming a setting stopped at a fault ceiling: an append-only log beside the suite's runs.

Records are the benchmark's data and are never deleted or rewritten, so a ceiling cannot be
reset by removing its faults. Resuming appends one line to ``<runs>/<runs_subdir>/resumptions.jsonl``
naming the fault records it forgives; the ceilings count only a setting's faults that no
resumption forgave (``runner.suites.benchmark_settings``). The forgiven records stay as they are, in the
warehouse and in every mart (a harness or provider fault is shown apart either way).
"""

from __future__ import annotations

import datetime as dt
import errno
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from runner.errors import HarnessError, TmlbenchError

RESUMPTIONS_FILE = "resumptions.jsonl"
# A line is a few hundred bytes (a setting's faults, at most its ceilings' worth): a log this
# large is not one. The log lives in a folder users copy around, so it is read as hostile input:
# bounded, a regular file, never through a symbolic link (the warehouse reads it the same way).
RESUMPTIONS_MAX_BYTES = 16 * 2**20
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


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
    text = _read_log(path)
    if text is None:
        return frozenset()
    forgiven: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            forgiven.update(parse_resumption(line).forgiven)
        except ValueError as exc:
            raise TmlbenchError(
                f"{path}, line {number}: not a resumption ({exc}); the file is written only by "
                "resuming a setting: restore the line as it was"
            ) from exc
    return frozenset(forgiven)


def _read_log(path: Path) -> str | None:
    """The log's text (None if there is none), read as ``RESUMPTIONS_MAX_BYTES`` allows."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        why = "is a symbolic link" if exc.errno == errno.ELOOP else exc.strerror or str(exc)
        raise TmlbenchError(f"{path}: not readable ({why})") from exc
    try:
        with os.fdopen(fd, "rb") as log:
            if not stat.S_ISREG(os.fstat(log.fileno()).st_mode):
                raise TmlbenchError(f"{path}: not a regular file")
            data = log.read(RESUMPTIONS_MAX_BYTES + 1)
        if len(data) > RESUMPTIONS_MAX_BYTES:
            raise TmlbenchError(
                f"{path}: more than {RESUMPTIONS_MAX_BYTES:,} bytes is too large for a "
                "resumption log"
            )
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TmlbenchError(f"{path}: not readable ({exc})") from exc


def parse_resumption(line: str) -> Resumption:
    """One line of the log, as ``Resumption.to_json`` wrote it; ValueError (saying what is wrong)
    for anything else. The runner and the warehouse (``warehouse.resumptions``) both read the log
    through this, so the marts forgive exactly the faults the runner's ceilings do."""
    try:
        entry = json.loads(line)
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(entry, dict):
        raise ValueError("not a JSON object")
    run_ids = entry.get("forgiven")
    if not isinstance(run_ids, list) or not all(isinstance(r, str) for r in run_ids):
        raise ValueError("'forgiven' is not a list of run ids")
    for name in ("setting", "resumed_at", "by"):
        if not isinstance(entry.get(name), str):
            raise ValueError(f"{name!r} is not a string")
    suite_id = entry.get("suite_id")
    if suite_id is not None and not isinstance(suite_id, str):
        raise ValueError("'suite_id' is not a string")
    try:
        resumed_at = dt.datetime.fromisoformat(entry["resumed_at"])
    except ValueError:
        raise ValueError(f"'resumed_at' is not a time: {entry['resumed_at']!r}") from None
    if resumed_at.tzinfo is None:
        raise ValueError(f"'resumed_at' has no time zone: {entry['resumed_at']!r}")
    return Resumption(entry["setting"], tuple(run_ids), resumed_at, entry["by"], suite_id)


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
