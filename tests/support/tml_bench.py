"""Results of the original TML-bench, as its code writes them.

``result()`` builds a ``RunResult`` (the original's own, tests/support/tml_bench_original) the
way its ``run_one.py`` does for each outcome (success: submission hashes, profile, strategy,
seed and ``kilo`` metadata in ``artifacts.notes``; failures: no metric, no score); ``database()``
writes them into a results database of any schema generation (tests/support/tml_bench_db.py),
``result_tree()`` into result.json files with its ``write_result_json``.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tests.support.tml_bench_db import CURRENT, Baseline, has_baselines, write_database
from tests.support.tml_bench_original.result import (
    Artifacts,
    BudgetConfig,
    ModelConfig,
    Provenance,
    RunResult,
    Versions,
    write_result_json,
)

CHURN = "bank-customer-churn-ict-u-ai"  # auc
TRAFFIC = "foot-traffic-wuerzburg-retail-forecasting-2-0"  # rmse
S5E10 = "playground-series-s5e10"  # rmse
S6E1 = "playground-series-s6e1"  # rmse
METRICS = {CHURN: "auc", TRAFFIC: "rmse", S5E10: "rmse", S6E1: "rmse"}  # as their spec.yaml say
GLM = ("chutes", "zai-org/GLM-4.6-FP8")
QWEN = ("chutes", "Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8")


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def result(
    run_id: str,
    created_at: str,
    *,
    competition: str = CHURN,
    status: str = "success",
    score: float | None = 0.9,
    model: tuple[str, str] | None = GLM,
    budget: int | None = 600,
    profile: str | None = "budget-aware",
    seed: int | None = 7,
    provenance: bool = True,
    submission: str | None = None,
) -> RunResult:
    """A run as run_one.py records it (``submission``: the content hashed, default per run)."""
    metric = METRICS.get(competition, "auc")
    success = status == "success"
    prov = (
        Provenance(
            spec_sha256=sha(f"spec {competition}"),
            prompt_sha256=sha(f"prompt {run_id}"),
            public_manifest_sha256=sha(f"public {competition}"),
            kilo_version="0.10.2",
            kilo_config_sha256=sha("kilo config"),
        )
        if provenance
        else None
    )
    notes: dict[str, Any] = {
        "public_manifest_path": f"runs/{run_id}/artifacts/public_manifest.json"
    }
    if success:
        content = submission if submission is not None else f"predictions of {run_id}"
        notes |= {
            "submission_sha256": sha(f"bytes {content} {run_id}"),
            "normalized_submission_sha256": sha(content),
            "kilo": {"returncode": 0, "duration_seconds": 101.5, "argv": ["kilo", "run"]},
        }
        if metric == "rmse":
            notes["secondary_r2"] = 0.61
    if profile is not None:
        notes["prompt_profile"] = profile
        notes["prompt_strategy"] = "profiled1"
    notes["seed"] = seed
    return RunResult(
        run_id=run_id,
        created_at=created_at,
        competition_id=competition,
        status=status,
        score_raw=score if success else None,
        score_normalized=(score if metric == "auc" else -score) if success and score else None,
        metric_name=metric if success else None,
        local_validation_metric=None,
        runtime_seconds=218.14,
        model=ModelConfig(provider=model[0], model_id=model[1], mode="pf_budgetaware")
        if model
        else None,
        budget=BudgetConfig(time_seconds=budget) if budget is not None else None,
        seed=seed,
        artifacts=Artifacts(
            submission_path=f"runs/{run_id}/artifacts/submission.csv" if success else None,
            normalized_submission_path=(
                f"runs/{run_id}/artifacts/submission.normalized.csv" if success else None
            ),
            notes=notes,
        ),
        versions=Versions(benchmark="v1-dev", git_sha="c0ffee" * 6 + "beef", git_dirty=False),
        provenance=prov,
    )


# The two baselines the databases hold, where their generation has the table: hgb and constant
# on churn, with NULL provenance as the baselines of some of the original's runs have.
BASELINES = [
    Baseline(
        competition_id=CHURN,
        baseline_type=kind,
        created_at="2026-01-25T18:00:00+00:00",
        metric_name="auc",
        score_raw=score,
        score_normalized=score,
        local_validation_metric=None,
        submission_sha256=sha(f"baseline {kind}") if kind == "hgb" else None,
        normalized_submission_sha256=None,
        spec_sha256=None,
        public_manifest_sha256=None,
    )
    for kind, score in (("hgb", 0.88), ("constant", 0.5))
]


def database(
    path: Path, runs: Iterable[RunResult], *, generation: str = CURRENT, baselines: bool = True
) -> Path:
    """``runs`` in the database at ``path`` as ``generation`` of the original writes them (an
    existing older database is migrated first), with ``BASELINES`` where it has their table."""
    return write_database(
        path,
        runs,
        generation=generation,
        baselines=BASELINES if baselines and has_baselines(generation) else (),
    )


def result_tree(root: Path, runs: Iterable[RunResult]) -> Path:
    """runs/<run_id>/result.json as run_one.py leaves them (with a workspace/ beside each)."""
    for run in runs:
        (root / run.run_id / "workspace").mkdir(parents=True)
        write_result_json(run, root / run.run_id / "result.json")
    return root


def columns(path: Path, table: str = "runs") -> list[str]:
    con = sqlite3.connect(path)
    try:
        return [row[1] for row in con.execute(f"pragma table_info({table})")]
    finally:
        con.close()
