"""The pass^k chart (warehouse/report/charts.py: pass_k): a plain Altair spec of the query's rows."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from app import queries
from warehouse.report.charts import pass_k as pass_k_chart

# integration: the chart of app_snapshot, the snapshot a dbt build makes
pytestmark = pytest.mark.integration


def test_pass_k_chart_draws_one_line_per_agent_from_the_mart(app_snapshot: Path):
    con = queries.open_snapshot(app_snapshot)
    assert con is not None
    frame = queries.pass_k(con, queries.Filters(suite="demo"))
    # beta's timeout at t1/60 s: its pass^k falls below 1 from k = 1 and keeps falling
    beta = frame[frame["agent_id"] == "beta"].set_index("k")["mean_pass_k"]
    assert beta.is_monotonic_decreasing and beta.iloc[0] < 1
    spec = pass_k_chart(frame).to_dict()
    assert spec["mark"]["type"] == "line" and spec["mark"]["point"] is True
    assert spec["encoding"]["x"]["field"] == "k"
    assert spec["encoding"]["y"]["field"] == "mean_pass_k"
    assert spec["encoding"]["color"]["field"] == "agent_id"
    worst = pass_k_chart(frame, "mean_expected_worst_points").to_dict()
    assert worst["encoding"]["y"]["field"] == "mean_expected_worst_points"


def test_pass_k_chart_leaves_out_undefined_ks_and_refuses_other_columns():
    frame = pd.DataFrame(
        {
            "agent_id": ["a", "a", "a"],
            "k": [1, 2, 3],
            "mean_pass_k": [0.5, 0.25, None],  # nobody made 3 attempts
            "settings_with_pass_k": [2, 2, 0],
            "mean_expected_worst_points": [0.4, 0.2, None],
            "settings_with_worst_points": [2, 2, 0],
        }
    )
    spec = pass_k_chart(frame).to_dict()
    (rows,) = spec["datasets"].values()
    assert [row["k"] for row in rows] == [1, 2]
    with pytest.raises(ValueError, match="success_rate"):
        pass_k_chart(frame, "success_rate")
