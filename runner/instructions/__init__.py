"""The agent-facing INSTRUCTIONS.md: our own versioned text, rendered per task, budget and profile."""

from __future__ import annotations

import hashlib
from importlib.resources import files
from string import Template

from runner.errors import SpecError
from runner.specs import TaskSpec

# Bumped whenever the text an agent reads changes; shown in the text, so it is in the hash too.
INSTRUCTIONS_VERSION = 2

# Notes appended per profile. Profiles and budgets are separate settings, both recorded.
PROFILE_NOTES = {
    "standard": "",
    "quick": """
## Approach: quick baseline
Time is short. Get a simple, robust model working end to end first (sensible encoding of
categorical columns, imputation, a linear model or a small gradient-boosting model), write the
submission, and only then spend what time is left on one or two clear improvements.
""",
    "good": """
## Approach: good baseline
Aim for a well-engineered model: look at the columns, engineer the obvious features (dates,
categories, interactions the description suggests), train a gradient-boosting model with early
stopping on a validation split, compare it with a simpler model, and keep the better one.
""",
    "xgboost": """
## Approach: XGBoost-focused
`xgboost` is installed and allowed (CPU only: use `tree_method="hist"`). Build a tuned XGBoost
model: careful feature engineering, early stopping on a validation split, a small search over
depth, learning rate, subsampling and regularization within your time, and a final fit on all
labelled rows with the chosen number of rounds.
""",
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
        profile=profile,
        version=INSTRUCTIONS_VERSION,
    )


def instructions_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
