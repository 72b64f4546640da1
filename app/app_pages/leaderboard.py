"""Leaderboard: the primary ranking (best budget per task), the two other variants, badges."""

from __future__ import annotations

import streamlit as st

from app import queries
from app.app_pages._common import download, page, report_download, resume_hint, table

VARIANT_LABELS = {
    "best_budget": "Best budget per task (primary)",
    "all_cells": "Mean over all task × budget cells",
    "largest_budget": "Largest budget only",
}

# What people came for, on one 1280-px screen (sidebar open): sized columns, and the badges'
# meaning in their headers' help (app/columns.py); the spec metadata, the chart and the coverage of every agent
# behind expanders whose content runs only when opened (on_change="rerun"), so a page load
# draws one table.
FIRST_COLUMNS = [
    "rank",
    "agent_id",
    "score",
    "score_interval",
    "p_rank_1",
    "success_rate",
    "mean_rank_sd",
    "coverage",
    "contamination",
    "duplicates",
]
PRIMARY_ONLY = ("score_interval", "p_rank_1")
DETAIL_COLUMNS = [
    "rank",
    "agent_id",
    "agent_title",
    "harness",
    "provider",
    "model_id",
    "successes",
    "attempts",
    "run_rel_iqr",
    "n_cells",
    "mean_rank",
    "rank_std",
]
COVERAGE_COLUMNS = [
    "agent_id",
    "badge",
    "settings",
    "incomplete_settings",
    "missing_successes",
    "harness_errors",
    "provider_errors",
]
STOPPED_COLUMNS = [
    "agent_id",
    "task_id",
    "budget_seconds",
    "harness_errors",
    "provider_errors",
    "attempts",
    "successes",
    "missing",
]
DUPLICATED_COLUMNS = [
    "agent_id",
    "task_id",
    "budget_seconds",
    "duplicated_counted",
    "n_counted",
    "n_distinct_counted_submissions",
    "n_distinct_submissions",
    "n_shared_with_other_agents",
]


with page("Leaderboard", provisional=True) as view:
    status = view.status

    variant = st.selectbox(
        "Variant", list(VARIANT_LABELS), format_func=VARIANT_LABELS.__getitem__, key="variant"
    )
    board = view.query(queries.leaderboard, variant, view.filters)

    if board.empty:
        progress = (
            f" ({status['settings_complete']} of {status['settings_expected']} settings complete)"
            if status
            else ""
        )
        st.warning(
            "No agent is ranked yet (or none matches the filters): an agent is ranked once it has "
            f"enough successes in every setting the suite lists{progress}. See the coverage below, "
            "then `make run` again."
        )
    else:
        primary = variant == "best_budget"  # the bootstrap is of the primary score only
        shown = [c for c in FIRST_COLUMNS if primary or c not in PRIMARY_ONLY]
        table(board, shown, bars=("score",))
        st.caption(
            "Badges: **coverage** = settings with enough successes / settings; **contamination** = "
            "the model's knowledge cutoff is on or after a task's start date; **duplicates** = ⚠ "
            "two counted attempts of a setting submitted the same answer (replayed: not "
            "independent), ↔ attempts whose answer another agent also submitted. Hover over a "
            "column's header for more."
        )
        with st.expander(
            "Spec metadata and counts (harness, provider, model id, attempts, ...)",
            key="leaderboard_details",
            on_change="rerun",
        ) as details:
            if details.open:
                table(board, DETAIL_COLUMNS)
        with st.expander("Chart: scores", key="leaderboard_chart", on_change="rerun") as chart:
            if chart.open:
                # imported here: Altair loads only when the chart is opened (a page load draws a table)
                from warehouse.report import charts

                st.altair_chart(charts.leaderboard_scores(board, primary), width="stretch")
        download(board, f"leaderboard_{variant}")

    if view.filters.suite is not None:  # the report is of one suite: the one chosen above
        report_download(view.path, view.filters.suite)

    coverage = view.query(queries.coverage, view.filters)
    unranked = int((~coverage["is_ranked"].astype(bool)).sum())
    label = f"Coverage: {len(coverage) - unranked} of {len(coverage)} agents are ranked"
    if status:
        label += (
            f" · {status['settings_complete']} of {status['settings_expected']} settings complete"
        )
        label += " (provisional)" if bool(status["provisional"]) else ""
    # open from the start when some agent is not ranked: that is news
    with st.expander(
        label, expanded=unranked > 0, key="leaderboard_coverage", on_change="rerun"
    ) as covered:
        if covered.open:
            st.caption(
                "Only agents with enough successes in every setting the suite lists are ranked; "
                "settings never run count as missing."
            )
            table(coverage, COVERAGE_COLUMNS)
            download(coverage, "coverage")

    stopped = view.query(queries.stopped_settings, view.filters)
    if not stopped.empty:
        counts = " and ".join(
            f"{n} setting(s) stopped at the {kind}-error ceiling"
            for kind, n in (
                ("harness", int(stopped["stopped_at_harness_error_ceiling"].sum())),
                ("provider", int(stopped["stopped_at_provider_error_ceiling"].sum())),
            )
            if n
        )
        st.warning(
            f"⊘ {counts}: their harness faults reached the suite's `harness_error_ceiling`, or their "
            "provider faults its `provider_error_ceiling` (neither is the agent's), so they get no "
            "more attempts and lack successes. See their `harness_error` / `provider_error` attempts "
            "in the Run explorer (the error message; `harness_error.txt` in the run folder has the "
            "traceback, the record's `provider_fault_evidence` the provider's failures). "
            + resume_hint(view.filters.suite)
        )
        table(stopped, STOPPED_COLUMNS)
        download(stopped, "stopped_settings")
    duplicated = view.query(queries.duplicated_settings, view.filters)
    if not duplicated.empty:
        replayed = int(duplicated["duplicated_counted"].sum())
        st.subheader("Duplicate submissions")
        st.caption(
            f"{len(duplicated)} setting(s) with the same answer submitted twice or more, "
            f"{replayed} of them among the counted attempts (⚠ on the leaderboard: the setting's "
            "median is not over independent attempts). The Run explorer lists an attempt's twins."
        )
        table(duplicated, DUPLICATED_COLUMNS)
        download(duplicated, "duplicated_settings")
