"""Every mart value, recomputed independently in pandas/numpy from the same hand-made records.

The records cover: 5 agents, tasks of both metric directions, 2–3 budgets per task, every
status, settings with more than 5 successes and ties in created_at (broken by run_id), an
uncovered agent (too few successes in one setting, none at all in another, a zero median),
an agent tied with another in a cell, a cell where all covered agents score the same, and
trivial scores (TRIVIAL) that put covered agents below the anchor, leave one alone above it,
are missing (older records) or change midway (re-prepared data) — all in suite "main", whose
file also lists a setting nobody ran (so main is provisional). Suite "side" shares agents and
tasks with it (earlier attempts, other scores, an agent of its own, fault ceilings of its own
and its own N: `attempts: 3`) and suite "removed" has no
suite file (so it counts nothing; its runs stay in raw.runs): the reference computes every suite alone (ARCHITECTURE.md: a suite's marts never
include another suite's runs), from the (suite, run) pairs of int_setting_runs (which runs a
suite counts is that model's rule, tested beside it). dbt runs once for the session; the
bootstrap is recomputed with the same integer hash.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
import yaml

from runner.attempts.records import STATUSES, RunRecord
from tests.support.leaderboard_reference import (
    CELL,
    SETTING,
    agent_pass_k,
    below_trivial,
    cell_anchors,
    compute_leaderboard,
    counted_attempts,
    monotone_shares,
    pass_k,
    records_frame,
)
from tests.support.leaderboard_reference import success_rates as reference_success_rates
from tests.support.workers import shared_session_dir
from tools.dbt_in_process import run_in_process
from tools.dbt_warehouse import (
    insert_agents,
    insert_runs,
    insert_suites,
    insert_tasks,
    read_mart,
)
from tools.records import make_record as run_record
from warehouse.marts import DBT_PROJECT_DIR, UNIT_TESTS, build_marts

# integration: real dbt builds, every mart recomputed in pandas
# xdist_group: its module fixtures (dbt builds) are built once, on one worker, not on each
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("marts_crosscheck")]

TOL = 1e-9
PROJECT_VARS = yaml.safe_load((DBT_PROJECT_DIR / "dbt_project.yml").read_text())["vars"]
N = PROJECT_VARS["counted_successes"]  # the paper's N: the records' generator aims at it
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
SIDE_AGENTS = {"alpha": 0.50, "beta": 0.75, "zeta": 0.60}  # suite "side": agent → base quality
SIDE_TASKS = {"auc": (60, 300), "rmse": (60,)}  # suite "side": task → budgets
ZETA_CUTOFF = dt.date(2025, 6, 1)  # zeta runs only in "side"
COVERED = {  # suite → its covered agents
    "main": {"alpha", "beta", "gamma", "delta"},
    "side": {"alpha", "beta", "zeta"},
    "removed": set(),
}
SUITES = {"main": 3, "side": 2, "unused": 1}  # raw.suites: suite_id → harness_error_ceiling
# The records' trivial scores (raw), per suite and task; a task without one (acc in main, rmse in
# side: records older than schema 6) is normalized by the paper's rule. main's rmse anchor
# (hib -1.32, quality 0.68) leaves one covered agent above it at 60 s; its auc anchor puts beta
# below it at 60 s, and the first attempt of each auc setting lacks one (an older record), and
# the auc/900 cell was re-prepared midway (0.635 from position 4 on: the latest counted wins).
TRIVIAL = {"main": {"auc": 0.63, "rmse": 1.32}, "side": {"auc": 0.58}}
ATTEMPTS = {"main": N, "side": 3, "unused": N}  # raw.suites: suite_id → attempts, the suite's N
PROVIDER_CEILINGS = {"main": 2, "side": 3, "unused": 3}  # raw.suites: provider_error_ceiling
NEVER_RUN = ("epsilon", "acc", 300)  # listed in main's file, never run
# raw.resumptions: (run_space, run_id) of the faults resumptions forgave (each suite's folder is
# its id). main's delta/acc/60 was resumed after its 3 harness faults (not stopped any more);
# main's gamma/rmse/60 was resumed after 3 earlier ones and stopped again by 3 new ones; the
# others name runs of another folder (the same run id there is another run): they forgive nothing.
FORGIVEN = [
    *(("main", f"delta-h{i}") for i in range(3)),
    *(("main", f"gamma-h-old{i}") for i in range(3)),
    ("side", "beta-p"),
    ("main", "removed-gamma-2"),
]
FAILURES = [s for s in STATUSES if s != "success"]
KEY = ["suite_id", *SETTING]


def make_records() -> list[RunRecord]:
    rng = np.random.default_rng(7)
    records: list[RunRecord] = []
    copied: dict[tuple[str, str, int], list[float]] = {}
    for agent, (base, _) in AGENTS.items():
        for task, (direction, budgets, _) in TASKS.items():
            for budget in budgets:
                setting = (agent, task, budget)
                if setting == NEVER_RUN:
                    continue  # never ran: missing 5, zero attempts
                n_success = int(rng.integers(N, N + 4))
                if setting == ("epsilon", "rmse", 900):
                    n_success = 3  # too few: epsilon is not covered
                if setting in (("gamma", "auc", 300), ("delta", "auc", 300)):
                    n_success = N  # all counted, so the copy below has the same median
                quality = base + budget / 6000
                scores = np.round(quality + rng.normal(0, 0.03, n_success), 3).tolist()
                if (task, budget) == ("acc", 60) and agent in COVERED["main"]:
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
                    trivial = TRIVIAL["main"].get(task)
                    if task == "auc" and position == 0:
                        trivial = None
                    elif (task, budget) == ("auc", 900) and position >= 4:
                        trivial = 0.635
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
                            trivial_score=trivial,
                        )
                    )
    # epsilon/rmse/900 (3 successes) gets a 4th attempt of its own, a failure: with N = 5, its
    # pass^4 is 0 (k > c, k <= n) and its pass^5 undefined (k > n)
    records.append(
        run_record(
            "epsilon", "rmse", 900, 50, status="timeout",
            direction="minimize", run_id="epsilon-rmse-900-t",
        )
    )  # fmt: skip
    # every status appears at least once
    records.append(run_record("beta", "auc", 60, 99, status="harness_error", run_id="beta-h"))
    records.append(run_record("beta", "auc", 60, 99, status="provider_error", run_id="beta-p"))
    # provider faults up to main's provider-error ceiling (2), not the agent's failures
    records.append(run_record("beta", "auc", 60, 98, status="provider_error", run_id="beta-p2"))
    # harness faults up to a suite's harness-error ceiling (with_suites says which suite)
    for i in range(3):
        records.append(
            run_record("gamma", "rmse", 60, 100 + i, status="harness_error", run_id=f"gamma-h{i}")
        )
        records.append(  # forgiven by a resumption (FORGIVEN)
            run_record(
                "gamma", "rmse", 60, 90 + i, status="harness_error", run_id=f"gamma-h-old{i}"
            )
        )
        records.append(
            run_record("delta", "acc", 60, 100 + i, status="harness_error", run_id=f"delta-h{i}")
        )
    return records


def with_suites(records: list[RunRecord]) -> list[RunRecord]:
    """make_records' attempts in suite "main", then suite "side": alpha and beta again (their
    attempts earlier than main's, other scores), zeta of its own, and beta's harness faults up to
    side's ceiling; and suite "removed" (not in raw.suites): gamma, two successes and a fault."""
    out = [record.model_copy(update={"suite_id": "main"}) for record in records]
    rng = np.random.default_rng(8)
    for agent, base in SIDE_AGENTS.items():
        for task, budgets in SIDE_TASKS.items():
            direction = TASKS[task][0]
            for budget in budgets:
                n_success = int(rng.integers(N, N + 3))
                scores = np.round(base + budget / 6000 + rng.normal(0, 0.03, n_success), 3)
                for i, score in enumerate(scores.tolist()):
                    raw = score if direction == "maximize" else 2 - score
                    out.append(
                        run_record(
                            agent,
                            task,
                            budget,
                            minute=-60.0 + i,  # before every main attempt
                            score=raw,
                            direction=direction,
                            run_id=f"side-{agent}-{task}-{budget}-{i}",
                            suite_id="side",
                            trivial_score=TRIVIAL["side"].get(task),
                        )
                    )
    for i in range(2):
        out.append(
            run_record(
                "beta", "rmse", 60, -10 + i, status="harness_error",
                direction="minimize", run_id=f"side-beta-h{i}", suite_id="side",
            )
        )  # fmt: skip
    for i, status in enumerate(["success", "success", "harness_error"]):
        out.append(
            run_record(
                "gamma", "auc", 60, -20 + i, status=status, score=0.9,
                run_id=f"removed-gamma-{i}", suite_id="removed",
            )
        )  # fmt: skip
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


