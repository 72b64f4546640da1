"""Pages of the dashboard (run by the router, app/router.py)."""
