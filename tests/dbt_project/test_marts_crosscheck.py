"""Every mart value, recomputed independently in pandas/numpy from the same hand-made records.

The records cover: 5 agents, tasks of both metric directions, 2–3 budgets per task, every
status, settings with more than 5 successes and ties in created_at (broken by run_id), an
uncovered agent (too few successes in one setting, none at all in another, a zero median),
an agent tied with another in a cell, and a cell where all covered agents score the same.
dbt runs once for the module; the bootstrap is recomputed with the same integer hash.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from runner.records import STATUSES, RunRecord
from tests.support.dbt_warehouse import (
    insert_agents,
    insert_runs,
    insert_suites,
    insert_tasks,
    read_mart,
)
from tests.support.leaderboard_reference import (
    SETTING,
    compute_leaderboard,
    counted_attempts,
    records_frame,
)
from tests.support.leaderboard_reference import success_rates as reference_success_rates
from tests.support.records import make_record as run_record
from warehouse.marts import DBT_PROJECT_DIR, build_marts

TOL = 1e-9
PROJECT_VARS = yaml.safe_load((DBT_PROJECT_DIR / "dbt_project.yml").read_text())["vars"]
N = PROJECT_VARS["counted_successes"]
REPLICATES = PROJECT_VARS["bootstrap_replicates"]
SEED = PROJECT_VARS["bootstrap_seed"]
ROUND = PROJECT_VARS["rank_round_digits"]

TASKS = {  # task_id → (direction, budgets, start date)
    "auc": ("maximize", (60, 300, 900), dt.date(2025, 3, 1)),
    "rmse": ("minimize", (60, 300, 900), dt.date(2025, 9, 1)),
    "acc": ("maximize", (60, 300), None),
}
AGENTS = {  # agent_id → (base quality, knowledge cutoff)
    "alpha": (0.70, dt.date(2025, 3, 1)),
    "beta": (0.60, dt.date(2024, 12, 31)),
    "gamma": (0.65, None),
    "delta": (0.62, dt.date(2025, 10, 1)),
    "epsilon": (0.55, dt.date(2025, 1, 1)),
}
COVERED = {"alpha", "beta", "gamma", "delta"}
SUITES = {"main": 3, "side": 2, "unused": 1}  # raw.suites: suite_id → harness_error_ceiling
FAILURES = [s for s in STATUSES if s != "success"]


def make_records() -> list[RunRecord]:
    rng = np.random.default_rng(7)
    records: list[RunRecord] = []
    copied: dict[tuple[str, str, int], list[float]] = {}
    for agent, (base, _) in AGENTS.items():
        for task, (direction, budgets, _) in TASKS.items():
            for budget in budgets:
                setting = (agent, task, budget)
                if setting == ("epsilon", "acc", 300):
                    continue  # never ran: missing 5, zero attempts
                n_success = int(rng.integers(N, N + 4))
                if setting == ("epsilon", "rmse", 900):
                    n_success = 3  # too few: epsilon is not covered
                if setting in (("gamma", "auc", 300), ("delta", "auc", 300)):
                    n_success = N  # all counted, so the copy below has the same median
                quality = base + budget / 6000
                scores = np.round(quality + rng.normal(0, 0.03, n_success), 3).tolist()
                if (task, budget) == ("acc", 60) and agent in COVERED:
                    # all equal among the counted; the later successes must not count
                    scores = [0.8] * N + [0.99] * (n_success - N)
                if setting == ("delta", "auc", 300):
                    scores = copied[("gamma", "auc", 300)]  # delta ties gamma in this cell
                if setting == ("epsilon", "auc", 60):
                    scores = [0.0] * n_success  # zero median: rel_iqr undefined
                copied[setting] = scores
                outcomes = [("success", s) for s in scores]
                outcomes += [(str(rng.choice(FAILURES)), None) for _ in range(rng.integers(0, 4))]
                order = rng.permutation(len(outcomes))
                letters = rng.permutation(len(outcomes))
                for position, index in enumerate(order):
                    status, score = outcomes[index]
                    raw = score if direction == "maximize" else 2 - (score or 0.0)
                    value = None if score is None else raw
                    records.append(
                        run_record(
                            agent,
                            task,
                            budget,
                            minute=float(position // 2),  # pairs share created_at
                            status=status,
                            score=value,
                            direction=direction,
                            run_id=f"{agent}-{task}-{budget}-{chr(97 + letters[position])}",
                        )
                    )
    # every status appears at least once
    records.append(run_record("beta", "auc", 60, 99, status="harness_error", run_id="beta-h"))
    records.append(run_record("beta", "auc", 60, 99, status="provider_error", run_id="beta-p"))
    # harness faults up to a suite's harness-error ceiling (with_suites says which suite)
    for i in range(3):
        records.append(
            run_record("gamma", "rmse", 60, 100 + i, status="harness_error", run_id=f"gamma-h{i}")
        )
        records.append(
            run_record("delta", "acc", 60, 100 + i, status="harness_error", run_id=f"delta-h{i}")
        )
    return records


def with_suites(records: list[RunRecord]) -> list[RunRecord]:
    """The suite each attempt ran under: "main" for most; epsilon's in "side"; one setting with
    attempts in both (the smaller ceiling applies), one outside any suite and one in a suite that
    is not loaded (ceiling unknown)."""
    out = []
    for i, record in enumerate(records):
        setting = (record.agent_id, record.task_id, record.budget_seconds)
        suite: str | None = "main"
        if record.agent_id == "epsilon":
            suite = "side"
        elif setting == ("delta", "acc", 60):
            suite = ("main", "side")[i % 2]
        elif setting == ("alpha", "acc", 300):
            suite = None
        elif setting == ("beta", "rmse", 900):
            suite = "removed"
        out.append(record.model_copy(update={"suite_id": suite}))
    return out


def with_costs(records: list[RunRecord]) -> list[RunRecord]:
    """Tokens and cost on the records: alpha and epsilon always known, beta known on two of
    three attempts, gamma never (unknown, not 0), delta known and always $0."""
    rng = np.random.default_rng(11)
    out = []
    for i, record in enumerate(records):
        tokens_in = tokens_out = cost = None
        agent = record.agent_id
        if agent in ("alpha", "epsilon") or (agent == "beta" and i % 3):
            tokens_in, tokens_out = int(rng.integers(1_000, 50_000)), int(rng.integers(100, 5_000))
            cost = round(tokens_in * 3e-6 + tokens_out * 15e-6, 6)
        elif agent == "delta":
            tokens_in, tokens_out, cost = 0, 0, 0.0
        out.append(
            record.model_copy(
                update={"tokens_in": tokens_in, "tokens_out": tokens_out, "cost_usd": cost}
            )
        )
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[RunRecord]]:
    root = tmp_path_factory.mktemp("crosscheck")
    path = root / "warehouse.duckdb"
    records = with_suites(with_costs(make_records()))
    insert_runs(path, records)
    insert_suites(path, SUITES)
    insert_tasks(path, {t: (d, start) for t, (d, _, start) in TASKS.items()})
    insert_agents(path, {a: cutoff for a, (_, cutoff) in AGENTS.items()})
    build_marts(path, artifacts_dir=root / "dbt")
    return path, records


@pytest.fixture(scope="module")
def runs(built) -> pd.DataFrame:
    return records_frame(built[1])


@pytest.fixture(scope="module")
def board(built):
    return compute_leaderboard(built[1], n=N)


def assert_same(actual: pd.DataFrame, expected: pd.DataFrame, keys: list[str]) -> None:
    """Same keys, same columns of `expected`; numbers equal within TOL (NaN == NaN)."""
    assert not actual.empty and not expected.empty
    actual = actual.sort_values(keys).reset_index(drop=True)
    expected = expected.sort_values(keys).reset_index(drop=True)
    assert actual[keys].astype(str).equals(expected[keys].astype(str)), (
        actual[keys],
        expected[keys],
    )
    for column in expected.columns:
        a, e = actual[column], expected[column]
        if pd.api.types.is_numeric_dtype(e) and not pd.api.types.is_bool_dtype(e):
            a, e = a.astype(float).to_numpy(), e.astype(float).to_numpy()
            assert np.allclose(a, e, rtol=0, atol=TOL, equal_nan=True), (column, a, e)
        else:
            assert (
                a.astype(object).where(a.notna(), None).tolist()
                == e.astype(object).where(e.notna(), None).tolist()
            ), column


def min_rank(scores: pd.Series, by: pd.Series | list | None = None) -> pd.Series:
    rounded = scores.astype(float).round(ROUND)
    if by is None:
        return rounded.rank(method="min", ascending=False).astype(int)
    return rounded.groupby(by).rank(method="min", ascending=False).astype(int)


def test_the_data_has_what_the_crosscheck_needs(runs):
    ok = runs[runs["status"] == "success"]
    per_setting = ok.groupby(SETTING).size()
    assert (per_setting > N).any()
    assert set(runs["status"]) == set(STATUSES)
    assert ok.duplicated([*SETTING, "created_at"]).any()  # ties in created_at


def test_setting_scores(built, board):
    expected = board.settings.copy()
    expected["n_counted"] = expected["n_counted"].fillna(0)
    rel = expected["iqr"] / expected["median_score"].abs()
    expected["rel_iqr"] = rel.replace([np.inf, -np.inf], np.nan)
    expected.loc[expected["median_score"] == 0, "rel_iqr"] = np.nan
    assert_same(read_mart(built[0], "setting_scores"), expected, SETTING)


def _coverage(runs: pd.DataFrame) -> pd.DataFrame:
    cells = runs[["task_id", "budget_seconds"]].drop_duplicates()
    agents = runs[["agent_id"]].drop_duplicates()
    expected = agents.merge(cells, how="cross")
    counts = runs.groupby(SETTING).agg(
        attempts=("run_id", "size"), successes=("status", lambda s: int((s == "success").sum()))
    )
    expected = expected.merge(counts.reset_index(), on=SETTING, how="left").fillna(0)
    expected["missing"] = (N - expected["successes"]).clip(lower=0)
    lacking = set(expected.loc[expected["missing"] > 0, "agent_id"])
    expected["agent_is_covered"] = ~expected["agent_id"].isin(lacking)
    return expected


def test_coverage(built, runs, board):
    expected = _coverage(runs)
    actual = read_mart(built[0], "coverage")
    assert_same(actual, expected, SETTING)
    assert set(expected.loc[expected["agent_is_covered"], "agent_id"]) == COVERED
    lacking = actual[actual["missing"] > 0][[*SETTING, "successes", "missing"]]
    assert_same(lacking, board.coverage[[*SETTING, "successes", "missing"]], SETTING)
    assert lacking.set_index(SETTING).loc[("epsilon", "acc", 300), "missing"] == N


def test_normalized_scores(built, board):
    assert set(board.points["agent_id"]) == COVERED
    points = read_mart(built[0], "normalized_scores")
    assert_same(points, board.points, SETTING)
    cell = points[(points["task_id"] == "acc") & (points["budget_seconds"] == 60)]
    assert (cell["points"] == 0.5).all()  # all equal
    tie = points[(points["task_id"] == "auc") & (points["budget_seconds"] == 300)].set_index(
        "agent_id"
    )
    assert tie.loc["gamma", "points"] == tie.loc["delta", "points"]


def _task_ranks(points: pd.DataFrame) -> pd.DataFrame:
    best = points.groupby(["agent_id", "task_id"])["points"].max().rename("best_points")
    best = best.reset_index()
    best["rank"] = min_rank(best["best_points"], best["task_id"])
    return best


def test_leaderboard(built, board):
    ranking = board.ranking
    frames = []
    for variant in ("best_budget", "all_cells", "largest_budget"):
        frame = ranking[["agent_id", variant]].rename(columns={variant: "score"})
        frame = frame.assign(variant=variant)
        frame["rank"] = min_rank(frame["score"])
        frames.append(frame)
    expected = pd.concat(frames)
    actual = read_mart(built[0], "leaderboard")
    assert_same(actual, expected, ["agent_id", "variant"])
    best = actual[actual["variant"] == "best_budget"].set_index("agent_id")["rank"]
    assert best.sort_index().tolist() == ranking.set_index("agent_id")["rank"].sort_index().tolist()


def test_task_ranks_and_rank_stability(built, board):
    expected = _task_ranks(board.points)
    assert_same(read_mart(built[0], "task_ranks"), expected, ["agent_id", "task_id"])
    stability = expected.groupby("agent_id")["rank"].agg(
        mean_rank="mean", rank_std=lambda r: r.std(ddof=1), n_tasks="size"
    )
    assert_same(read_mart(built[0], "rank_stability"), stability.reset_index(), ["agent_id"])
    reference = board.ranking[["agent_id", "mean_rank", "rank_std"]]
    assert_same(read_mart(built[0], "rank_stability"), reference, ["agent_id"])


def test_success_rates(built, runs, board):
    expected = reference_success_rates(runs)
    assert_same(read_mart(built[0], "success_rates"), expected, ["agent_id"])
    per_setting = pd.crosstab([runs[c] for c in SETTING], runs["status"]).reindex(
        columns=list(STATUSES), fill_value=0
    )
    per_setting.columns = [f"n_{c}" for c in per_setting.columns]
    per_setting["attempts"] = per_setting.sum(axis=1)
    per_setting["agent_attempts"] = per_setting["attempts"] - per_setting["n_harness_error"]
    per_setting["successes"] = per_setting["n_success"]
    own = per_setting["agent_attempts"].replace(0, np.nan)
    per_setting["success_rate"] = per_setting["successes"] / own
    assert_same(read_mart(built[0], "setting_success_rates"), per_setting.reset_index(), SETTING)


def _harness_errors(runs: pd.DataFrame) -> pd.DataFrame:
    """Per setting: harness_error attempts, the smallest ceiling of the suites its attempts name
    (NaN: none loaded) and whether the count reached it."""
    frame = runs.assign(
        harness_error=runs["status"] == "harness_error",
        ceiling=runs["suite_id"].map(SUITES),  # None and unknown suites → NaN
    )
    grouped = frame.groupby(SETTING)
    out = pd.DataFrame(
        {
            "n_harness_error": grouped["harness_error"].sum(),
            "harness_error_ceiling": grouped["ceiling"].min(),
        }
    )
    out["harness_error_ceiling_reached"] = (
        out["n_harness_error"] >= out["harness_error_ceiling"]
    )  # NaN → False
    return out.reset_index()


def test_harness_error_ceiling(built, runs):
    expected = _harness_errors(runs)
    rates = read_mart(built[0], "setting_success_rates")
    assert_same(rates, expected, SETTING)
    by_setting = expected.set_index(SETTING)
    assert by_setting.loc[("gamma", "rmse", 60), "harness_error_ceiling_reached"]
    assert by_setting.loc[("delta", "acc", 60), "harness_error_ceiling"] == SUITES["side"]
    assert np.isnan(by_setting.loc[("alpha", "acc", 300), "harness_error_ceiling"])
    assert np.isnan(by_setting.loc[("beta", "rmse", 900), "harness_error_ceiling"])
    reached = by_setting["harness_error_ceiling_reached"]
    assert reached.any() and not reached.all()

    # coverage: every expected setting, a never-run one with no faults and no ceiling
    coverage = _coverage(runs).merge(expected, on=SETTING, how="left")
    coverage["n_harness_error"] = coverage["n_harness_error"].fillna(0)
    coverage["harness_error_ceiling_reached"] = coverage["harness_error_ceiling_reached"].eq(True)
    actual = read_mart(built[0], "coverage")
    assert_same(actual, coverage, SETTING)
    never = actual.set_index(SETTING).loc[("epsilon", "acc", 300)]
    assert never["n_harness_error"] == 0 and pd.isna(never["harness_error_ceiling"])


def test_run_stability(built, board):
    settings = board.settings
    rel = (settings["iqr"] / settings["median_score"].abs()).replace([np.inf, -np.inf], np.nan)
    expected = rel.groupby(settings["agent_id"]).agg(rel_iqr="median", n_settings="count")
    expected = expected.reset_index()
    expected["is_covered"] = expected["agent_id"].isin(COVERED)
    actual = read_mart(built[0], "run_stability")
    assert_same(actual, expected, ["agent_id"])
    assert_same(
        actual[actual["is_covered"]][["agent_id", "rel_iqr"]],
        board.ranking[["agent_id", "rel_iqr"]],
        ["agent_id"],
    )


def test_time_scaling(built, board):
    points = board.points
    expected = points.groupby(["agent_id", "budget_seconds"])["points"].agg(
        mean_points="mean", n_tasks="size"
    )
    assert_same(
        read_mart(built[0], "time_scaling"), expected.reset_index(), ["agent_id", "budget_seconds"]
    )
    monotone = (
        points.sort_values("budget_seconds")
        .groupby(["agent_id", "task_id"])["points"]
        .apply(lambda p: bool((np.diff(p.to_numpy()) >= 0).all()))
    )
    shares = monotone.groupby("agent_id").agg(curves="size", monotone_curves="sum")
    shares["share_monotone"] = shares["monotone_curves"] / shares["curves"]
    assert_same(read_mart(built[0], "time_scaling_monotone"), shares.reset_index(), ["agent_id"])


def test_contamination_flags(built):
    rows = []
    for agent, (_, cutoff) in AGENTS.items():
        for task, (_, _, start) in TASKS.items():
            flag = None if cutoff is None or start is None else cutoff >= start
            rows.append(
                {
                    "agent_id": agent,
                    "task_id": task,
                    "knowledge_cutoff": cutoff,
                    "task_start_date": start,
                    "contaminated": flag,
                }
            )
    expected = pd.DataFrame(rows)
    actual = read_mart(built[0], "contamination_flags")
    actual["knowledge_cutoff"] = [
        None if pd.isna(d) else d.date() for d in actual["knowledge_cutoff"]
    ]
    actual["task_start_date"] = [
        None if pd.isna(d) else d.date() for d in actual["task_start_date"]
    ]
    assert_same(actual, expected, ["agent_id", "task_id"])
    flags = expected.set_index(["agent_id", "task_id"])["contaminated"]
    assert flags[("alpha", "auc")] is True and flags[("beta", "auc")] is False


# --- cost ----------------------------------------------------------------------------------


def _cost_aggregates(runs: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The cost marts' columns, recomputed with pandas (NaN = unknown, never 0)."""
    runs = runs.copy()
    runs["success"] = runs["status"] == "success"
    ok = runs[runs["success"]].sort_values(["created_at", "run_id"])
    counted = ok.groupby(SETTING, sort=False).head(N)
    known = runs[runs["cost_usd"].notna()]

    def agg(frame: pd.DataFrame, column: str, how: str) -> pd.Series:
        return frame.groupby(keys)[column].agg(how)

    out = runs.groupby(keys).agg(attempts=("run_id", "size"), successes=("success", "sum"))
    has_tokens = runs["tokens_in"].notna() | runs["tokens_out"].notna()
    out["attempts_with_tokens"] = has_tokens.groupby([runs[k] for k in keys]).sum()
    for column in ("tokens_in", "tokens_out"):
        out[f"{column}_total"] = runs.groupby(keys)[column].sum(min_count=1)
        out[f"{column}_mean"] = agg(runs, column, "mean")
    out["attempts_with_cost"] = agg(runs, "cost_usd", "count")
    out["cost_total_usd"] = runs.groupby(keys)["cost_usd"].sum(min_count=1)
    out["cost_mean_usd"] = agg(runs, "cost_usd", "mean")
    out["n_counted"] = counted.groupby(keys).size()
    out["counted_with_cost"] = agg(counted, "cost_usd", "count")
    out["counted_cost_total_usd"] = counted.groupby(keys)["cost_usd"].sum(min_count=1)
    out["counted_cost_mean_usd"] = agg(counted, "cost_usd", "mean")
    out["counted_tokens_in_mean"] = agg(counted, "tokens_in", "mean")
    out["counted_tokens_out_mean"] = agg(counted, "tokens_out", "mean")
    known_successes = known.groupby(keys)["success"].sum()
    out["cost_per_success_usd"] = out["cost_total_usd"] / known_successes.where(known_successes > 0)
    for column in ("n_counted", "counted_with_cost"):
        out[column] = out[column].fillna(0)
    return out


