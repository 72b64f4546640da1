"""tmlbench dashboard: the entry point. Run with ``uv run streamlit run app/streamlit_app.py``.

``streamlit run`` sees the ``st.App`` below and serves the router script (``app/router.py``:
navigation, sidebar filters, pages) through Streamlit's ASGI server. Its lifespan hook warms the
process up when the server starts (``app/warmup.py``), so the first visitor's page does not wait
for imports of pandas, pyarrow, DuckDB and Altair, nor for the default pages' queries, and
freezes what it loaded out of the garbage collector's full collections.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import streamlit as st
from streamlit.logger import get_logger

_LOG = get_logger(__name__)
ROUTER = Path(__file__).resolve().with_name("router.py")


@asynccontextmanager
async def warm_up(_server: st.App) -> AsyncIterator[None]:
    from app.warmup import freeze, warm, warm_queries

    warm()
    try:
        warm_queries()
    except Exception as error:  # a missing or broken snapshot: the pages explain it
        _LOG.warning("dashboard warm-up: no cached queries (%s)", error)
    freeze()
    yield


app = st.App(str(ROUTER), lifespan=warm_up)
