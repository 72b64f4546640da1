"""What `make run` shows while Dagster works: one progress bar per phase, then a short summary.

The bars are fed by a Dagster logger (``SuiteProgress.logger``) added to the runs of
``orchestration.materialize``: it sees every log record of a run, and moves a bar on

- records the benchmark assets log with ``progress_extra`` (a prepared task, a new attempt),
- asset materializations and asset check evaluations (the warehouse phase: raw load, each dbt
  model and test, the snapshot).

Everything else a run logs goes to the log file, never to the terminal.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

import dagster as dg
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

# The attribute a log record carries its progress fields in (logging's ``extra``).
PROGRESS_FIELD = "tmlbench_progress"
# Dagster events that count in a phase that counts its assets and checks.
ASSET_EVENTS = frozenset({"ASSET_MATERIALIZATION", "ASSET_CHECK_EVALUATION"})

Counts = Literal["tasks", "attempts", "assets"]


def progress_extra(**fields: Any) -> dict[str, dict[str, Any]]:
    """``extra=`` for ``context.log`` so a progress bar can follow: task=…, or the fields of
    an attempt (status, settings_done, settings_total)."""
    return {PROGRESS_FIELD: fields}


@dataclass
class Phase:
    """One run of `make run`: what it counts and how far it got."""

    title: str
    total: int
    counts: Counts
    unit: str  # what ``total`` counts, for a person: "tasks", "settings", "assets and checks"
    statuses: Counter[str] = field(default_factory=Counter)  # attempts: new ones by status
    checks_failed: int = 0
    seconds: float = 0.0
    ok: bool | None = None  # None: not finished (or not started)
    error: str = ""
    note: str = ""  # e.g. what was skipped


class SuiteProgress:
    """Rich bars for the phases of one `make run`, and the summary printed after them."""

    def __init__(self, console: Console):
        self.console = console
        self.bars = Progress(
            TextColumn("{task.description}"),
            BarColumn(bar_width=20),
            MofNCompleteColumn(),
            TextColumn("{task.fields[unit]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[detail]}"),
            console=console,
        )
        self.phases: list[Phase] = []
        self._current: tuple[Phase, TaskID] | None = None
        self._started = 0.0

    def __enter__(self) -> SuiteProgress:
        self.bars.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bars.stop()

    def begin(self, phase: Phase) -> None:
        self.phases.append(phase)
        task = self.bars.add_task(phase.title, total=phase.total, unit=phase.unit, detail="")
        self._current = (phase, task)
        self._started = time.perf_counter()

    def end(self, ok: bool, error: str = "") -> None:
        assert self._current is not None, "end() without begin()"
        phase, task = self._current
        phase.ok, phase.error = ok, error
        phase.seconds = time.perf_counter() - self._started
        if ok:  # settings done in an earlier run are not logged: the bar ends full
            self.bars.update(task, completed=phase.total)
        self.bars.update(task, detail=self._detail(phase) + ("" if ok else "  FAILED"))
        self.bars.stop_task(task)
        self._current = None

    def note(self, detail: str) -> None:
        """A word on the current phase, shown beside its bar and in the summary."""
        assert self._current is not None, "note() without begin()"
        self._current[0].note = detail

    def logger(self) -> dg.LoggerDefinition:
        """A Dagster logger that moves the bars (add it to the runs' loggers)."""
        progress = self

        class _ToBars(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                progress.handle(record)

        def init(_context: dg.InitLoggerContext) -> logging.Logger:
            logger = logging.Logger("tmlbench.progress", level=logging.DEBUG)
            logger.addHandler(_ToBars())
            return logger

        return dg.LoggerDefinition(init, description="progress bars of `make run`")

    def handle(self, record: logging.LogRecord) -> None:
        if self._current is None:
            return
        phase, task = self._current
        fields = getattr(record, PROGRESS_FIELD, None)
        if phase.counts == "tasks" and fields and "task" in fields:
            self.bars.advance(task)
        elif phase.counts == "attempts" and fields and "status" in fields:
            phase.statuses[fields["status"]] += 1
            self.bars.update(task, completed=fields["settings_done"], detail=self._detail(phase))
        elif phase.counts == "assets":
            event = (getattr(record, "dagster_meta", None) or {}).get("dagster_event")
            if event is None or event.event_type_value not in ASSET_EVENTS:
                return
            if (
                event.event_type_value == "ASSET_CHECK_EVALUATION"
                and not event.event_specific_data.passed
            ):
                phase.checks_failed += 1
            self.bars.advance(task)
            self.bars.update(task, detail=self._detail(phase))

    @staticmethod
    def _detail(phase: Phase) -> str:
        if phase.note:
            return phase.note
        if phase.counts == "attempts":
            new = sum(phase.statuses.values())
            by_status = ", ".join(f"{n} {s}" for s, n in phase.statuses.most_common())
            return f"{new} new attempts" + (f" ({by_status})" if by_status else "")
        if phase.counts == "assets" and phase.checks_failed:
            return f"{phase.checks_failed} checks failed"
        return ""

    def summary(self, log_file: str, extra_lines: list[str] | None = None) -> None:
        """A few lines: each phase's outcome and time, what to look at next, where the log is."""
        for phase in self.phases:
            outcome = "ok" if phase.ok else "FAILED"
            detail = self._detail(phase)
            self.console.print(
                f"{phase.title}: {outcome} in {phase.seconds:.0f} s, {phase.total} {phase.unit}"
                + (f"; {detail}" if detail else "")
            )
            if phase.error:
                self.console.print(f"  {phase.error}", markup=False, highlight=False)
        for line in extra_lines or []:
            self.console.print(line, markup=False, highlight=False)
        self.console.print(f"full log: {log_file}", markup=False, highlight=False)
