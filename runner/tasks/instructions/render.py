"""Render INSTRUCTIONS.md for one attempt: the base text, the task's contract, the profile's note."""

from __future__ import annotations

import hashlib
from importlib.resources import files
from string import Template

from runner.errors import SpecError
from runner.specs import TaskSpec
from runner.tasks.instructions import INSTRUCTIONS_VERSION, PROFILE_NOTES, unknown_profile
from runner.tasks.manifest import Manifest


def render_instructions(
    task: TaskSpec, budget_seconds: int, profile: str, manifest: Manifest
) -> str:
    problem = unknown_profile(profile)
    if problem:
        raise SpecError(problem)
    template = Template(
        files("runner.tasks.instructions").joinpath("standard.md").read_text(encoding="utf-8")
    )
    probabilities = task.task_type == "binary"
    return template.substitute(
        title=task.title,
        submission_file=task.submission.file,
        submission_columns=", ".join(task.submission.columns),
        train_rows=manifest.rows("train.csv"),
        test_rows=manifest.rows("test.csv"),
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
        profile=profile,
        version=INSTRUCTIONS_VERSION,
    )


def instructions_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
