"""Hand-made run records for tests of everything downstream of the runner."""

from __future__ import annotations

import datetime as dt
from typing import Any

from runner.attempts.records import RunRecord

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def make_record(
    agent: str = "a",
    task: str = "t",
    budget: int = 60,
    minute: float = 0,
    status: str = "success",
    score: float | None = 0.5,
    direction: str = "maximize",
    run_id: str | None = None,
    **extra: Any,
) -> RunRecord:
    """A valid record created ``minute`` minutes after T0; ``score`` only counts for successes."""
    success = status == "success"
    hib = None if score is None else (score if direction == "maximize" else -score)
    fields: dict[str, Any] = dict(
        run_id=run_id or f"{agent}__{task}__{budget}s__standard__a{int(minute):02d}",
        created_at=T0 + dt.timedelta(minutes=minute),
        agent_id=agent,
        agent_kind="baseline",
        harness="test",
        harness_version="1",
        task_id=task,
        metric_name="auc" if direction == "maximize" else "rmse",
        metric_direction=direction,
        budget_seconds=budget,
        instruction_profile="standard",
        attempt_index=int(minute),
        seed=int(minute),
        sandbox_backend="process",
        sandbox_isolated=False,
        sandbox_unsafe=False,
        status=status,
        score=score if success else None,
        score_hib=hib if success else None,
        task_spec_sha256="x",
        tmlbench_version="0",
    )
    fields.update(extra)
    return RunRecord(**fields)