def build(root: Path) -> None:
    """The records in root/warehouse.duckdb, every mart built (dbt's unit tests aside: the
    models' SQL on fixed inputs, which tests/dbt_project/test_dbt_build.py's fresh build runs)."""
    path = root / "warehouse.duckdb"
    records = with_suites(with_costs(make_records()))
    insert_runs(path, records)
    insert_suites(path, SUITES, attempts=ATTEMPTS, provider_ceilings=PROVIDER_CEILINGS)
    with duckdb.connect(str(path)) as con:  # suite removed's file is gone; its runs stay
        con.execute("delete from raw.suites where suite_id = 'removed'")
        con.execute("delete from raw.suite_settings where suite_id = 'removed'")
        con.execute("insert into raw.suite_settings values ('main', ?, ?, ?)", list(NEVER_RUN))
        for line, (space, run_id) in enumerate(FORGIVEN, start=1):
            con.execute(
                "insert into raw.resumptions values "
                "(?, ?, ?, 'a|t|60', now(), 'test', ?, ?, 'sha', now())",
                [space, run_id, space, f"/runs/{space}/resumptions.jsonl", line],
            )
    insert_tasks(path, {t: (d, start) for t, (d, _, start) in TASKS.items()})
    insert_agents(path, {**{a: cutoff for a, (_, cutoff) in AGENTS.items()}, "zeta": ZETA_CUTOFF})
    build_marts(path, artifacts_dir=root / "dbt", exclude=UNIT_TESTS, run=run_in_process)


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[RunRecord]]:
    """The warehouse, built once, and the records it holds (the same deterministic records)."""
    root = shared_session_dir(tmp_path_factory, "crosscheck", build)
    return root / "warehouse.duckdb", with_suites(with_costs(make_records()))


