"""The dashboard's one-time costs, paid when the server starts (app/streamlit_app.py's lifespan
hook) instead of inside the first visitor's page render.

Python caches modules per process, so importing them here once makes every page's imports free:
pandas (~0.25 s), pyarrow, DuckDB, Altair (~0.4 s), and the app's own modules. Building one small
chart loads and compiles Altair's Vega-Lite JSON schema validator (the first ``to_dict`` of a
process takes ~0.1 s, later ones ~0.01 s). Measured with benchmarks/dashboard.py (README).

Then the ~144,000 objects the server holds by then are frozen out of the cyclic garbage
collector (``freeze``): Streamlit runs a full collection after every script run, and walking
them took 0.07-0.4 s of the one Python process (GIL held) each time, while the page's "finished"
message and the browser's requests for the page's JavaScript waited behind it; frozen, that
collection walks ~2,000 objects in a few ms. Frozen objects are never collected
as cycles (they live as long as the process anyway); reference counting still frees them.
"""

from __future__ import annotations

import gc


def warm() -> None:
    import altair  # noqa: F401
    import duckdb  # noqa: F401
    import pandas as pd
    import pyarrow  # noqa: F401

    from app import queries  # noqa: F401
    from app.app_pages import _common  # noqa: F401
    from warehouse.report import charts  # every page's charts (shared with the report)

    frame = pd.DataFrame({"agent_id": ["a"], "score": [0.5]})
    charts.leaderboard_scores(frame, with_interval=False).to_dict()


def warm_queries() -> None:
    """Fill the query cache for the sidebar and the default view (the default suite) of the leaderboard
    and the run explorer, so their first visitors read from memory (the newest attempts of
    display.runs_display take ~0.1 s at 100,000 runs). Any failure only means a cold first page."""
    from app import queries
    from app.app_pages import _common

    path = queries.snapshot_path()
    if not _common.has_runs(path):
        return
    suite = queries.default_suite(_common.query(queries.suites, path))
    none = queries.Filters(suite=suite)  # what a first visitor sees: the default suite, unfiltered
    # the arguments the pages pass, in the same order: the cache is keyed on them
    _common.query(queries.filter_options, path, suite)
    _common.query(queries.leaderboard, path, "best_budget", none)
    _common.query(queries.coverage, path, none)
    _common.query(queries.stopped_settings, path, none)
    _common.query(queries.duplicated_settings, path, none)
    _common.query(queries.run_count, path, none, ())
    _common.query(queries.runs, path, none, (), queries.RUN_ROWS)


def freeze() -> None:
    """Collect once, then move every object alive now out of the collector's reach, so that the
    full collection after each script run walks only what pages made since."""
    gc.collect()
    gc.freeze()
