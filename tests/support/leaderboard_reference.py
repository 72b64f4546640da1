"""The benchmark's rules recomputed in pandas: the reference the dbt marts are checked against.

The marts (dbt_project/) are the one home of the rules; everything tmlbench shows reads them.
This independent recomputation exists only so the tests can cross-check the marts
(tests/dbt_project/test_marts_crosscheck.py) and pin each rule on hand-made records
(tests/dbt_project/test_leaderboard.py). Rules (ARCHITECTURE.md, "Benchmark rules"):
- a setting (agent, task, budget) scores the median of its first N successes by created_at, run_id,
  N being the suite's (its file's `attempts`; the paper's 5 for an import);
- the expected settings are the suite file's (an import's: every agent seen × every cell seen);
  an agent is ranked only with ≥ N successes in every setting the suite expects of it, and the
  suite is provisional while any expected setting lacks successes (k of n settings complete);
- success rate: successes ÷ the agent's own attempts: harness_error and provider_error are not
  the agent's;
- per (task, budget) cell, the primary points are anchored at the trivial prediction's score (the
  records' trivial_score, higher-is-better, of the latest counted attempt that carries one): a
  ranked agent whose higher-is-better median is below it (beyond a relative tolerance) gets 0,
  those at or above it are min-max scaled among themselves (best 1, worst 0, all equal 0.5); a
  cell without one, and the paper's points everywhere (points_paper), min-max scale over every
  ranked agent;
- primary score: per task the best budget's points, then the mean over tasks (the same on the
  paper's points: the *_paper variants);
- reliability under repetition (``pass_k``), per setting and k = 1..N over the agent's own
  attempts (n, of which c succeeded): τ-bench's pass^k = C(c, k) / C(n, k), and the expected
  worst points of k attempts drawn without replacement (each attempt placed on its cell's
  primary scale, a failure 0), from the order statistics; both undefined for k > n.
- an (agent, task) curve is monotone when the agent's own higher-is-better median never gets
  worse as the budget grows (equal is not worse, one budget is monotone): not the points, which
  move with the other agents of the cell.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from math import comb

import numpy as np
import pandas as pd

from runner.attempts.records import STATUSES, RunRecord

SETTING = ["agent_id", "task_id", "budget_seconds"]
CELL = ["task_id", "budget_seconds"]
TRIVIAL_TOLERANCE = 1e-9  # dbt_project.yml's trivial_tolerance: float noise is not below the anchor
VARIANTS = ("best_budget", "all_cells", "largest_budget")


@dataclass(frozen=True)
class Leaderboard:
    settings: pd.DataFrame  # one row per setting: medians, IQR, counts
    points: pd.DataFrame  # one row per ranked setting: normalized points
    ranking: pd.DataFrame  # one row per ranked agent: the three variants, ranks, reliability
    coverage: pd.DataFrame  # one row per setting lacking successes
    success: pd.DataFrame  # one row per agent: attempts and counts per status
    settings_expected: int  # n: the settings the suite expects
    settings_complete: int  # k: those with N successes

    @property
    def provisional(self) -> bool:
        """Some expected setting still lacks successes: the ranking may change."""
        return self.settings_complete < self.settings_expected


def records_frame(records: Iterable[RunRecord]) -> pd.DataFrame:
    frame = pd.DataFrame([r.model_dump() for r in records])
    if frame.empty:
        return pd.DataFrame(columns=[*RunRecord.model_fields])
    return frame


def counted_attempts(runs: pd.DataFrame, n: int) -> pd.DataFrame:
    """The first ``n`` successes of each setting, ordered by created_at then run_id."""
    ok = runs[runs["status"] == "success"].sort_values(["created_at", "run_id"])
    return ok.groupby(SETTING, sort=False).head(n)


def setting_scores(runs: pd.DataFrame, n: int) -> pd.DataFrame:
    counted = counted_attempts(runs, n)
    stats = counted.groupby(SETTING).agg(
        median_score=("score", "median"),
        median_score_hib=("score_hib", "median"),
        q1=("score", lambda s: s.quantile(0.25)),
        q3=("score", lambda s: s.quantile(0.75)),
        min_score=("score", "min"),
        max_score=("score", "max"),
        n_counted=("score", "size"),
    )
    stats["iqr"] = stats["q3"] - stats["q1"]
    counts = runs.groupby(SETTING).agg(
        attempts=("run_id", "size"), successes=("status", lambda s: int((s == "success").sum()))
    )
    return counts.join(stats, how="left").reset_index()


def cell_anchors(runs: pd.DataFrame, n: int) -> pd.DataFrame:
    """Per (task, budget) cell: the higher-is-better trivial score of the latest counted attempt
    (created_at, then run_id; any agent) that carries one. Cells without one have no row."""
    counted = counted_attempts(runs, n)
    known = counted[counted["trivial_score"].notna()].sort_values(["created_at", "run_id"])
    latest = known.groupby(CELL, sort=False).tail(1)
    sign = np.where(latest["metric_direction"] == "maximize", 1.0, -1.0)
    hib = sign * latest["trivial_score"].astype(float)
    return latest.assign(trivial_score_hib=hib)[[*CELL, "trivial_score_hib"]]


def _min_max(frame: pd.DataFrame, values: pd.Series) -> np.ndarray:
    """Min-max within each cell over the non-null ``values``: best 1, worst 0, all equal 0.5."""
    cells = values.groupby([frame[c] for c in CELL])
    low, high = cells.transform("min"), cells.transform("max")
    span = high - low
    return np.where(span > 0, (values - low) / span.where(span > 0, 1), 0.5)


def normalize(settings: pd.DataFrame, anchors: pd.DataFrame | None = None) -> pd.DataFrame:
    """The points of each setting within its (task, budget) cell: primary (anchored at the
    cell's trivial score, if any) and the paper's (min-max over every setting of the cell)."""
    if anchors is None:
        anchors = pd.DataFrame(columns=[*CELL, "trivial_score_hib"])
    frame = settings.merge(anchors, on=CELL, how="left").reset_index(drop=True)
    value = frame["median_score_hib"].astype(float)
    anchor = frame["trivial_score_hib"].astype(float)
    below = below_trivial(value, anchor)
    takes_part = ~below
    points = np.where(takes_part, _min_max(frame, value.where(takes_part)), 0.0)
    frame = frame.assign(
        points=points,
        points_paper=_min_max(frame, value),
        below_trivial=below.astype(object).where(anchor.notna(), None),
        trivial_score_hib=anchor,
    )
    medians = ["median_score_hib", "trivial_score_hib", "below_trivial"]
    return frame[[*SETTING, *medians, "points", "points_paper"]]


def monotone_shares(points: pd.DataFrame) -> pd.DataFrame:
    """Per agent: its (agent, task) curves, those whose own higher-is-better median never gets
    worse as the budget grows (ties are not worse; a missing median is), and their share."""

    def never_worse(medians: pd.Series) -> bool:
        values = medians.to_numpy(dtype=float)
        return bool((values[1:] >= values[:-1]).all())  # NaN compares False

    curves = (
        points.sort_values("budget_seconds")
        .groupby(["agent_id", "task_id"])["median_score_hib"]
        .apply(never_worse)
    )
    shares = curves.groupby("agent_id").agg(curves="size", monotone_curves="sum")
    shares["share_monotone"] = shares["monotone_curves"] / shares["curves"]
    return shares.reset_index()


def below_trivial(value: pd.Series, anchor: pd.Series) -> pd.Series:
    """Worse than the trivial score beyond float noise (False without one)."""
    return value < anchor - TRIVIAL_TOLERANCE * np.maximum(1.0, anchor.abs())


def compute_leaderboard(
    records: Iterable[RunRecord],
    n: int = 5,
    suite_settings: Iterable[tuple[str, str, int]] | None = None,
) -> Leaderboard:
    runs = records_frame(records)
    settings = setting_scores(runs, n) if not runs.empty else pd.DataFrame(columns=[*SETTING])
    expected = _expected_settings(runs, suite_settings)
    coverage = expected.merge(settings[[*SETTING, "successes"]], on=SETTING, how="left")
    coverage["successes"] = coverage["successes"].fillna(0).astype(int)
    coverage["missing"] = (n - coverage["successes"]).clip(lower=0)
    covered_agents = set(coverage["agent_id"]) - set(
        coverage.loc[coverage["missing"] > 0, "agent_id"]
    )
    ranked = settings[settings["agent_id"].isin(covered_agents)]
    points = (
        normalize(ranked, cell_anchors(runs, n))
        if not ranked.empty
        else pd.DataFrame(columns=[*SETTING, "points", "points_paper"])
    )
    ranking = _ranking(points, runs, settings, covered_agents)
    return Leaderboard(
        settings=settings,
        points=points,
        ranking=ranking,
        coverage=coverage[coverage["missing"] > 0].reset_index(drop=True),
        success=success_rates(runs),
        settings_expected=len(coverage),
        settings_complete=int((coverage["missing"] == 0).sum()),
    )


def success_rates(runs: pd.DataFrame) -> pd.DataFrame:
    counts = pd.crosstab(runs["agent_id"], runs["status"]).reindex(
        columns=list(STATUSES), fill_value=0
    )
    counts.columns = [f"n_{c}" for c in counts.columns]
    counts.insert(0, "attempts", counts.sum(axis=1))
    # Harness and provider faults are never blamed on the agent: not its attempts, not in the rate.
    own = counts["attempts"] - counts["n_harness_error"] - counts["n_provider_error"]
    counts.insert(1, "agent_attempts", own)
    counts.insert(2, "successes", counts["n_success"])
    counts.insert(
        3, "success_rate", counts["successes"] / counts["agent_attempts"].replace(0, float("nan"))
    )
    return counts.reset_index()


def _expected_settings(runs: pd.DataFrame, suite_settings) -> pd.DataFrame:
    if suite_settings is not None:
        return pd.DataFrame(list(suite_settings), columns=SETTING).drop_duplicates()
    # Without a suite file (an import): every agent in every (task, budget) cell seen in the records.
    cells = runs[["task_id", "budget_seconds"]].drop_duplicates()
    agents = runs[["agent_id"]].drop_duplicates()
    return agents.merge(cells, how="cross")[SETTING]


def _ranking(
    points: pd.DataFrame, runs: pd.DataFrame, settings: pd.DataFrame, agents: set
) -> pd.DataFrame:
    if points.empty:
        return pd.DataFrame(
            columns=["rank", "agent_id", *VARIANTS, *(f"{v}_paper" for v in VARIANTS)]
        )
    best = (
        points.groupby(["agent_id", "task_id"])["points"].max().rename("best_points").reset_index()
    )
    largest = points[points["budget_seconds"] == points["budget_seconds"].max()]
    table = pd.DataFrame(
        {
            "best_budget": best.groupby("agent_id")["best_points"].mean(),
            "all_cells": points.groupby("agent_id")["points"].mean(),
            "largest_budget": largest.groupby("agent_id")["points"].mean(),
            "best_budget_paper": points.groupby(["agent_id", "task_id"])["points_paper"]
            .max()
            .groupby("agent_id")
            .mean(),
            "all_cells_paper": points.groupby("agent_id")["points_paper"].mean(),
            "largest_budget_paper": largest.groupby("agent_id")["points_paper"].mean(),
        }
    )
    best["task_rank"] = best.groupby("task_id")["best_points"].rank(method="min", ascending=False)
    table["mean_rank"] = best.groupby("agent_id")["task_rank"].mean()
    table["rank_std"] = best.groupby("agent_id")["task_rank"].std(ddof=1)
    rates = success_rates(runs[runs["agent_id"].isin(agents)]).set_index("agent_id")
    table["success_rate"] = rates["success_rate"]
    counted = settings[settings["agent_id"].isin(agents)]
    rel_iqr = (counted["iqr"] / counted["median_score"].abs()).replace([np.inf, -np.inf], np.nan)
    table["rel_iqr"] = rel_iqr.groupby(counted["agent_id"]).median()
    table.insert(0, "rank", table["best_budget"].rank(method="min", ascending=False).astype(int))
    return table.reset_index().sort_values(["rank", "agent_id"]).reset_index(drop=True)


NOT_THE_AGENTS = ("harness_error", "provider_error")


def pass_k(runs: pd.DataFrame, board: Leaderboard, n: int) -> pd.DataFrame:
    """One row per (setting with an attempt, k = 1..n): agent_attempts, successes, pass_k and
    expected_worst_points, from one suite's ``runs`` and its ``board`` (the cells' scales)."""
    scales = _cell_scales(board)
    rows = []
    for setting, attempts in runs.groupby(SETTING, sort=True):
        own = attempts[~attempts["status"].isin(NOT_THE_AGENTS)]
        made, successes = len(own), int((own["status"] == "success").sum())
        scale = scales.get((setting[1], setting[2]))
        points = (
            [
                _attempt_points(status, value, scale)
                for status, value in zip(own["status"], own["score_hib"], strict=True)
            ]
            if scale is not None
            else None
        )
        for k in range(1, n + 1):
            defined = k <= made
            worst = expected_min(points, k) if defined and points is not None else np.nan
            rows.append(
                {
                    **dict(zip(SETTING, setting, strict=True)),
                    "k": k,
                    "agent_attempts": made,
                    "successes": successes,
                    "pass_k": pass_hat_k(made, successes, k) if defined else np.nan,
                    "expected_worst_points": worst,
                }
            )
    return pd.DataFrame(rows)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """τ-bench's pass^k of one setting: C(c, k) / C(n, k), for 1 <= k <= n."""
    return comb(c, k) / comb(n, k)


