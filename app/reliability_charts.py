"""Chart definitions of reliability under repetition: plain Altair, no Streamlit.

Each function takes the DataFrame of its query (app/queries.py) and returns an ``alt.Chart``,
so the dashboard's page draws it and a static report can render the same spec to PNG/SVG.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from app.columns import label, tooltips

PASS_K_COLUMNS = ("mean_pass_k", "mean_expected_worst_points")


def pass_k_chart(frame: pd.DataFrame, value: str = "mean_pass_k") -> alt.Chart:
    """``value`` (mean pass^k, or the mean expected worst points of k attempts) against k, one
    line per agent, from ``queries.pass_k``'s rows; a k whose mean is over no setting is left
    out (the line stops where the agent made fewer attempts)."""
    if value not in PASS_K_COLUMNS:
        raise ValueError(f"pass_k_chart draws one of {PASS_K_COLUMNS}, not {value!r}")
    shown = frame.dropna(subset=[value])
    counts = "settings_with_pass_k" if value == "mean_pass_k" else "settings_with_worst_points"
    return (
        alt.Chart(shown)
        .mark_line(point=True)
        .encode(
            x=alt.X("k:O", title="k (attempts drawn)", axis=alt.Axis(labelAngle=0)),
            y=alt.Y(
                f"{value}:Q",
                title=label(value),
                scale=alt.Scale(domain=[0, 1], nice=False),
                axis=alt.Axis(format=".1f"),
            ),
            color=alt.Color("agent_id:N", title=label("agent_id")),
            tooltip=tooltips(shown, ["agent_id", "k", value, counts]),
        )
    )
