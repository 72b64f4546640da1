"""Reliability: how often attempts succeed (by status) and how much repeated runs vary."""

from __future__ import annotations

import streamlit as st

from app import queries
from app.app_pages._common import download, page, table
from app.columns import label
from warehouse.report import charts
from warehouse.report.charts import FAULTS

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

with page("Reliability") as view:
    st.subheader("Attempts by status")
    counts = view.query(queries.status_counts, view.filters)
    st.altair_chart(charts.status_shares(counts), width="stretch")
    download(counts, "status_counts")

    rates = view.query(queries.success_rates, view.filters)
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
        st.altair_chart(charts.provider_faults(faults), width="stretch")

    st.subheader("Reliability under repetition (pass^k)")
    st.caption(
        "pass^k: the chance that k attempts of a setting all succeed, estimated without bias from "
        "the n attempts made (c successes) as C(c, k) / C(n, k) (τ-bench), over the attempts the "
        "success rate counts; the mean over the agent's settings with at least k attempts. A line "
        "that falls fast is an agent that succeeds often but not every time. Below it, the expected "
        "worst normalized points of k attempts (a failure scores 0): what repeating costs in score."
    )
    repeated = view.query(queries.pass_k, view.filters)
    if repeated["mean_pass_k"].notna().any():
        st.altair_chart(charts.pass_k(repeated), width="stretch")
        if repeated["mean_expected_worst_points"].notna().any():
            st.altair_chart(charts.pass_k(repeated, "mean_expected_worst_points"), width="stretch")
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
        st.altair_chart(charts.run_stability(stable), width="stretch")

    st.subheader("Performance vs. stability")
    st.caption(
        "Each ranked agent: primary score (best budget per task, normalized points) against its "
        "run-to-run relative IQR. Top left is best: high score, steady across repeated runs."
    )
    scatter = rates.dropna(subset=["rank", "run_rel_iqr"])
    if scatter.empty:
        st.info("No ranked agent with a run-to-run spread yet.")
    else:
        st.altair_chart(charts.performance_vs_stability(scatter), width="stretch")
        download(
            scatter[["agent_id", "rank", "score", "run_rel_iqr", "run_settings"]],
            "performance_stability",
        )
