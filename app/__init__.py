"""The Streamlit dashboard over the published snapshot of the marts."""
