"""The offline twins of the tml-v1 suite: spec, table contract, determinism, signal."""

from __future__ import annotations

import time
from functools import cache

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score, root_mean_squared_error
from sklearn.model_selection import train_test_split

from runner.config import REPO_ROOT
from runner.specs import TaskSpec, load_yaml_model
from runner.tasks.twins import Twin, load_generator

TASKS_DIR = REPO_ROOT / "tasks"
TWIN_TASKS = (
    "bank-customer-churn-ict-u-ai",
    "foot-traffic-wuerzburg-retail-forecasting-2-0",
    "playground-series-s5e10",
    "playground-series-s6e1",
)
# (low, high) bounds of the target and of the truth, per task.
RANGES = {
    "bank-customer-churn-ict-u-ai": (0.0, 1.0),
    "foot-traffic-wuerzburg-retail-forecasting-2-0": (0.0, np.inf),
    "playground-series-s5e10": (0.0, 1.0),
    "playground-series-s6e1": (19.6, 100.0),
}
MODERATE_ROWS = 20_000


@cache
def spec(task_id: str) -> TaskSpec:
    return load_yaml_model(TASKS_DIR / task_id / "task.yaml", TaskSpec)


@cache
def generator(task_id: str):
    s = spec(task_id)
    assert s.source.twin is not None
    return load_generator(TASKS_DIR / task_id / s.source.twin.generator)


@cache
def twin(task_id: str, n_rows: int, seed: int) -> Twin:
    return generator(task_id)(n_rows, seed)


def test_every_twin_folder_is_covered():
    folders = {p.parent.name for p in TASKS_DIR.glob("*/twin.py")}
    assert set(TWIN_TASKS) <= folders


@pytest.mark.parametrize("task_id", TWIN_TASKS)
def test_spec_validates_and_describes_the_twin(task_id):
    s = spec(task_id)
    assert s.id == task_id
    assert s.source.twin is not None and s.source.twin.generator == "twin.py"
    assert s.source.kaggle is not None and s.source.kaggle.competition == task_id
    assert s.split.test_fraction == 0.2 and s.split.seed == 1337
    assert s.split.strategy == ("stratified" if s.task_type == "binary" else "random")
    assert s.metric.name == ("auc" if s.task_type == "binary" else "rmse")
    assert s.metric.direction == ("maximize" if s.task_type == "binary" else "minimize")
    description = (TASKS_DIR / task_id / "description.md").read_text(encoding="utf-8")
    for name in (s.id_column, s.target_column, *s.feature_columns, "sample_submission.csv"):
        assert f"`{name}`" in description, name
    assert ",".join(s.submission.columns) in description  # the example header


@pytest.mark.parametrize("task_id", TWIN_TASKS)
def test_table_contract(task_id):
    s = spec(task_id)
    tw = twin(task_id, 500, 3)
    table, truth = tw.table, tw.truth
    assert list(table.columns) == [s.id_column, *s.feature_columns, s.target_column]
    assert len(table) == 500
    assert table[s.id_column].is_unique and table[s.id_column].notna().all()
    assert isinstance(truth, pd.Series) and truth.index.equals(table.index)
    assert np.isfinite(truth.to_numpy(dtype=float)).all()
    assert table[s.target_column].notna().all()
    lo, hi = RANGES[task_id]
    target = table[s.target_column].to_numpy(dtype=float)
    assert (target >= lo).all() and (target <= hi).all()
    assert (truth >= lo).all() and (truth <= hi).all()
    if s.task_type == "binary":
        assert set(np.unique(target)) == {0.0, 1.0}
        assert ((truth > 0) & (truth < 1)).all()
    # Realistic gaps: a few percent missing in some features, never in the id or target.
    nan_share = table[list(s.feature_columns)].isna().mean()
    assert nan_share.max() > 0
    assert nan_share.max() < 0.1
    # No feature is constant.
    assert all(table[c].nunique(dropna=True) > 1 for c in s.feature_columns)


@pytest.mark.parametrize("task_id", TWIN_TASKS)
def test_deterministic_per_seed(task_id):
    gen = generator(task_id)
    a, b, c = gen(300, 11), gen(300, 11), gen(300, 12)
    pd.testing.assert_frame_equal(a.table, b.table)
    pd.testing.assert_series_equal(a.truth, b.truth)
    assert not a.table.equals(c.table)
    assert not np.allclose(a.truth.to_numpy(), c.truth.to_numpy())


@pytest.mark.parametrize("task_id", TWIN_TASKS)
def test_bayes_optimal_beats_constant(task_id):
    s = spec(task_id)
    n = min(MODERATE_ROWS, s.source.twin.default_rows)
    tw = twin(task_id, n, 5)
    y = tw.table[s.target_column].to_numpy(dtype=float)
    truth = tw.truth.to_numpy(dtype=float)
    # truth is the conditional mean: the target's residuals around it average out.
    resid = y - truth
    assert abs(resid.mean()) < 4 * resid.std() / np.sqrt(n)
    y_tr, y_te, _, t_te = train_test_split(
        y, truth, test_size=s.split.test_fraction, random_state=s.split.seed,
        stratify=y if s.split.strategy == "stratified" else None,
    )  # fmt: skip
    const = np.full(len(y_te), y_tr.mean())
    if s.task_type == "binary":
        assert 0.15 < y.mean() < 0.25  # churn base rate of the real table: 20 %
        bayes = roc_auc_score(y_te, t_te)
        assert roc_auc_score(y_te, const) == 0.5
        assert 0.82 < bayes < 0.93
    else:
        bayes = root_mean_squared_error(y_te, t_te)
        baseline = root_mean_squared_error(y_te, const)
        assert bayes < 0.6 * baseline  # the signal dominates the noise...
        assert bayes > 0.1 * baseline  # ...but Bayes-optimal is not perfect


@pytest.mark.slow
@pytest.mark.parametrize("task_id", TWIN_TASKS)
def test_full_size_is_fast(task_id):
    s = spec(task_id)
    start = time.perf_counter()
    tw = generator(task_id)(s.source.twin.default_rows, s.source.twin.seed)
    elapsed = time.perf_counter() - start
    assert len(tw.table) == s.source.twin.default_rows
    assert tw.table[s.id_column].is_unique
    assert elapsed < 10.0