def _per_dollar(value: pd.Series, cost: pd.Series) -> pd.Series:
    return value / cost.where(cost > 0)


def test_setting_costs(built, runs, board):
    expected = _cost_aggregates(runs, SETTING)
    points = board.points.set_index(SETTING)["points"]
    expected["points"] = points.reindex(expected.index)
    expected["points_per_dollar"] = _per_dollar(
        expected["points"], expected["counted_cost_mean_usd"]
    )
    actual = read_mart(built[0], "setting_costs")
    assert_same(actual, expected.reset_index(), SETTING)
    rows = actual.set_index(SETTING)
    gamma, delta = rows.xs("gamma", level="agent_id"), rows.xs("delta", level="agent_id")
    assert gamma["cost_total_usd"].isna().all() and (gamma["attempts_with_cost"] == 0).all()
    assert (delta["cost_total_usd"] == 0).all() and delta["points_per_dollar"].isna().all()
    assert rows.xs("alpha", level="agent_id")["points_per_dollar"].notna().all()


def test_agent_costs(built, runs, board):
    expected = _cost_aggregates(runs, ["agent_id"])
    score = board.ranking.set_index("agent_id")["best_budget"]
    expected["score"] = score.reindex(expected.index)
    expected["points_per_dollar"] = _per_dollar(
        expected["score"], expected["counted_cost_mean_usd"]
    )
    actual = read_mart(built[0], "agent_costs")
    assert_same(actual, expected.reset_index(), ["agent_id"])
    rows = actual.set_index("agent_id")
    assert np.isnan(rows.loc["gamma", "cost_total_usd"])  # unknown, not 0
    assert np.isnan(rows.loc["gamma", "points_per_dollar"])
    assert rows.loc["delta", "cost_total_usd"] == 0 and np.isnan(
        rows.loc["delta", "points_per_dollar"]
    )
    assert np.isnan(rows.loc["epsilon", "score"]) and np.isnan(
        rows.loc["epsilon", "points_per_dollar"]
    )
    assert 0 < rows.loc["beta", "attempts_with_cost"] < rows.loc["beta", "attempts"]
    assert rows.loc["alpha", "points_per_dollar"] > 0


