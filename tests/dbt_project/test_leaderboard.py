"""The benchmark's rules on hand-made records, with every expected number worked out by hand."""

from __future__ import annotations

import itertools
import math

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.leaderboard_reference import (
    compute_leaderboard,
    expected_min,
    normalize,
    pass_hat_k,
)
from tools.records import make_record as rec


def test_setting_median_counts_only_the_first_n_successes():
    records = [
        rec("a", "t", 60, 0, score=0.1),
        rec("a", "t", 60, 1, status="timeout"),
        rec("a", "t", 60, 2, score=0.3),
        rec("a", "t", 60, 3, score=0.2),
        rec("a", "t", 60, 9, score=0.99),  # 4th success, later: not counted with n=3
    ]
    board = compute_leaderboard(records, n=3)
    row = board.settings.iloc[0]
    assert row["median_score"] == pytest.approx(0.2)
    assert row["n_counted"] == 3 and row["attempts"] == 5 and row["successes"] == 4
    assert row["q1"] == pytest.approx(0.15) and row["q3"] == pytest.approx(0.25)
    assert row["iqr"] == pytest.approx(0.1)


def test_ties_in_created_at_are_broken_by_run_id():
    records = [
        rec("a", "t", 60, 0, score=0.9, run_id="b-run"),
        rec("a", "t", 60, 0, score=0.1, run_id="a-run"),
    ]
    board = compute_leaderboard(records, n=1)
    assert board.settings.iloc[0]["median_score"] == pytest.approx(0.1)


def test_normalization_flips_lower_is_better_and_scales_min_max():
    records = []
    for minute, (agent, rmse) in enumerate([("good", 1.0), ("mid", 2.0), ("bad", 5.0)]):
        records.append(rec(agent, "reg", 60, minute, score=rmse, direction="minimize"))
    board = compute_leaderboard(records, n=1)
    points = board.points.set_index("agent_id")["points"]
    assert points["good"] == pytest.approx(1.0)
    assert points["bad"] == pytest.approx(0.0)
    assert points["mid"] == pytest.approx(0.75)


def test_all_equal_cell_gives_half_points():
    records = [rec("a", "t", 60, 0, score=0.7), rec("b", "t", 60, 1, score=0.7)]
    board = compute_leaderboard(records, n=1)
    assert board.points["points"].tolist() == [0.5, 0.5]


def test_primary_score_is_best_budget_per_task_then_mean_and_ranks_share_ties():
    records = [
        # task t1: a wins at 60 s, b wins at 120 s
        rec("a", "t1", 60, 0, score=0.9),
        rec("b", "t1", 60, 1, score=0.5),
        rec("a", "t1", 120, 2, score=0.6),
        rec("b", "t1", 120, 3, score=0.8),
        # task t2: a wins both budgets
        rec("a", "t2", 60, 4, score=0.9),
        rec("b", "t2", 60, 5, score=0.1),
        rec("a", "t2", 120, 6, score=0.9),
        rec("b", "t2", 120, 7, score=0.1),
    ]
    board = compute_leaderboard(records, n=1)
    ranking = board.ranking.set_index("agent_id")
    assert ranking.loc["a", "best_budget"] == pytest.approx(1.0)  # best of (1, 0) on t1, 1 on t2
    assert ranking.loc["b", "best_budget"] == pytest.approx(0.5)  # best of (0, 1) on t1, 0 on t2
    assert ranking.loc["a", "all_cells"] == pytest.approx(0.75)
    assert ranking.loc["b", "largest_budget"] == pytest.approx(0.5)
    # per-task ranks: t1 both best-points 1 → both rank 1 (min method); t2 a=1, b=2
    assert ranking.loc["a", "mean_rank"] == pytest.approx(1.0)
    assert ranking.loc["b", "mean_rank"] == pytest.approx(1.5)
    assert ranking.loc["b", "rank_std"] == pytest.approx(math.sqrt(0.5))  # sample std of (1, 2)
    assert ranking.loc["a", "rank"] == 1 and ranking.loc["b", "rank"] == 2


