"""INSTRUCTIONS.md: one base text, a note per profile, hashed on every record."""

from __future__ import annotations

import subprocess
import sys

import pytest

from runner.config import REPO_ROOT
from runner.errors import SpecError
from runner.specs.registry import load_task
from runner.tasks.instructions import INSTRUCTIONS_VERSION, PROFILE_NOTES
from runner.tasks.instructions.render import instructions_sha256, render_instructions
from runner.tasks.manifest import Manifest, ManifestFile, ManifestTask


@pytest.fixture
def task():
    return load_task(REPO_ROOT / "tasks", "bank-customer-churn-ict-u-ai")


@pytest.fixture
def manifest(task):
    def csv(rows: int) -> ManifestFile:
        return ManifestFile(sha256="0" * 64, bytes=1000, rows=rows, columns=12)

    return Manifest(task=ManifestTask.of(task), files={"train.csv": csv(800), "test.csv": csv(200)})


def test_every_profile_renders_the_contract_and_its_own_note(task, manifest):
    texts = {p: render_instructions(task, 600, p, manifest) for p in PROFILE_NOTES}
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


def test_unknown_profile_is_refused_by_name(task, manifest):
    with pytest.raises(SpecError, match="unknown instruction profile 'fast'"):
        render_instructions(task, 240, "fast", manifest)


def test_the_spec_models_load_without_the_renderer():
    """No import cycle: the specs read the profile names from the package's data, not its renderer."""
    code = "import sys, runner.specs; print('runner.tasks.instructions.render' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
