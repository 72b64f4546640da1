"""INSTRUCTIONS.md: one base text, a note per profile, hashed on every record."""

from __future__ import annotations

import pytest

from runner.config import REPO_ROOT
from runner.errors import SpecError
from runner.instructions import (
    INSTRUCTIONS_VERSION,
    PROFILE_NOTES,
    instructions_sha256,
    render_instructions,
)
from runner.registry import load_task

MANIFEST = {"files": {"train.csv": {"rows": 800}, "test.csv": {"rows": 200}}}


@pytest.fixture
def task():
    return load_task(REPO_ROOT / "tasks", "bank-customer-churn-ict-u-ai")


def test_every_profile_renders_the_contract_and_its_own_note(task):
    texts = {p: render_instructions(task, 600, p, MANIFEST) for p in PROFILE_NOTES}
    for text in texts.values():
        assert "600 seconds" in text and "`submission.csv`" in text and "id, Exited" in text
        assert "AUC" in text and "higher is better" in text and "local_validation_score" in text
    assert "xgboost" in texts["xgboost"] and "xgboost" not in texts["quick"]
    assert "installed and allowed" in texts["xgboost"]
    assert "Keep the CSV contents out of your context" in texts["quick"]
    assert (
        texts["good"].rstrip().endswith(f"instructions v{INSTRUCTIONS_VERSION}, profile good -->")
    )
    assert len({instructions_sha256(t) for t in texts.values()}) == len(PROFILE_NOTES)


def test_unknown_profile_is_refused_by_name(task):
    with pytest.raises(SpecError, match="unknown instruction profile 'fast'"):
        render_instructions(task, 240, "fast", MANIFEST)