def expected_min(values: list[float], k: int) -> float:
    """The expected minimum of a uniformly random k-subset of ``values`` (1 <= k <= len), from
    the order statistics: sorted ascending, the i-th is the minimum in C(n − i, k − 1) of the
    C(n, k) subsets."""
    ordered, n = sorted(values), len(values)
    return sum(v * comb(n - i, k - 1) for i, v in enumerate(ordered, start=1)) / comb(n, k)


def agent_pass_k(settings: pd.DataFrame) -> pd.DataFrame:
    """Per (agent, k): the means of pass_k and expected_worst_points over the settings where
    they are defined, and how many settings that was."""
    grouped = settings.groupby(["agent_id", "k"])
    return grouped.agg(
        settings=("pass_k", "size"),
        settings_with_pass_k=("pass_k", "count"),
        mean_pass_k=("pass_k", "mean"),
        settings_with_worst_points=("expected_worst_points", "count"),
        mean_expected_worst_points=("expected_worst_points", "mean"),
    ).reset_index()


def _cell_scales(board: Leaderboard) -> dict[tuple[str, int], tuple[float, float, float]]:
    """(task, budget) → (anchor, low, high): the trivial score (NaN: none) and the lowest and
    highest ranked median taking part in the primary points (NaN: none)."""
    scales = {}
    for (task, budget), cell in board.points.groupby(CELL):  # points carry their medians
        taking = cell.loc[cell["below_trivial"].ne(True), "median_score_hib"].astype(float)
        anchor = float(cell["trivial_score_hib"].iloc[0])
        scales[(task, budget)] = (anchor, taking.min(), taking.max())
    return scales


def _attempt_points(status: str, value: float, scale: tuple[float, float, float]) -> float:
    anchor, low, high = scale
    if status != "success":
        return 0.0
    if not np.isnan(anchor) and value < anchor - TRIVIAL_TOLERANCE * max(1.0, abs(anchor)):
        return 0.0
    if high > low:
        return min(1.0, max(0.0, (value - low) / (high - low)))
    return 0.5
