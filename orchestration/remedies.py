"""What to do about a refused agent run or a stopped setting, said in the Dagster UI's terms.

The runner finds the faults (``runner.suites.preflight``) and words their fixes as ``tmlbench``
commands; a run launched from Dagster names the asset to materialize or the launch config to
set instead, where there is one. A tmlbench error an asset meets fails its step with the
error's own words (``failures_named``).
"""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import dagster as dg
from pydantic import Field

from orchestration.partitions import settings_partition_key
from orchestration.suites import SuiteFile
from runner.errors import TmlbenchError
from runner.suites import Fault, RunRefused, Setting, parse_setting_key


class AgentRunsConfig(dg.Config):
    """The launch config of a suite's ``agent_runs`` (Materialize ▾ → Open launchpad)."""

    resume_stopped: bool = Field(
        default=False,
        description="Resume the selected settings that are stopped at their harness-error or "
        "provider-error ceiling, once the fault is fixed: the faults recorded so far stop "
        "counting toward the ceilings, so each gets a full ceiling again. No record is changed "
        "or deleted (the resumption is logged in <runs>/<runs_subdir>/resumptions.jsonl). "
        "Settings that are not stopped run as usual.",
    )


@dataclass(frozen=True)
class DagsterRemedies:
    """``runner.suites.preflight.Remedies`` for a run of one suite file's assets."""

    suite_file: SuiteFile

    def fix(self, fault: Fault) -> str:
        prepared = self.suite_file.prepared_tasks_key.to_user_string()
        match fault.kind:
            case "task_not_prepared":
                return (
                    f"materialize {prepared} partition {fault.subject} first "
                    "(or select both assets)"
                )
            case "task_data_mismatch":
                return (
                    f"materialize {prepared} partition {fault.subject} again (it re-makes the data)"
                )
            case "cli_missing":
                return f"run `tmlbench agents install {fault.subject}` where the code location runs"
            case "api_key_missing":
                return "set it in the code location's environment"
            case "backend_unfit":
                return "set the `sandbox` resource's backend to bwrap"
            case "not_isolated":
                return (
                    "set the `sandbox` resource's backend to bwrap, or its allow_unsafe to true "
                    "to accept the risk"
                )
            case "too_many_cpus" | "agent_spec":
                return "fix the spec file named"
            case "sandbox_unavailable":
                return "fix that, or set the `sandbox` resource's backend to another"

    def resume(self, setting: Setting) -> str:
        partition = settings_partition_key(
            setting.agent.id, setting.task.id, setting.budget_seconds
        )
        return (
            f"materialize {self.suite_file.agent_runs_key.to_user_string()} partition "
            f"{partition} with the launch config `resume_stopped: true` (Materialize ▾ → Open "
            f"launchpad; or `tmlbench resume --suite {self.suite_file.stem} '{setting.key}'`)"
        )

    def setting_name(self, key: str) -> str:
        """The setting's ``agent_runs`` partition, as the UI lists it."""
        return f"partition {settings_partition_key(*parse_setting_key(key))}"


@contextmanager
def failures_named() -> Iterator[None]:
    """A tmlbench error (a broken spec file, an unknown setting, a refused run) as the step's
    failure, with its message as it is: the UI shows it as the step's error, not a traceback.
    A refused run (a fault every attempt would hit: no attempt started) lists its settings'
    partitions in the failure's ``refused_settings``."""
    try:
        yield
    except RunRefused as exc:
        raise dg.Failure(  # from None: its cause would repeat the message under a traceback
            description=str(exc),
            metadata={
                "refused_settings": [
                    str(settings_partition_key(*parse_setting_key(k))) for k in exc.settings
                ]
            },
        ) from None
    except TmlbenchError as exc:
        raise dg.Failure(str(exc)) from exc