def test_agents_without_full_coverage_are_listed_not_ranked():
    records = [
        rec("a", "t", 60, 0, score=0.9),
        rec("a", "t", 60, 1, score=0.8),
        rec("b", "t", 60, 2, score=0.7),
        rec("b", "t", 60, 3, status="runtime_error"),
    ]
    board = compute_leaderboard(records, n=2)
    assert board.ranking["agent_id"].tolist() == ["a"]
    missing = board.coverage.set_index("agent_id")
    assert missing.loc["b", "missing"] == 1 and missing.loc["b", "successes"] == 1


def test_success_rate_counts_every_attempt_and_each_status():
    records = [
        rec("a", "t", 60, 0, score=0.9),
        rec("a", "t", 60, 1, status="timeout"),
        rec("a", "t", 120, 2, status="invalid_submission"),
        rec("a", "t", 120, 3, score=0.5),
    ]
    rates = compute_leaderboard(records, n=1).success.set_index("agent_id")
    assert rates.loc["a", "attempts"] == 4 and rates.loc["a", "success_rate"] == pytest.approx(0.5)
    assert rates.loc["a", "n_timeout"] == 1 and rates.loc["a", "n_invalid_submission"] == 1
    assert rates.loc["a", "n_harness_error"] == 0


def test_run_to_run_stability_is_the_median_relative_iqr():
    records = [rec("a", "t", 60, i, score=s) for i, s in enumerate([1.0, 2.0, 3.0])]
    records += [rec("a", "t", 120, 10 + i, score=s) for i, s in enumerate([4.0, 4.0, 4.0])]
    ranking = compute_leaderboard(records, n=3).ranking.set_index("agent_id")
    # setting 60: iqr 1.0 / median 2.0 = 0.5; setting 120: 0 → median over settings 0.25
    assert ranking.loc["a", "rel_iqr"] == pytest.approx(0.25)


def test_points_are_anchored_at_the_trivial_score_and_the_paper_points_kept():
    # RMSE, trivial 3.0: a 1, b 2 beat it; z's absurd 5.3e152 is far below it
    records = [
        rec("a", "reg", 60, 0, score=1.0, direction="minimize", trivial_score=3.0),
        rec("b", "reg", 60, 1, score=2.0, direction="minimize", trivial_score=3.0),
        rec("z", "reg", 60, 2, score=5.3e152, direction="minimize", trivial_score=3.0),
    ]
    points = compute_leaderboard(records, n=1).points.set_index("agent_id")
    assert points["points"].to_dict() == {"a": 1.0, "b": 0.0, "z": 0.0}
    assert points["points_paper"].to_dict() == {"a": 1.0, "b": 1.0, "z": 0.0}  # z flattens it
    assert points["below_trivial"].to_dict() == {"a": False, "b": False, "z": True}
    assert (points["trivial_score_hib"] == -3.0).all()


def test_the_latest_counted_attempt_sets_the_anchor_and_older_records_fall_back():
    records = [
        rec("a", "t", 60, 0, score=0.9, trivial_score=0.5),
        rec("b", "t", 60, 1, score=0.7, trivial_score=0.75),  # re-prepared: the latest counts
        rec("c", "t", 60, 2, score=0.6),  # an older record without one
        rec("a", "t", 120, 0, score=1.0),
        rec("b", "t", 120, 1, score=0.75),
        rec("c", "t", 120, 2, score=0.5),
    ]
    points = compute_leaderboard(records, n=1).points.set_index(["budget_seconds", "agent_id"])
    assert points.loc[60, "points"].to_dict() == {"a": 0.5, "b": 0.0, "c": 0.0}  # a alone
    assert points.loc[120, "points"].to_dict() == {"a": 1.0, "b": 0.5, "c": 0.0}  # paper rule
    assert points.loc[120, "below_trivial"].tolist() == [None, None, None]


