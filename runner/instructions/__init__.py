"""The agent-facing INSTRUCTIONS.md: our own versioned text, rendered per task, budget and profile."""

from __future__ import annotations

import hashlib
from importlib.resources import files
from string import Template

from runner.errors import SpecError
from runner.specs import TaskSpec

# Notes appended per profile. Profiles and budgets are separate settings, both recorded.
PROFILE_NOTES = {
    "standard": "",
}


def render_instructions(task: TaskSpec, budget_seconds: int, profile: str, manifest: dict) -> str:
    if profile not in PROFILE_NOTES:
        raise SpecError(
            f"unknown instruction profile {profile!r} (known: {', '.join(PROFILE_NOTES)})"
        )
    template = Template(files(__package__).joinpath("standard.md").read_text(encoding="utf-8"))
    probabilities = task.task_type == "binary"
    return template.substitute(
        title=task.title,
        submission_file=task.submission.file,
        submission_columns=", ".join(task.submission.columns),
        train_rows=manifest["files"]["train.csv"]["rows"],
        test_rows=manifest["files"]["test.csv"]["rows"],
        id_column=task.id_column,
        target_column=task.target_column,
        prediction_rule=(
            f"`{task.target_column}` is the predicted probability of the positive class, in [0, 1]."
            if probabilities
            else f"`{task.target_column}` is a finite number."
        ),
        metric_name=task.metric.name.upper(),
        direction_text="higher is better"
        if task.metric.direction == "maximize"
        else "lower is better",
        budget_seconds=budget_seconds,
        profile_notes=PROFILE_NOTES[profile],
    )


def instructions_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