@pytest.fixture(scope="module")
def members(built) -> dict[str, list[RunRecord]]:
    """suite → the records it counts (int_setting_runs' (suite_id, run_id) pairs)."""

    with duckdb.connect(str(built[0]), read_only=True) as con:
        pairs = con.sql("select suite_id, run_id from int_setting_runs").fetchall()
    by_id = {record.run_id: record for record in built[1]}
    out: dict[str, list[RunRecord]] = {}
    for suite, run_id in sorted(pairs):
        out.setdefault(suite, []).append(by_id[run_id])
    return out


@pytest.fixture(scope="module")
def runs(members) -> pd.DataFrame:
    """One row per (suite, run): the suite_id is the suite the run counts for."""
    records = [record for suite_records in members.values() for record in suite_records]
    suites = [suite for suite, suite_records in members.items() for _ in suite_records]
    return records_frame(records).assign(suite_id=suites)


@pytest.fixture(scope="module")
def suite_settings(built) -> dict[str, list[tuple[str, str, int]]]:
    """suite → the settings its file lists (raw.suite_settings)."""
    with duckdb.connect(str(built[0]), read_only=True) as con:
        rows = con.sql(
            "select suite_id, agent_id, task_id, budget_seconds from raw.suite_settings"
        ).fetchall()
    out: dict[str, list[tuple[str, str, int]]] = {}
    for suite, *setting in rows:
        out.setdefault(suite, []).append(tuple(setting))  # type: ignore[arg-type]
    return out


@pytest.fixture(scope="module")
def boards(members, suite_settings) -> dict:
    """suite → the reference computed on the suite's runs alone, with its N and its file's
    settings."""
    return {
        suite: compute_leaderboard(records, n=ATTEMPTS[suite], suite_settings=suite_settings[suite])
        for suite, records in members.items()
    }


def head_n(successes: pd.DataFrame) -> pd.DataFrame:
    """The first N successes of each setting, N being each suite's; ``successes`` sorted."""
    rank = successes.groupby(KEY, sort=False).cumcount()
    return successes[rank < successes["suite_id"].map(ATTEMPTS)]


