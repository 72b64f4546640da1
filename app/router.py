"""tmlbench dashboard: the router (the Streamlit script ``app/streamlit_app.py`` serves).

It draws the notice that a newer snapshot was published above every page, the suite picker at
the top of the main area and the global filters in the sidebar (their values live in
``st.session_state``, so they stay set across pages), and runs the chosen page.
"""

from __future__ import annotations

import streamlit as st

from app.app_pages._common import (
    has_runs,
    newer_snapshot_notice,
    sidebar_filters,
    snapshot_path,
    suite_picker,
)

st.set_page_config(page_title="tmlbench", layout="wide")

pages = [
    st.Page(
        "app_pages/leaderboard.py", title="Leaderboard", icon=":material/leaderboard:", default=True
    ),
    st.Page("app_pages/settings.py", title="Settings", icon=":material/grid_view:"),
    st.Page("app_pages/reliability.py", title="Reliability", icon=":material/verified:"),
    st.Page(
        "app_pages/rank_stability.py", title="Rank stability", icon=":material/stacked_line_chart:"
    ),
    st.Page("app_pages/time_scaling.py", title="Time scaling", icon=":material/schedule:"),
    st.Page("app_pages/cost.py", title="Cost", icon=":material/payments:"),
    st.Page("app_pages/run_explorer.py", title="Run explorer", icon=":material/search:"),
]
page = st.navigation(pages)
path = snapshot_path()
newer_snapshot_notice(path)
if has_runs(path):
    suite_picker(path)
    sidebar_filters(path)
page.run()
