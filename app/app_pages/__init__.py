"""Pages of the dashboard (run by the router, app/streamlit_app.py)."""
