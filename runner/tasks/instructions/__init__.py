"""The agent-facing INSTRUCTIONS.md: our own versioned text, rendered per task, budget and profile.

This package's top holds the text's data only (version, profile notes), so the spec models can
check a suite's profile names without importing the renderer; ``runner.tasks.instructions.render``
fills the text for one attempt.
"""

from __future__ import annotations

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


def unknown_profile(profile: str) -> str | None:
    """Why ``profile`` cannot be rendered (it has no note), or None when it can."""
    if profile in PROFILE_NOTES:
        return None
    return f"unknown instruction profile {profile!r} (known: {', '.join(PROFILE_NOTES)})"
