"""Bring-your-own-data: a Kaggle-style download of real bank-churn data, prepared and solved."""

from __future__ import annotations

import pytest

from runner.specs.registry import load_agent, load_task
from runner.tasks.preparation import prepare_from_download
from tests.support.attempts import attempt
from tests.support.real_data import BANK, kaggle_download_from_churn_modelling

pytestmark = pytest.mark.sandbox


def test_gbm_baseline_scores_the_real_churn_data(paths, tmp_path):
    task = load_task(paths.tasks_dir, BANK)
    prepare_from_download(
        task, paths.tasks_dir, paths.data_dir, kaggle_download_from_churn_modelling(tmp_path)
    )
    record = attempt(paths, load_agent(paths.agents_dir, "baseline-gbm"), BANK, budget=240)
    assert record.status == "success", (record.error_message, record.validation_message)
    # Gradient boosting reaches about 0.86 AUC on this table; a constant gets 0.5.
    assert record.score > 0.8
