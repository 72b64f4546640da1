"""Real data for bring-your-own-data tests: the Churn Modelling table in the shared data folder,
served as the Kaggle-style download of the bank-churn task."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pandas as pd

from runner.config import REPO_ROOT

SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
BANK = "bank-customer-churn-ict-u-ai"


def kaggle_download_from_churn_modelling(dest: Path) -> Path:
    """A Kaggle-style competition zip built from the real Churn Modelling table."""
    real = pd.read_csv(SHARED_DATA / "churn_modelling.csv").rename(columns={"RowNumber": "id"})
    labelled = real.iloc[:8000]
    unlabelled = real.iloc[8000:].drop(columns=["Exited"])
    archive = dest / "bank-customer-churn-ict-u-ai.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("train.csv", labelled.to_csv(index=False))
        zf.writestr("test.csv", unlabelled.to_csv(index=False))
        zf.writestr(
            "sample_submission.csv", unlabelled[["id"]].assign(Exited=0.5).to_csv(index=False)
        )
    return archive
