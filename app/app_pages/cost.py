"""Cost: tokens and dollars per agent and per setting, cost per success, points per dollar."""

from __future__ import annotations

import streamlit as st

from app import queries
from app.app_pages._common import download, literal, page, stop_if_empty, table
from warehouse.report import charts

# key columns first; the rest of the counts behind an expander (and in the CSV)
AGENT_VIEW = [
    "agent_id",
    "score",
    "points_per_dollar",
    "cost_per_success_usd",
    "cost_mean_usd",
    "cost_total_usd",
    "attempts",
    "attempts_with_cost",
    "tokens_in_total",
    "tokens_out_total",
]
AGENT_MORE = [
    "agent_id",
    "counted_cost_mean_usd",
    "counted_cost_total_usd",
    "n_counted",
    "counted_with_cost",
    "tokens_in_mean",
    "tokens_out_mean",
    "attempts_with_tokens",
]
SETTING_VIEW = [
    "agent_id",
    "task_id",
    "budget_seconds",
    "points",
    "points_per_dollar",
    "cost_per_success_usd",
    "cost_mean_usd",
    "cost_total_usd",
    "attempts",
    "attempts_with_cost",
]

CAPTION = (
    "Tokens and cost as recorded by each attempt. An attempt that recorded no cost is "
    "*unknown* (an empty cell), never $0: totals and means use the attempts with a known cost "
    "(see Attempts with cost). Cost per success = known cost ÷ successes among those attempts. "
    "Points per dollar = the agent's primary score (or, per setting, its normalized points) ÷ "
    "the mean cost of a counted attempt; empty when the cost is unknown or 0."
)

with page("Cost", caption=CAPTION) as view:
    agents = view.query(queries.agent_costs, view.filters)
    stop_if_empty(agents, "No agent matches the filters.")
    known = agents[agents["attempts_with_cost"] > 0]
    unknown = agents.loc[agents["attempts_with_cost"] == 0, "agent_id"].tolist()
    if known.empty:
        st.info(
            "No attempt recorded a cost yet (baselines and command agents usually do not; LLM agents "
            "record tokens and cost when the agent spec has token prices)."
        )
    elif unknown:
        st.caption(f"Cost unknown for: {', '.join(literal(a) for a in unknown)}.")

    st.subheader("Per agent")
    table(agents, AGENT_VIEW)
    with st.expander(
        "Counted attempts and tokens per attempt", key="cost_more", on_change="rerun"
    ) as more:
        if more.open:
            table(agents, AGENT_MORE)
    download(agents, "agent_costs")

    ratio = agents.dropna(subset=["points_per_dollar"])
    if not ratio.empty:
        st.altair_chart(charts.points_per_dollar(ratio), width="stretch")
    tokens = charts.tokens_long(agents)
    if not tokens.empty:
        st.altair_chart(charts.tokens(tokens), width="stretch")

    st.subheader("Per setting")
    settings = view.query(queries.setting_costs, view.filters)
    table(settings, SETTING_VIEW)
    download(settings, "setting_costs")