def test_counted_attempts(built, runs):
    ok = runs[runs["status"] == "success"].sort_values(["created_at", "run_id"])
    expected = ok.groupby(SETTING, sort=False).head(N).copy()
    expected["success_index"] = expected.groupby(SETTING).cumcount() + 1
    columns = ["run_id", *SETTING, "success_index", "score", "score_hib", "cost_usd"]
    actual = read_mart(built[0], "counted_attempts")
    assert_same(actual[columns], expected[columns], ["run_id"])


# --- bootstrap ------------------------------------------------------------------------------

MASK = np.uint64(0xFFFFFFFF)


def fmix32(h: np.ndarray) -> np.ndarray:
    """murmur3's 32-bit finalizer on uint64 values below 2^32 (as macros/bootstrap_hash.sql)."""
    h = h ^ (h >> np.uint64(16))
    h = (h * np.uint64(0x85EBCA6B)) & MASK
    h = h ^ (h >> np.uint64(13))
    h = (h * np.uint64(0xC2B2AE35)) & MASK
    return h ^ (h >> np.uint64(16))


def setting_key(agent: str, task: str, budget: int) -> int:
    return int(hashlib.md5(f"{agent}/{task}/{budget}".encode()).hexdigest()[:8], 16)


def bootstrap_scores(runs: pd.DataFrame) -> pd.DataFrame:
    counted = counted_attempts(runs[runs["agent_id"].isin(COVERED)], N)
    counted = counted.sort_values([*SETTING, "created_at", "run_id"])
    settings = counted.groupby(SETTING)["score_hib"].apply(list).sort_index()
    keys = np.array([setting_key(*s) for s in settings.index], dtype=np.uint64)
    scores = np.array(settings.tolist(), dtype=float)  # [settings, N]: all covered have N
    n_settings, n_draws = scores.shape

    seed_hash = fmix32(np.array([SEED % 2**32], dtype=np.uint64))
    replicate_hash = fmix32(seed_hash ^ np.arange(REPLICATES, dtype=np.uint64))
    setting_hash = fmix32(replicate_hash[:, None] ^ keys[None, :])
    draws = np.arange(n_draws, dtype=np.uint64)
    drawn = fmix32(setting_hash[:, :, None] ^ draws[None, None, :]) % np.uint64(n_draws)
    values = scores[np.arange(n_settings)[None, :, None], drawn.astype(np.int64)]
    medians = np.median(values, axis=2)  # [replicates, settings]

    index = settings.index.to_frame(index=False)
    long = pd.concat(
        [index.assign(replicate=r, median_score_hib=medians[r]) for r in range(REPLICATES)]
    )
    cells = long.groupby(["replicate", "task_id", "budget_seconds"])["median_score_hib"]
    low, high = cells.transform("min"), cells.transform("max")
    span = high - low
    long["points"] = np.where(
        span > 0, (long["median_score_hib"] - low) / span.where(span > 0, 1), 0.5
    )
    best = long.groupby(["replicate", "agent_id", "task_id"])["points"].max()
    primary = best.groupby(["replicate", "agent_id"]).mean().rename("score").reset_index()
    primary["rank"] = min_rank(primary["score"], primary["replicate"])
    return primary