def per_suite(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The frames of each suite in one, with their suite_id."""
    return pd.concat(
        [frame.assign(suite_id=suite) for suite, frame in frames.items() if not frame.empty],
        ignore_index=True,
    )


def by_suite(runs: pd.DataFrame):
    return runs.groupby("suite_id", sort=True)


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


def test_the_data_has_what_the_crosscheck_needs(built, runs):
    ok = runs[runs["status"] == "success"]
    per_setting = ok.groupby(KEY).size()
    assert (per_setting > N).any()
    assert set(runs["status"]) == set(STATUSES)
    assert ok.duplicated([*KEY, "created_at"]).any()  # ties in created_at
    # suites that share agents and tasks, so that mixing them would show
    assert {"main", "side"} <= set(runs["suite_id"])
    # a suite without its file counts nothing, while its runs stay in raw.runs
    assert "removed" not in set(runs["suite_id"])
    with duckdb.connect(str(built[0]), read_only=True) as con:
        kept = con.sql("select count(*) from raw.runs where run_space = 'removed'").fetchone()
    assert kept == (3,)
    agents = runs.groupby("suite_id")["agent_id"].agg(set)
    tasks = runs.groupby("suite_id")["task_id"].agg(set)
    assert {"alpha", "beta"} <= agents["main"] & agents["side"]
    assert {"auc", "rmse"} <= tasks["main"] & tasks["side"]
    assert "zeta" in agents["side"] - agents["main"]


def _settings(board) -> pd.DataFrame:
    expected = board.settings.copy()
    expected["n_counted"] = expected["n_counted"].fillna(0)
    rel = expected["iqr"] / expected["median_score"].abs()
    expected["rel_iqr"] = rel.replace([np.inf, -np.inf], np.nan)
    expected.loc[expected["median_score"] == 0, "rel_iqr"] = np.nan
    return expected


def test_setting_scores(built, boards):
    expected = per_suite({suite: _settings(board) for suite, board in boards.items()})
    assert_same(read_mart(built[0], "setting_scores"), expected, KEY)


def _coverage(runs: pd.DataFrame, suite_settings: dict) -> pd.DataFrame:
    """Per suite: every setting its file lists, with the suite's N."""
    frames = {}
    for suite, suite_runs in by_suite(runs):
        expected = pd.DataFrame(suite_settings[suite], columns=SETTING)
        counts = suite_runs.groupby(SETTING).agg(
            attempts=("run_id", "size"),
            successes=("status", lambda s: int((s == "success").sum())),
        )
        expected = expected.merge(counts.reset_index(), on=SETTING, how="left").fillna(0)
        expected["missing"] = (ATTEMPTS[suite] - expected["successes"]).clip(lower=0)
        expected["counted_successes"] = ATTEMPTS[suite]
        lacking = set(expected.loc[expected["missing"] > 0, "agent_id"])
        expected["agent_is_covered"] = ~expected["agent_id"].isin(lacking)
        frames[suite] = expected
    return per_suite(frames)


def test_coverage(built, runs, boards, suite_settings):
    expected = _coverage(runs, suite_settings)
    actual = read_mart(built[0], "coverage")
    assert_same(actual, expected, KEY)
    covered = expected[expected["agent_is_covered"]].groupby("suite_id")["agent_id"].agg(set)
    assert {suite: covered.get(suite, set()) for suite in COVERED} == COVERED
    lacking = actual[actual["missing"] > 0][[*KEY, "successes", "missing"]]
    reference = per_suite({suite: board.coverage for suite, board in boards.items()})
    assert_same(lacking, reference[[*KEY, "successes", "missing"]], KEY)
    assert lacking.set_index(KEY).loc[("main", "epsilon", "acc", 300), "missing"] == N
    # zeta never ran in main: main does not expect it (nor side's agents in main's cells)
    assert "zeta" not in set(actual.loc[actual["suite_id"] == "main", "agent_id"])


def test_normalized_scores(built, boards):
    reference = per_suite({suite: board.points for suite, board in boards.items()})
    assert reference.groupby("suite_id")["agent_id"].agg(set).to_dict() == {
        suite: agents for suite, agents in COVERED.items() if agents
    }
    points = read_mart(built[0], "normalized_scores")
    assert_same(points, reference, KEY)
    main = points[points["suite_id"] == "main"]
    cell = main[(main["task_id"] == "acc") & (main["budget_seconds"] == 60)]
    assert (cell["points"] == 0.5).all()  # all equal
    tie = main[(main["task_id"] == "auc") & (main["budget_seconds"] == 300)].set_index("agent_id")
    assert tie.loc["gamma", "points"] == tie.loc["delta", "points"]
    # the anchors do something: below-trivial agents at 0 while the paper gives them more, a
    # cell with one agent above trivial (0.5), cells without an anchor (the paper's rule)
    below = points[points["below_trivial"].eq(True)]
    assert not below.empty and (below["points"] == 0).all() and (below["points_paper"] > 0).any()
    above = points[points["below_trivial"].eq(False)].groupby(["suite_id", *CELL])["agent_id"]
    assert (above.size() == 1).any() and (above.size() > 1).any()
    paper = points[points["trivial_score_hib"].isna()]
    assert not paper.empty and (paper["points"] == paper["points_paper"]).all()
    assert (points["points"] != points["points_paper"]).any()


def test_cell_trivial_scores(built, members):
    """The anchor: the latest counted attempt's trivial score (higher-is-better) per cell; the
    re-prepared cell main auc/900 has two values and the warn-level data test names it."""
    expected = per_suite(
        {
            suite: cell_anchors(records_frame(records), ATTEMPTS.get(suite, N))
            for suite, records in members.items()
        }
    )
    with duckdb.connect(str(built[0]), read_only=True) as con:
        actual = con.sql("select * from int_cell_trivial_scores").df()
    assert_same(actual[[*expected.columns]], expected, ["suite_id", *CELL])
    two = actual[actual["n_trivial_scores"] > 1][["suite_id", *CELL]].values.tolist()
    assert two == [["main", "auc", 900]]
    assert actual.set_index(["suite_id", *CELL]).loc[("main", "auc", 900), "trivial_score"] == 0.635
    results = json.loads((built[0].parent / "dbt" / "target" / "run_results.json").read_text())
    flagged = [r for r in results["results"] if "one_trivial_score_per_cell" in r["unique_id"]]
    assert [(r["status"], r["failures"]) for r in flagged] == [("warn", 1)]


def _task_ranks(points: pd.DataFrame) -> pd.DataFrame:
    best = points.groupby(["agent_id", "task_id"])["points"].max().rename("best_points")
    best = best.reset_index()
    best["rank"] = min_rank(best["best_points"], best["task_id"])
    return best


def test_leaderboard(built, boards):
    frames = {}
    for suite, board in boards.items():
        if board.ranking.empty:
            continue
        variants = []
        for variant in ("best_budget", "all_cells", "largest_budget"):
            paper = f"{variant}_paper"
            frame = board.ranking[["agent_id", variant, paper]]
            frame = frame.rename(columns={variant: "score", paper: "score_paper"})
            frame = frame.assign(variant=variant)
            frame["rank"] = min_rank(frame["score"])
            frame["rank_paper"] = min_rank(frame["score_paper"])
            variants.append(frame)
        frames[suite] = pd.concat(variants)
    expected = per_suite(frames)
    actual = read_mart(built[0], "leaderboard")
    assert_same(actual, expected, ["suite_id", "agent_id", "variant"])
    best = actual[actual["variant"] == "best_budget"].set_index(["suite_id", "agent_id"])["rank"]
    reference = per_suite({suite: board.ranking for suite, board in boards.items()})
    assert (
        best.sort_index().tolist()
        == reference.set_index(["suite_id", "agent_id"])["rank"].sort_index().tolist()
    )


def test_task_ranks_and_rank_stability(built, boards):
    ranks = {suite: _task_ranks(board.points) for suite, board in boards.items()}
    expected = per_suite(ranks)
    assert_same(read_mart(built[0], "task_ranks"), expected, ["suite_id", "agent_id", "task_id"])
    stability = per_suite(
        {
            suite: frame.groupby("agent_id")["rank"]
            .agg(mean_rank="mean", rank_std=lambda r: r.std(ddof=1), n_tasks="size")
            .reset_index()
            for suite, frame in ranks.items()
            if not frame.empty
        }
    )
    actual = read_mart(built[0], "rank_stability")
    assert_same(actual, stability, ["suite_id", "agent_id"])
    reference = per_suite(
        {
            suite: board.ranking[["agent_id", "mean_rank", "rank_std"]]
            for suite, board in boards.items()
            if not board.ranking.empty
        }
    )
    assert_same(actual, reference, ["suite_id", "agent_id"])


def test_success_rates(built, runs):
    expected = per_suite(
        {suite: reference_success_rates(suite_runs) for suite, suite_runs in by_suite(runs)}
    )
    assert_same(read_mart(built[0], "success_rates"), expected, ["suite_id", "agent_id"])
    per_setting = pd.crosstab([runs[c] for c in KEY], runs["status"]).reindex(
        columns=list(STATUSES), fill_value=0
    )
    per_setting.columns = [f"n_{c}" for c in per_setting.columns]
    per_setting["attempts"] = per_setting.sum(axis=1)
    per_setting["agent_attempts"] = (
        per_setting["attempts"] - per_setting["n_harness_error"] - per_setting["n_provider_error"]
    )
    per_setting["successes"] = per_setting["n_success"]
    own = per_setting["agent_attempts"].replace(0, np.nan)
    per_setting["success_rate"] = per_setting["successes"] / own
    assert_same(read_mart(built[0], "setting_success_rates"), per_setting.reset_index(), KEY)


def _harness_errors(runs: pd.DataFrame) -> pd.DataFrame:
    """Per setting: harness_error and provider_error attempts, those no resumption forgave (a
    run is forgiven when FORGIVEN names its folder, the suite it counts for here, and its id),
    its suite's ceilings (NaN: the suite is not loaded) and whether the unforgiven reached them."""
    forgiven = [
        (s, r) in set(FORGIVEN) for s, r in zip(runs["suite_id"], runs["run_id"], strict=True)
    ]
    frame = runs.assign(
        harness_error=runs["status"] == "harness_error",
        provider_error=runs["status"] == "provider_error",
    )
    frame = frame.assign(
        unforgiven_harness_error=frame["harness_error"] & ~pd.Series(forgiven, frame.index),
        unforgiven_provider_error=frame["provider_error"] & ~pd.Series(forgiven, frame.index),
    )
    faults = ["harness_error", "provider_error"]
    out = frame.groupby(KEY)[[*faults, *(f"unforgiven_{f}" for f in faults)]].sum()
    out = out.rename(columns=lambda c: f"n_{c}").reset_index()
    for fault, ceilings in (("harness", SUITES), ("provider", PROVIDER_CEILINGS)):
        ceiling = out["suite_id"].map(ceilings)  # unknown suites → NaN
        out[f"{fault}_error_ceiling"] = ceiling
        reached = out[f"n_unforgiven_{fault}_error"] >= ceiling  # NaN → False
        out[f"{fault}_error_ceiling_reached"] = reached
    return out


def test_fault_ceilings(built, runs, suite_settings):
    expected = _harness_errors(runs)
    rates = read_mart(built[0], "setting_success_rates")
    assert_same(rates, expected, KEY)
    by_setting = expected.set_index(KEY)
    # resumed, then stopped again by new faults: 6 recorded, 3 unforgiven, reached
    main_gamma = by_setting.loc[("main", "gamma", "rmse", 60)]
    assert main_gamma["n_harness_error"] == 6 and main_gamma["n_unforgiven_harness_error"] == 3
    assert main_gamma["harness_error_ceiling_reached"]
    # resumed after its 3 faults: not stopped any more (n_harness_error still counts them)
    main_delta = by_setting.loc[("main", "delta", "acc", 60)]
    assert main_delta["n_harness_error"] == 3 and main_delta["n_unforgiven_harness_error"] == 0
    assert not main_delta["harness_error_ceiling_reached"]
    assert by_setting.loc[("main", "delta", "acc", 60), "harness_error_ceiling"] == SUITES["main"]
    # side's ceiling (2) applies to side's setting, main's (3) would not be reached by 2 faults
    side_beta = by_setting.loc[("side", "beta", "rmse", 60)]
    assert side_beta["n_harness_error"] == 2 and side_beta["harness_error_ceiling_reached"]
    reached = by_setting["harness_error_ceiling_reached"]
    assert reached.any() and not reached.all()
    # the provider's faults have a ceiling of their own: main's 2, reached by beta's
    main_beta = by_setting.loc[("main", "beta", "auc", 60)]
    assert main_beta["n_provider_error"] >= 2 and main_beta["provider_error_ceiling_reached"]
    assert not main_beta["harness_error_ceiling_reached"]

    # coverage: every expected setting, a never-run one with no faults; its ceiling is its suite's
    coverage = _coverage(runs, suite_settings).merge(
        expected.drop(columns=["harness_error_ceiling", "provider_error_ceiling"]),
        on=KEY,
        how="left",
    )
    for fault, ceilings in (("harness", SUITES), ("provider", PROVIDER_CEILINGS)):
        ceiling = coverage["suite_id"].map(ceilings).where(coverage["attempts"] > 0)
        coverage[f"{fault}_error_ceiling"] = ceiling
        coverage[f"n_{fault}_error"] = coverage[f"n_{fault}_error"].fillna(0)
        unforgiven = f"n_unforgiven_{fault}_error"
        coverage[unforgiven] = coverage[unforgiven].fillna(0)
        reached = coverage[f"{fault}_error_ceiling_reached"].eq(True)
        coverage[f"{fault}_error_ceiling_reached"] = reached
    actual = read_mart(built[0], "coverage")
    assert_same(actual, coverage, KEY)
    never = actual.set_index(KEY).loc[("main", "epsilon", "acc", 300)]
    assert never["n_harness_error"] == 0 and pd.isna(never["harness_error_ceiling"])


def test_run_stability(built, boards):
    frames = {}
    for suite, board in boards.items():
        settings = board.settings
        rel = (settings["iqr"] / settings["median_score"].abs()).replace([np.inf, -np.inf], np.nan)
        expected = rel.groupby(settings["agent_id"]).agg(rel_iqr="median", n_settings="count")
        expected = expected.reset_index()
        expected["is_covered"] = expected["agent_id"].isin(COVERED[suite])
        frames[suite] = expected
    actual = read_mart(built[0], "run_stability")
    assert_same(actual, per_suite(frames), ["suite_id", "agent_id"])
    assert_same(
        actual[actual["is_covered"]][["suite_id", "agent_id", "rel_iqr"]],
        per_suite(
            {
                suite: board.ranking[["agent_id", "rel_iqr"]]
                for suite, board in boards.items()
                if not board.ranking.empty
            }
        ),
        ["suite_id", "agent_id"],
    )


def test_pass_k(built, runs, boards):
    """pass^k and the expected worst points per (setting, k) and their means per (agent, k),
    every suite with its own N (main 5, side 3): settings with failures, with k above their
    successes and above their own attempts, and an agent the leaderboard does not rank are all
    in the data (checked below, so the comparison cannot pass on a corner the data lacks); a
    cell nobody normalized (points null) is setting_pass_k's dbt unit test."""
    settings = per_suite(
        {
            suite: pass_k(suite_runs, boards[suite], ATTEMPTS[suite])
            for suite, suite_runs in by_suite(runs)
        }
    )
    actual = read_mart(built[0], "setting_pass_k")
    assert_same(actual, settings, [*KEY, "k"])
    assert (settings["pass_k"].eq(0) & settings["successes"].gt(0)).any()  # k > c > 0
    assert (settings["pass_k"].isna() & settings["agent_attempts"].gt(0)).any()  # k > n > 0
    assert settings["pass_k"].between(0, 1, inclusive="neither").any()  # failures
    assert settings["expected_worst_points"].between(0, 1, inclusive="neither").any()
    # a cell's scale places the attempts of an agent it does not rank (epsilon) too
    assert settings.loc[settings["agent_id"].eq("epsilon"), "expected_worst_points"].notna().any()
    agents = per_suite(
        {
            suite: agent_pass_k(suite_settings.drop(columns="suite_id"))
            for suite, suite_settings in settings.groupby("suite_id")
        }
    )
    assert_same(read_mart(built[0], "agent_pass_k"), agents, ["suite_id", "agent_id", "k"])


def test_time_scaling(built, boards):
    scaling, shares, on_points = {}, {}, {}
    for suite, board in boards.items():
        points = board.points
        if points.empty:
            continue
        scaling[suite] = (
            points.groupby(["agent_id", "budget_seconds"])["points"]
            .agg(mean_points="mean", n_tasks="size")
            .reset_index()
        )
        shares[suite] = monotone_shares(points)
        on_points[suite] = monotone_shares(points.assign(median_score_hib=points["points"]))
    # the records tell the agent's own medians from its points: a mart on the points would differ
    assert not per_suite(shares).equals(per_suite(on_points))
    assert_same(
        read_mart(built[0], "time_scaling"),
        per_suite(scaling),
        ["suite_id", "agent_id", "budget_seconds"],
    )
    assert_same(
        read_mart(built[0], "time_scaling_monotone"), per_suite(shares), ["suite_id", "agent_id"]
    )


def test_contamination_flags(built, runs):
    cutoffs = {**{a: cutoff for a, (_, cutoff) in AGENTS.items()}, "zeta": ZETA_CUTOFF}
    rows = []
    for suite, suite_runs in by_suite(runs):
        for agent in sorted(set(suite_runs["agent_id"])):
            for task in sorted(set(suite_runs["task_id"])):
                cutoff, start = cutoffs[agent], TASKS[task][2]
                flag = None if cutoff is None or start is None else cutoff >= start
                rows.append(
                    {
                        "suite_id": suite,
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
    assert_same(actual, expected, ["suite_id", "agent_id", "task_id"])
    flags = expected.set_index(["suite_id", "agent_id", "task_id"])["contaminated"]
    assert flags[("main", "alpha", "auc")] is True and flags[("main", "beta", "auc")] is False
    assert ("side", "zeta", "rmse") in flags.index and ("main", "zeta", "auc") not in flags.index


# --- cost ----------------------------------------------------------------------------------


def _cost_aggregates(runs: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The cost marts' columns, recomputed with pandas (NaN = unknown, never 0)."""
    runs = runs.copy()
    runs["success"] = runs["status"] == "success"
    ok = runs[runs["success"]].sort_values(["created_at", "run_id"])
    counted = head_n(ok)
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


def _points(boards) -> pd.Series:
    return per_suite({suite: board.points for suite, board in boards.items()}).set_index(KEY)[
        "points"
    ]


def test_setting_costs(built, runs, boards):
    expected = _cost_aggregates(runs, KEY)
    expected["points"] = _points(boards).reindex(expected.index)
    expected["points_per_dollar"] = _per_dollar(
        expected["points"], expected["counted_cost_mean_usd"]
    )
    actual = read_mart(built[0], "setting_costs")
    assert_same(actual, expected.reset_index(), KEY)
    rows = actual[actual["suite_id"] == "main"].set_index(SETTING)
    gamma, delta = rows.xs("gamma", level="agent_id"), rows.xs("delta", level="agent_id")
    assert gamma["cost_total_usd"].isna().all() and (gamma["attempts_with_cost"] == 0).all()
    assert (delta["cost_total_usd"] == 0).all() and delta["points_per_dollar"].isna().all()
    assert rows.xs("alpha", level="agent_id")["points_per_dollar"].notna().all()


def test_agent_costs(built, runs, boards):
    keys = ["suite_id", "agent_id"]
    expected = _cost_aggregates(runs, keys)
    ranking = per_suite({suite: board.ranking for suite, board in boards.items()})
    expected["score"] = ranking.set_index(keys)["best_budget"].reindex(expected.index)
    expected["points_per_dollar"] = _per_dollar(
        expected["score"], expected["counted_cost_mean_usd"]
    )
    actual = read_mart(built[0], "agent_costs")
    assert_same(actual, expected.reset_index(), keys)
    rows = actual[actual["suite_id"] == "main"].set_index("agent_id")
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
    expected = head_n(ok).copy()
    expected["success_index"] = expected.groupby(KEY).cumcount() + 1
    columns = ["suite_id", "run_id", *SETTING, "success_index", "score", "score_hib", "cost_usd"]
    actual = read_mart(built[0], "counted_attempts")
    assert_same(actual[columns], expected[columns], ["suite_id", "run_id"])
    # side's earlier attempts of alpha never take main's first-N slots
    main_alpha = actual[(actual["suite_id"] == "main") & (actual["agent_id"] == "alpha")]
    assert not main_alpha["run_id"].str.startswith("side-").any()


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


def bootstrap_scores(runs: pd.DataFrame, covered: set[str], n: int) -> pd.DataFrame:
    """One suite's replicates: its covered settings resampled with the same hash chain (the
    setting key is agent/task/budget, without the suite), then the primary points (anchored at
    the cells' trivial scores, which come from every agent's counted attempts)."""
    anchors = cell_anchors(runs, n)
    counted = counted_attempts(runs[runs["agent_id"].isin(covered)], n)
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
    long = long.merge(anchors, on=CELL, how="left")
    anchor = long["trivial_score_hib"]
    beats = ~below_trivial(long["median_score_hib"], anchor)
    scaled = long["median_score_hib"].where(beats)
    cells = scaled.groupby([long["replicate"], long["task_id"], long["budget_seconds"]])
    low, high = cells.transform("min"), cells.transform("max")
    span = high - low
    long["points"] = np.where(
        beats, np.where(span > 0, (scaled - low) / span.where(span > 0, 1), 0.5), 0.0
    )
    best = long.groupby(["replicate", "agent_id", "task_id"])["points"].max()
    primary = best.groupby(["replicate", "agent_id"]).mean().rename("score").reset_index()
    primary["rank"] = min_rank(primary["score"], primary["replicate"])
    return primary


@pytest.fixture(scope="module")
def replicates(runs) -> pd.DataFrame:
    return per_suite(
        {
            suite: bootstrap_scores(suite_runs, COVERED[suite], ATTEMPTS[suite])
            for suite, suite_runs in by_suite(runs)
            if COVERED[suite]
        }
    )


def test_bootstrap_replicates_match_row_for_row(built, replicates):

    with duckdb.connect(str(built[0]), read_only=True) as con:
        actual = con.sql(
            "select suite_id, replicate, agent_id, score, rank from int_bootstrap_scores"
        ).df()
    assert len(actual) == REPLICATES * sum(len(agents) for agents in COVERED.values())
    assert_same(actual, replicates, ["suite_id", "replicate", "agent_id"])


def test_leaderboard_uncertainty(built, boards, replicates):
    keys = ["suite_id", "agent_id"]
    grouped = replicates.groupby(keys)
    expected = pd.DataFrame(
        {
            "score_low": grouped["score"].quantile(0.025),
            "score_high": grouped["score"].quantile(0.975),
            "p_rank_1": grouped["rank"].apply(lambda r: (r == 1).mean()),
            "replicates": grouped.size(),
        }
    )
    ranking = per_suite({suite: board.ranking for suite, board in boards.items()})
    expected["score"] = ranking.set_index(keys)["best_budget"]
    actual = read_mart(built[0], "leaderboard_uncertainty")
    assert_same(actual, expected.reset_index(), keys)
    assert (actual["score_low"] < actual["score_high"]).any()  # the resampling does something

    rows = []
    for suite, agents in COVERED.items():
        suite_replicates = replicates[replicates["suite_id"] == suite]
        for agent in sorted(agents):
            ranks = suite_replicates[suite_replicates["agent_id"] == agent]["rank"]
            for rank in range(1, len(agents) + 1):
                rows.append(
                    {
                        "suite_id": suite,
                        "agent_id": agent,
                        "rank": rank,
                        "probability": float((ranks == rank).mean()),
                    }
                )
    actual = read_mart(built[0], "leaderboard_rank_probabilities")
    assert_same(actual, pd.DataFrame(rows), ["suite_id", "agent_id", "rank"])
    sums = actual.groupby(keys)["probability"].sum()
    assert np.allclose(sums, 1.0)


def test_bootstrap_is_deterministic(built, tmp_path: Path, replicates):
    """A second build of the same records (fresh file, only the bootstrap's lineage) agrees."""
    path = tmp_path / "warehouse.duckdb"
    insert_runs(path, built[1])
    insert_suites(path, SUITES, attempts=ATTEMPTS, provider_ceilings=PROVIDER_CEILINGS)
    build_marts(
        path,
        select="+leaderboard_uncertainty",
        artifacts_dir=tmp_path / "dbt",
        exclude=UNIT_TESTS,
        run=run_in_process,
    )
    order = ["suite_id", "agent_id"]
    first = read_mart(built[0], "leaderboard_uncertainty").sort_values(order)
    second = read_mart(path, "leaderboard_uncertainty").sort_values(order)
    cols = ["score_low", "score_high", "p_rank_1"]
    assert first[order].values.tolist() == second[order].values.tolist()
    assert np.allclose(first[cols], second[cols], rtol=0, atol=TOL)


def test_each_suite_counts_its_own_n(built):
    """side's file says `attempts: 3`: its settings count 3 successes and its agents are ranked
    with 3 (the paper's 5 would count more); main's count 5."""
    counted = read_mart(built[0], "counted_attempts")
    most = counted.groupby("suite_id")["success_index"].max().to_dict()
    assert most == {"main": N, "side": 3}
    scores = read_mart(built[0], "setting_scores").groupby("suite_id")["n_counted"].max()
    assert scores["side"] == 3
    ranked = read_mart(built[0], "leaderboard").groupby("suite_id")["agent_id"].agg(set)
    assert ranked["side"] == COVERED["side"]


def test_suite_status(built, boards):
    """main lists a setting nobody ran (and epsilon lacks successes): provisional; side is
    complete; unused lists nothing. The rank probabilities and intervals say so."""
    status = read_mart(built[0], "suite_status").set_index("suite_id")
    for suite, board in boards.items():
        row = status.loc[suite]
        assert (row["settings_complete"], row["settings_expected"]) == (
            board.settings_complete,
            board.settings_expected,
        )
        assert row["provisional"] == board.provisional
        assert row["counted_successes"] == ATTEMPTS[suite]
        assert row["agents_ranked"] == len(COVERED[suite])
    assert status.loc["main", "provisional"] and not status.loc["side", "provisional"]
    assert status.loc["main", "agents_expected"] - status.loc["main", "agents_ranked"] == 1
    assert (
        not status.loc["unused", "provisional"] and status.loc["unused", "settings_expected"] == 0
    )
    for mart in ("leaderboard_uncertainty", "leaderboard_rank_probabilities"):
        rows = read_mart(built[0], mart)
        flags = rows.groupby("suite_id")[["provisional", "unranked_agents"]].max()
        assert flags.loc["main"].tolist() == [True, 1] and flags.loc["side"].tolist() == [False, 0]
