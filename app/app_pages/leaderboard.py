"""Leaderboard: the primary ranking (best budget per task), the two other variants, badges."""

from __future__ import annotations

import streamlit as st

from app.app_pages._common import (
    current_filters,
    download,
    filters_note,
    footer,
    provisional_note,
    query,
    snapshot_or_stop,
)

VARIANT_LABELS = {
    "best_budget": "Best budget per task (primary)",
    "all_cells": "Mean over all task × budget cells",
    "largest_budget": "Largest budget only",
}

# What people came for, on one 1280-px screen (sidebar open): sized columns, and the badges'
# meaning in their headers' help; the spec metadata, the chart and the coverage of every agent
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
    "agent_id",
    "agent_title",
    "harness",
    "provider",
    "model_id",
    "successes",
    "attempts",
    "run_rel_iqr",
    "n_cells",
    "score_low",
    "score_high",
    "mean_rank",
    "rank_std",
    "suite_coverage",
]
COVERAGE_HELP = (
    "k/n: k of the agent's n settings have enough successes to count (✗: some lack them). "
    "Whether the whole suite is complete is said above the table (provisional: k of n settings)."
)
CONTAMINATION_HELP = (
    "⚠ the tasks whose start date is on or before the model's knowledge cutoff (the agent may "
    "have seen the competition); cutoff unknown when a date is missing."
)
DUPLICATES_HELP = (
    "⚠ settings where two of the counted attempts submitted the same answer (cached or "
    "replayed: not independent); ⧉ attempts whose answer another agent also submitted; "
    "unknown when some counted attempt has no submission fingerprint (records before schema 5)."
)
COLUMNS = {
    "rank": st.column_config.NumberColumn("rank", width=40),
    "agent_id": st.column_config.TextColumn("agent"),
    "score": st.column_config.ProgressColumn(
        "score", min_value=0, max_value=1, format="%.3f", width=75
    ),
    "score_interval": st.column_config.TextColumn(
        "95% interval", help="Bootstrap 95% interval of the primary score."
    ),
    "p_rank_1": st.column_config.NumberColumn(
        "P(rank 1)",
        format="percent",
        help="Share of the bootstrap replicates that rank it first, among the ranked agents "
        "(in a provisional suite, only those complete so far: the others may still place anywhere).",
    ),
    "success_rate": st.column_config.NumberColumn(
        "success",
        format="percent",
        help="Success rate: successes / the agent's own attempts (harness and provider faults "
        "are not the agent's: excluded, shown on the Reliability page).",
    ),
    "mean_rank_sd": st.column_config.TextColumn(
        "mean rank ± sd", help="Mean rank over the tasks ± its sample standard deviation."
    ),
    "coverage": st.column_config.TextColumn("coverage", help=COVERAGE_HELP),
    "contamination": st.column_config.TextColumn("contamination", help=CONTAMINATION_HELP),
    "duplicates": st.column_config.TextColumn("duplicates", help=DUPLICATES_HELP),
    "agent_title": st.column_config.TextColumn("title"),
    "run_rel_iqr": st.column_config.NumberColumn("run-to-run rel. IQR", format="%.3f"),
    "n_cells": st.column_config.NumberColumn("cells"),
    "score_low": st.column_config.NumberColumn("95% low", format="%.3f"),
    "score_high": st.column_config.NumberColumn("95% high", format="%.3f"),
    "suite_coverage": st.column_config.TextColumn("suite settings complete"),
}


def score_chart(board, primary: bool) -> dict:
    """The scores as bars, with the primary score's 95% interval as a rule (a plain Vega-Lite
    spec: no Altair import or schema validation in a page run)."""
    sort = {"field": "score", "order": "descending"}
    y = {"field": "agent_id", "type": "nominal", "sort": sort, "title": None}
    layers = [
        {
            "mark": "bar",
            "encoding": {
                "x": {
                    "field": "score",
                    "type": "quantitative",
                    "scale": {"domain": [0, 1]},
                    "title": "score (normalized points)",
                },
                "y": y,
                "tooltip": [
                    {"field": c, "type": "nominal" if c != "score" else "quantitative"}
                    for c in ("agent_id", "score", "coverage", "contamination", "duplicates")
                ],
            },
        }
    ]
    if primary:
        layers.append(
            {
                "mark": {"type": "rule", "color": "black"},
                "encoding": {
                    "x": {"field": "score_low", "type": "quantitative"},
                    "x2": {"field": "score_high"},
                    "y": y,
                },
            }
        )
    return {"layer": layers}


st.title("Leaderboard")
path = snapshot_or_stop()
filters = current_filters(path)
filters_note(filters)
status = provisional_note(path, filters)

variant = st.selectbox(
    "Variant", list(VARIANT_LABELS), format_func=VARIANT_LABELS.get, key="variant"
)
board = query("leaderboard", path, variant, filters)

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
    st.dataframe(board[shown], hide_index=True, width="stretch", column_config=COLUMNS)
    st.caption(
        "Badges: **coverage** = settings with enough successes / settings; **contamination** = "
        "the model's knowledge cutoff is on or after a task's start date; **duplicates** = ⚠ "
        "two counted attempts of a setting submitted the same answer (replayed: not "
        "independent), ⧉ attempts whose answer another agent also submitted. Hover over a "
        "column's header for more."
    )
    with st.expander(
        "Spec metadata and counts (harness, provider, model id, attempts, ...)",
        key="leaderboard_details",
        on_change="rerun",
    ) as details:
        if details.open:
            st.dataframe(
                board[DETAIL_COLUMNS], hide_index=True, width="stretch", column_config=COLUMNS
            )
    with st.expander("Chart: scores", key="leaderboard_chart", on_change="rerun") as chart:
        if chart.open:
            st.vega_lite_chart(board, score_chart(board, primary), width="stretch")
    download(board, f"leaderboard_{variant}")

coverage = query("coverage", path, filters)
unranked = int((~coverage["is_ranked"].astype(bool)).sum())
label = f"Coverage: {len(coverage) - unranked} of {len(coverage)} agents are ranked"
if status:
    label += f" · {status['settings_complete']} of {status['settings_expected']} settings complete"
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
        st.dataframe(coverage, hide_index=True, width="stretch")
        download(coverage, "coverage")

stopped = query("stopped_settings", path, filters)
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
        f"⛔ {counts}: their harness faults reached the suite's `harness_error_ceiling`, or their "
        "provider faults its `provider_error_ceiling` (neither is the agent's), so they get no "
        "more attempts and lack successes. See their `harness_error` / `provider_error` attempts "
        "in the Run explorer (the error message; `harness_error.txt` in the run folder has the "
        "traceback, the record's `provider_fault_evidence` the provider's failures); once the "
        "cause is fixed, raise the ceiling in the suite file and run the suite again."
    )
    st.dataframe(stopped, hide_index=True, width="stretch")
    download(stopped, "stopped_settings")
duplicated = query("duplicated_settings", path, filters)
if not duplicated.empty:
    replayed = int(duplicated["duplicated_counted"].sum())
    st.subheader("Duplicate submissions")
    st.caption(
        f"{len(duplicated)} setting(s) with the same answer submitted twice or more, "
        f"{replayed} of them among the counted attempts (⚠ on the leaderboard: the setting's "
        "median is not over independent attempts). The Run explorer lists an attempt's twins."
    )
    st.dataframe(duplicated, hide_index=True, width="stretch")
    download(duplicated, "duplicated_settings")
footer(path)