@pytest.fixture(scope="module")
def replicates(runs) -> pd.DataFrame:
    return bootstrap_scores(runs)


def test_bootstrap_replicates_match_row_for_row(built, replicates):
    import duckdb

    with duckdb.connect(str(built[0]), read_only=True) as con:
        actual = con.sql("select replicate, agent_id, score, rank from int_bootstrap_scores").df()
    assert len(actual) == REPLICATES * len(COVERED)
    assert_same(actual, replicates, ["replicate", "agent_id"])


def test_leaderboard_uncertainty(built, board, replicates):
    grouped = replicates.groupby("agent_id")
    expected = pd.DataFrame(
        {
            "score_low": grouped["score"].quantile(0.025),
            "score_high": grouped["score"].quantile(0.975),
            "p_rank_1": grouped["rank"].apply(lambda r: (r == 1).mean()),
            "replicates": grouped.size(),
        }
    )
    expected["score"] = board.ranking.set_index("agent_id")["best_budget"]
    actual = read_mart(built[0], "leaderboard_uncertainty")
    assert_same(actual, expected.reset_index(), ["agent_id"])
    assert (actual["score_low"] < actual["score_high"]).any()  # the resampling does something

    agents = sorted(COVERED)
    probabilities = pd.DataFrame(
        [
            {
                "agent_id": agent,
                "rank": rank,
                "probability": float(
                    (replicates[replicates["agent_id"] == agent]["rank"] == rank).mean()
                ),
            }
            for agent in agents
            for rank in range(1, len(agents) + 1)
        ]
    )
    actual = read_mart(built[0], "leaderboard_rank_probabilities")
    assert_same(actual, probabilities, ["agent_id", "rank"])
    sums = actual.groupby("agent_id")["probability"].sum()
    assert np.allclose(sums, 1.0)


def test_bootstrap_is_deterministic(built, tmp_path: Path, replicates):
    """A second build of the same records (fresh file, only the bootstrap's lineage) agrees."""
    path = tmp_path / "again.duckdb"
    insert_runs(path, built[1])
    build_marts(path, select="+leaderboard_uncertainty", artifacts_dir=tmp_path / "dbt")
    first = read_mart(built[0], "leaderboard_uncertainty").sort_values("agent_id")
    second = read_mart(path, "leaderboard_uncertainty").sort_values("agent_id")
    cols = ["score_low", "score_high", "p_rank_1"]
    assert np.allclose(first[cols], second[cols], rtol=0, atol=TOL)