# 100 generated cells per run: 1-5 agents at or above a trivial score, 1-3 more below it.
@settings(max_examples=100, deadline=None)
@given(
    trivial=st.floats(-100, 100),
    above=st.lists(st.floats(0, 1e3), min_size=1, max_size=5),
    below=st.lists(st.floats(1e-6, 1e154), min_size=1, max_size=3),
)
def test_agents_worse_than_trivial_move_no_other_agents_points(trivial, above, below):
    anchors = pd.DataFrame(
        {"task_id": ["t"], "budget_seconds": [60], "trivial_score_hib": [trivial]}
    )

    def points(medians: list[float]) -> pd.DataFrame:
        settings = pd.DataFrame(
            {
                "agent_id": [f"a{i}" for i in range(len(medians))],
                "task_id": "t",
                "budget_seconds": 60,
                "median_score_hib": medians,
            }
        )
        return normalize(settings, anchors).set_index("agent_id")

    alone = points([trivial + m for m in above])
    # none worse than it (an agent at it, as the constant baseline, included): the paper's
    assert alone["points"].tolist() == alone["points_paper"].tolist()
    worse = points([trivial + m for m in above] + [trivial - m for m in below])
    assert worse["points"].loc[alone.index].tolist() == alone["points"].tolist()
    assert (worse["points"].drop(alone.index) == 0.0).all()


def test_provider_faults_are_not_the_agents_attempts():
    records = [
        rec("a", "t", 60, 0, score=0.9),
        rec("a", "t", 60, 1, status="timeout"),
        rec("a", "t", 60, 2, status="provider_error"),
        rec("a", "t", 60, 3, status="harness_error"),
    ]
    rates = compute_leaderboard(records, n=1).success.set_index("agent_id")
    assert rates.loc["a", "attempts"] == 4 and rates.loc["a", "agent_attempts"] == 2
    assert rates.loc["a", "success_rate"] == pytest.approx(0.5)  # not 1/4, not 1/3
    assert rates.loc["a", "n_provider_error"] == 1


def test_a_partial_suite_file_is_provisional_and_ranks_no_incomplete_agent():
    """tml-v1 run 1 setting of 36: the settings seen would make baseline-constant rank 1 with
    "1/1"; the suite file's settings leave it unranked, the suite provisional (1 of 4 here)."""
    records = [rec("const", "t", 60, i, score=0.5) for i in range(2)]
    suite = [(agent, "t", budget) for agent in ("const", "gbm") for budget in (60, 600)]
    board = compute_leaderboard(records, n=2, suite_settings=suite)
    assert board.ranking.empty and board.provisional
    assert (board.settings_complete, board.settings_expected) == (1, 4)
    seen = compute_leaderboard(records, n=2)  # an import's rule: the settings seen
    assert not seen.provisional and seen.ranking["agent_id"].tolist() == ["const"]


# 200 generated settings: up to 9 attempts, each a failure (None, worth 0 points) or points
@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(st.none(), st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0])), min_size=1, max_size=9
    )
)
def test_pass_k_and_expected_min_equal_the_enumeration_of_every_k_subset(attempts):
    """The reference's closed forms (which the marts are cross-checked against) equal the mean
    over every k-subset of the attempts, enumerated: the share whose attempts all succeeded
    (pass^k) and the mean of their minimum points (a failure 0)."""
    n, c = len(attempts), sum(a is not None for a in attempts)
    points = [0.0 if a is None else a for a in attempts]
    for k in range(1, n + 1):
        subsets = list(itertools.combinations(range(n), k))
        all_succeed = sum(all(attempts[i] is not None for i in s) for s in subsets)
        assert pass_hat_k(n, c, k) == pytest.approx(all_succeed / len(subsets), abs=1e-12)
        worst = sum(min(points[i] for i in s) for s in subsets) / len(subsets)
        assert expected_min(points, k) == pytest.approx(worst, abs=1e-12)
