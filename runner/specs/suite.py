"""A suite spec (``suites/<id>.yaml``): which settings one benchmark run covers."""

from __future__ import annotations

from pathlib import PurePosixPath

from pydantic import Field, ValidationInfo, field_validator, model_validator

from runner.specs.base import Frozen
from runner.tasks.instructions import unknown_profile

# The benchmark's default pairing of budget and instruction profile. Profile and budget are
# separate settings (both recorded on every run), so a suite can pair them any other way.
DEFAULT_PROFILES_BY_BUDGET = {240: "quick", 600: "good", 1200: "xgboost"}


class SuiteSpec(Frozen):
    """Which settings a benchmark run covers: agents × tasks × budgets, each attempted N times.

    A setting (agent, task, budget) is done once it has ``attempts`` successes, or once the
    agent has used ``max_attempts`` attempts (harness faults never count against the agent).
    Harness faults are re-run, so a fault that keeps coming back would re-run a setting forever:
    once a setting has ``harness_error_ceiling`` harness_error attempts it gets no more. Provider
    faults (``provider_error``: the model provider failed the attempt) are re-run the same way,
    under ``provider_error_ceiling``.
    """

    id: str
    title: str
    tasks: tuple[str, ...] = Field(min_length=1)
    agents: tuple[str, ...] = Field(min_length=1)
    budgets: tuple[int, ...] = Field(min_length=1, description="seconds of wall clock per attempt")
    attempts: int = Field(default=5, gt=0, description="successes wanted per setting")
    max_attempts: int | None = Field(
        default=None,
        gt=0,
        description="agent attempts per setting before giving up; None = 2 × attempts",
    )
    harness_error_ceiling: int = Field(
        default=3,
        description="harness_error attempts a setting may have before it gets no more attempts "
        "(they do not use up max_attempts, so without a ceiling a recurring fault re-runs forever); "
        "counted since the setting's last resumption (`tmlbench resume`), never by editing this",
    )
    provider_error_ceiling: int = Field(
        default=3,
        description="provider_error attempts a setting may have before it gets no more attempts "
        "(they are re-run like harness faults and do not use up max_attempts); counted since the "
        "setting's last resumption (`tmlbench resume`)",
    )
    instruction_profile: str = Field(
        default="standard",
        description="profile of every budget not named in instruction_profiles",
    )
    instruction_profiles: dict[int, str] | None = Field(
        default=None,
        description="budget (seconds) → instruction profile; None = the default pairing "
        "(240 s quick, 600 s good, 1200 s xgboost)",
    )
    twin_rows: int | None = Field(
        default=None,
        gt=0,
        description="rows of each offline twin; None = the task's full size",
    )
    data_subdir: str = Field(
        default=".",
        description="prepared data lives in <data_dir>/<data_subdir>/tasks/<task_id>",
    )
    runs_subdir: str = Field(
        default=".", description="records live in <runs_dir>/<runs_subdir>/<run_id>"
    )
    concurrency: int | None = Field(
        default=None,
        gt=0,
        description="attempts at once; None = as many as the host's cores allow",
    )
    cpus_per_attempt: int | None = Field(
        default=None,
        gt=0,
        description="CPU cores pinned to each attempt; None = each agent's own limits.cpus",
    )

    @field_validator("harness_error_ceiling", "provider_error_ceiling", mode="before")
    @classmethod
    def _whole_ceiling(cls, value: object, info: ValidationInfo) -> object:
        # before pydantic's coercion: true, 2.5 or "3" in a suite file is a mistake, not a number
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            status = str(info.field_name).removesuffix("_ceiling")
            raise ValueError(
                "must be a whole number of at least 1 (a setting gets no more attempts once it "
                f"has this many {status} attempts), got {value!r}"
            )
        return value

    @field_validator("data_subdir", "runs_subdir")
    @classmethod
    def _folder_below_root(cls, value: str) -> str:
        # One spelling per folder ("./demo/" is "demo"): raw.runs.run_space is compared with it.
        folder = PurePosixPath(value)
        if folder.is_absolute() or ".." in folder.parts or "\\" in value:
            raise ValueError(
                f"must be a folder below the data/runs root, written with '/', got {value!r}"
            )
        return folder.as_posix()

    @model_validator(mode="after")
    def _consistent_suite(self) -> SuiteSpec:
        for name in ("tasks", "agents", "budgets"):
            values = getattr(self, name)
            dupes = sorted({v for v in values if values.count(v) > 1})
            if dupes:
                raise ValueError(f"{name} lists {dupes} more than once")
        if any(b <= 0 for b in self.budgets):
            raise ValueError(f"budgets must be positive seconds, got {list(self.budgets)}")
        if self.max_attempts is not None and self.max_attempts < self.attempts:
            raise ValueError(
                f"max_attempts ({self.max_attempts}) must be at least attempts ({self.attempts})"
            )
        stray = sorted(set(self.instruction_profiles or {}) - set(self.budgets))
        if stray:
            raise ValueError(
                f"instruction_profiles names budgets {stray} that are not in budgets {list(self.budgets)}"
            )
        for profile in sorted({self.instruction_profile, *self.profiles_by_budget().values()}):
            problem = unknown_profile(profile)
            if problem:
                raise ValueError(problem)
        return self

    @property
    def attempt_ceiling(self) -> int:
        """Agent attempts a setting may use before it is given up (``max_attempts`` or 2 × attempts)."""
        return self.max_attempts or 2 * self.attempts

    def profiles_by_budget(self) -> dict[int, str]:
        if self.instruction_profiles is None:
            return dict(DEFAULT_PROFILES_BY_BUDGET)
        return self.instruction_profiles

    def profile_for(self, budget_seconds: int) -> str:
        """The instruction profile of a budget (recorded on every run next to the budget)."""
        return self.profiles_by_budget().get(budget_seconds, self.instruction_profile)
