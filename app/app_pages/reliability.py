"""Reliability: how often attempts succeed (by status) and how much repeated runs vary."""

from __future__ import annotations

import altair as alt
import streamlit as st

from app.app_pages._common import (
    current_filters,
    download,
    filters_note,
    footer,
    query,
    snapshot_or_stop,
    table,
)
from app.columns import label, tooltips
from app.reliability_charts import pass_k_chart

RATE_COLUMNS = [
    "agent_id",
    "success_rate",
    "successes",
    "agent_attempts",
    "agent_failures",
    "harness_errors",
    "provider_errors",
    "provider_faults",
    "rate_limited",
    "attempts",
    "run_rel_iqr",
]
FAULTS = ("agent_failures", "provider_errors", "provider_faults")
ROW = alt.Step(24)  # pixels per agent in the bar charts

st.title("Reliability")
path = snapshot_or_stop()
filters = current_filters(path)
filters_note(filters)

st.subheader("Attempts by status")
counts = query("status_counts", path, filters)
chart = (
    alt.Chart(counts[counts["attempts"] > 0])
    .mark_bar()
    .encode(
        x=alt.X("attempts:Q", stack="normalize", title="share of attempts"),
        y=alt.Y("agent_id:N", title=None),
        color=alt.Color("status:N", title=label("status")),
        tooltip=tooltips(counts, ["agent_id", "status", "attributed_to", "attempts"]),
    )
    .properties(height=ROW)
)
st.altair_chart(chart, width="stretch")
download(counts, "status_counts")

rates = query("success_rates", path, filters)
st.caption(
    "Success rate = successes / the agent's own attempts. Harness errors (the harness's faults) "
    "and provider errors (attempts ended by the model provider's unrecovered faults: 429, 5xx, "
    "in-stream errors, streams the provider cut, seen by the gateway) are not the agent's: they "
    "are counted apart from its failures, re-run, and stay out of the rate."
)
table(rates, RATE_COLUMNS)
download(rates, "success_rates")

st.subheader("Provider faults (not the agent's)")
st.caption(
    "Per agent: attempts that ended as provider_error (re-run under the suite's "
    "`provider_error_ceiling`), and every fault the gateway saw from the provider over all its "
    "attempts, including those the agent recovered from. Calls the gateway refused because the "
    "agent exceeded its own request rate (Rate-limited) are the agent's doing, not faults."
)
faults = rates[["agent_id", *FAULTS]].melt(id_vars="agent_id", var_name="count", value_name="n")
faults = faults.dropna(subset=["n"])
if faults.empty or not faults.loc[faults["count"] != "agent_failures", "n"].any():
    st.info("No provider fault recorded for these agents.")
else:
    faults["count"] = faults["count"].map(label)
    st.altair_chart(
        alt.Chart(faults)
        .mark_bar()
        .encode(
            x=alt.X("n:Q", title="attempts or faults"),
            y=alt.Y("agent_id:N", title=None),
            yOffset="count:N",
            color=alt.Color(
                "count:N",
                title=None,
                scale=alt.Scale(
                    domain=[label(c) for c in FAULTS],
                    range=["#9e9e9e", "#d62728", "#ff9896"],
                ),
            ),
            tooltip=[*tooltips(faults, ["agent_id"]), "count:N", "n:Q"],
        )
        .properties(height=alt.Step(36)),
        width="stretch",
    )

st.subheader("Reliability under repetition (pass^k)")
st.caption(
    "pass^k: the chance that k attempts of a setting all succeed, estimated without bias from "
    "the n attempts made (c successes) as C(c, k) / C(n, k) (τ-bench), over the attempts the "
    "success rate counts; the mean over the agent's settings with at least k attempts. A line "
    "that falls fast is an agent that succeeds often but not every time. Below it, the expected "
    "worst normalized points of k attempts (a failure scores 0): what repeating costs in score."
)
repeated = query("pass_k", path, filters)
if repeated["mean_pass_k"].notna().any():
    st.altair_chart(pass_k_chart(repeated), width="stretch")
    if repeated["mean_expected_worst_points"].notna().any():
        st.altair_chart(pass_k_chart(repeated, "mean_expected_worst_points"), width="stretch")
    download(repeated, "pass_k")
else:
    st.info("No agent has an attempt of its own yet.")

st.subheader("Run-to-run stability")
st.caption(
    "Median over an agent's settings of IQR ÷ |median| of its counted scores (lower = steadier)."
)
stable = rates.dropna(subset=["run_rel_iqr"])
if stable.empty:
    st.info("No setting has counted successes yet.")
else:
    st.altair_chart(
        alt.Chart(stable)
        .mark_bar()
        .encode(
            x=alt.X(
                "run_rel_iqr:Q", title="relative IQR", axis=alt.Axis(format=".3f", tickCount=6)
            ),
            y=alt.Y("agent_id:N", sort="x", title=None),
            tooltip=tooltips(stable, ["agent_id", "run_rel_iqr", "run_settings"]),
        )
        .properties(height=ROW),
        width="stretch",
    )

st.subheader("Performance vs. stability")
st.caption(
    "Each ranked agent: primary score (best budget per task, normalized points) against its "
    "run-to-run relative IQR. Top left is best: high score, steady across repeated runs."
)
scatter = rates.dropna(subset=["rank", "run_rel_iqr"])
if scatter.empty:
    st.info("No ranked agent with a run-to-run spread yet.")
else:
    # both scales from 0 (a padded top): the spread's differences between agents are often a
    # few thousandths, which a domain fitted to the data would draw as a wall-to-wall gap
    widest = float(scatter["run_rel_iqr"].max())
    points = alt.Chart(scatter).encode(
        x=alt.X(
            "run_rel_iqr:Q",
            title="run-to-run relative IQR (lower = steadier)",
            scale=alt.Scale(domain=[0, max(widest * 1.25, 0.01)], zero=True),
            axis=alt.Axis(format=".3f", tickCount=6),
        ),
        y=alt.Y(  # padded both ends: an agent at 0 or 1 is drawn whole, off the axis
            "score:Q",
            title="primary score",
            scale=alt.Scale(domain=[-0.05, 1.05], nice=False),
            axis=alt.Axis(values=[0, 0.2, 0.4, 0.6, 0.8, 1.0]),
        ),
        tooltip=tooltips(scatter, ["agent_id", "rank", "score", "run_rel_iqr", "run_settings"]),
    )
    st.altair_chart(
        points.mark_circle(size=120)
        + points.mark_text(align="left", dx=8).encode(text="agent_id:N"),
        width="stretch",
    )
    download(
        scatter[["agent_id", "rank", "score", "run_rel_iqr", "run_settings"]],
        "performance_stability",
    )
footer(path)
