"""The built-in baselines run as standalone programs on small synthetic workspaces."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from runner.config import REPO_ROOT
from runner.specs import AgentSpec, load_yaml_model

# integration: every baseline trains for real on the prepared twins
# xdist_group: its module fixtures (every baseline trained) are built once, on one worker, not on each
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("baselines")]

BASELINES = REPO_ROOT / "agents" / "baselines"
SCORE_PREFIX = "local_validation_score:"


# --- synthetic workspaces -------------------------------------------------------------


def _write_workspace(
    root: Path, table: pd.DataFrame, *, task_id: str, task_type: str, target: str, metric: str
):
    root.mkdir(parents=True, exist_ok=True)
    n_test = len(table) // 5
    train, test = table.iloc[n_test:], table.iloc[:n_test]
    placeholder = 0.5 if task_type == "binary" else 0.0
    train.to_csv(root / "train.csv", index=False)
    test.drop(columns=[target]).to_csv(root / "test.csv", index=False)
    pd.DataFrame({"id": test["id"], target: placeholder}).to_csv(
        root / "sample_submission.csv", index=False
    )
    (root / "description.md").write_text(f"# {task_id}\nPredict {target}.\n")
    (root / "INSTRUCTIONS.md").write_text("Write submission.csv.\n")
    files = {}
    for name in ("train.csv", "test.csv", "sample_submission.csv"):
        path = root / name
        frame = pd.read_csv(path)
        files[name] = {
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "rows": len(frame),
            "columns": frame.shape[1],
        }
    direction = "maximize" if metric == "auc" else "minimize"
    manifest = {
        "schema_version": 1,
        "task": {
            "id": task_id,
            "task_type": task_type,
            "id_column": "id",
            "target_column": target,
            "metric": {"name": metric, "direction": direction},
            "submission": {"file": "submission.csv", "columns": ["id", target]},
        },
        "files": files,
    }
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return root


def binary_table(n: int, seed: int = 0) -> pd.DataFrame:
    """Churn-like: numerics, categoricals, a surname-like column, NaNs, an interaction signal."""
    rng = np.random.default_rng(seed)
    age = rng.normal(40, 10, n)
    x1, x2 = rng.normal(size=n), rng.normal(size=n)
    geography = rng.choice(["France", "Spain", "Germany"], n, p=[0.5, 0.25, 0.25])
    logit = 0.15 * (age - 40) + 2.5 * np.sign(x1 * x2) + 1.2 * (geography == "Germany") - 0.3
    exited = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    balance = np.where(rng.random(n) < 0.1, np.nan, rng.gamma(2, 50_000, n))
    age = np.where(rng.random(n) < 0.05, np.nan, age.round())
    surnames = [f"Name{k}" for k in rng.integers(0, 50 * n, n)]
    return pd.DataFrame(
        {
            "id": np.arange(n) + 100_000,
            "Surname": surnames,
            "Age": age,
            "Balance": balance,
            "Geography": geography,
            "Gender": rng.choice(["Male", "Female"], n),
            "HasCrCard": rng.choice([True, False], n),
            "x1": x1,
            "x2": x2,
            "Exited": exited,
        }
    )


def regression_table(n: int, seed: int = 0) -> pd.DataFrame:
    """Pedestrian-count-like: a timestamp string, a category, a float with NaN."""
    rng = np.random.default_rng(seed)
    stamps = pd.Timestamp("2023-01-01") + pd.to_timedelta(rng.integers(0, 365 * 24, n), unit="h")
    station = rng.choice(["A", "B", "C", "D"], n)
    temperature = (
        10
        + 10 * np.sin(2 * np.pi * (stamps.dayofyear.to_numpy() - 100) / 365)
        + rng.normal(0, 2, n)
    )
    hour = stamps.hour.to_numpy()
    daily = np.exp(-((hour - 13) ** 2) / 10.0)
    weekend = stamps.dayofweek.to_numpy() >= 5
    scale = pd.Series(station).map({"A": 400.0, "B": 200.0, "C": 100.0, "D": 50.0}).to_numpy()
    count = scale * daily * np.where(weekend, 1.6, 1.0) + 3.0 * temperature + rng.normal(0, 10, n)
    temperature = np.where(rng.random(n) < 0.1, np.nan, temperature.round(1))
    return pd.DataFrame(
        {
            "id": np.arange(n),
            "timestamp": stamps.strftime("%Y-%m-%d %H:%M:%S"),
            "station": station,
            "temperature": temperature,
            "count": count.round(1),
        }
    )


@pytest.fixture(scope="module")
def workspaces(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("baseline_workspaces")
    return {
        "binary": _write_workspace(
            root / "binary",
            binary_table(2500),
            task_id="churn",
            task_type="binary",
            target="Exited",
            metric="auc",
        ),
        "regression": _write_workspace(
            root / "regression",
            regression_table(2500),
            task_id="pedestrians",
            task_type="regression",
            target="count",
            metric="rmse",
        ),
    }


# --- running a baseline ---------------------------------------------------------------


def baseline_command(name: str, workspace: Path, *, budget: float, seed: int) -> list[str]:
    script = str(BASELINES / f"{name}.py")
    args = ["--workspace", str(workspace), "--budget", str(budget), "--seed", str(seed)]
    return [sys.executable, script, *args]


def run_baseline(name: str, workspace: Path, *, budget: float = 240, seed: int = 1):
    """Run a baseline to completion; returns (printed validation score, wall seconds)."""
    started = time.monotonic()
    result = subprocess.run(
        baseline_command(name, workspace, budget=budget, seed=seed),
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=max(60, 2 * budget),
    )
    wall = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    return parse_score(result.stdout), wall


def parse_score(stdout: str) -> float:
    lines = [line for line in stdout.splitlines() if line.startswith(SCORE_PREFIX)]
    assert lines, f"no score line in {stdout!r}"
    value = float(lines[-1][len(SCORE_PREFIX) :])
    assert math.isfinite(value)
    return value


def check_submission(workspace: Path) -> pd.DataFrame:
    manifest = json.loads((workspace / "manifest.json").read_text())["task"]
    target = manifest["target_column"]
    submission = pd.read_csv(workspace / "submission.csv")
    test = pd.read_csv(workspace / "test.csv")
    assert list(submission.columns) == manifest["submission"]["columns"]
    assert len(submission) == len(test)
    assert submission["id"].tolist() == test["id"].tolist()
    values = submission[target].to_numpy(dtype=float)
    assert np.isfinite(values).all()
    if manifest["task_type"] == "binary":
        assert ((values >= 0) & (values <= 1)).all()
    return submission


# --- tests ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scores(workspaces) -> dict[tuple[str, str], float]:
    out = {}
    for kind, workspace in workspaces.items():
        for name in ("constant", "linear", "gbm"):
            (workspace / "submission.csv").unlink(missing_ok=True)
            out[kind, name], wall = run_baseline(name, workspace)
            check_submission(workspace)
            print(f"{name} on {kind}: score {out[kind, name]:.4f} in {wall:.1f}s")
    return out


def test_baselines_write_valid_submissions_and_scores(scores):
    assert len(scores) == 6
    assert scores["binary", "constant"] == pytest.approx(0.5)


def test_binary_ordering_gbm_over_linear_over_constant(scores):
    constant, linear, gbm = (scores["binary", name] for name in ("constant", "linear", "gbm"))
    assert linear >= constant + 0.05
    assert gbm >= linear + 0.05


def test_regression_ordering_gbm_over_linear_over_constant(scores):
    constant, linear, gbm = (scores["regression", name] for name in ("constant", "linear", "gbm"))
    assert linear <= 0.9 * constant
    assert gbm <= 0.8 * linear


def test_different_seed_gives_different_validation_split(workspaces):
    first, _ = run_baseline("constant", workspaces["regression"], seed=1)
    second, _ = run_baseline("constant", workspaces["regression"], seed=2)
    again, _ = run_baseline("constant", workspaces["regression"], seed=1)
    assert first != second
    assert first == again


def test_gbm_leaves_a_valid_submission_when_cut_short(tmp_path):
    table = binary_table(60_000, seed=3)
    workspace = _write_workspace(
        tmp_path / "big", table, task_id="churn", task_type="binary", target="Exited", metric="auc"
    )
    budget = 3
    command = baseline_command("gbm", workspace, budget=budget, seed=1)
    process = subprocess.Popen(
        command, cwd=workspace, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        process.wait(timeout=budget)
    except subprocess.TimeoutExpired:
        process.kill()  # what the harness does when the budget ends
        process.wait()
    check_submission(workspace)


def test_gbm_finishes_inside_a_short_budget(tmp_path):
    table = regression_table(30_000, seed=4)
    workspace = _write_workspace(
        tmp_path / "mid", table, task_id="p", task_type="regression", target="count", metric="rmse"
    )
    score, wall = run_baseline("gbm", workspace, budget=20)
    check_submission(workspace)
    assert wall < 20
    assert score > 0


def test_numpy_auc_matches_rank_definition():
    spec = importlib.util.spec_from_file_location(
        "tmlbench_baseline_metrics", BASELINES / "metrics.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    y = np.array([0, 0, 1, 1, 0, 1])
    p = np.array([0.1, 0.4, 0.35, 0.8, 0.4, 0.4])
    pairs = [(a, b) for a in p[y == 1] for b in p[y == 0]]
    expected = np.mean([1.0 if a > b else 0.5 if a == b else 0.0 for a, b in pairs])
    assert module.auc(y, p) == pytest.approx(expected)
    assert module.auc(y, np.full(6, 0.3)) == pytest.approx(0.5)


@pytest.mark.parametrize("name", ["constant", "linear", "gbm"])
def test_agent_specs_are_valid(name):
    spec = load_yaml_model(REPO_ROOT / "agents" / f"baseline-{name}.yaml", AgentSpec)
    assert spec.id == f"baseline-{name}"
    assert spec.kind == "baseline" and spec.trusted
    assert f"{{agent_dir}}/{name}.py" in spec.command
    assert (REPO_ROOT / "agents" / spec.code_dir / f"{name}.py").is_file()
