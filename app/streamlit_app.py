"""tmlbench dashboard: the router. Run with ``uv run streamlit run app/streamlit_app.py``."""

from __future__ import annotations

import streamlit as st

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
    st.Page("app_pages/run_explorer.py", title="Run explorer", icon=":material/search:"),
]
st.navigation(pages).run()
