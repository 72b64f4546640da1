"""Shared page helpers: the snapshot, cached queries, the empty state, CSV downloads."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from app import queries

TTL_SECONDS = 60
RUN_HINT = (
    "No benchmark results yet. Run the benchmark with `make run` (it runs the demo suite, "
    "loads the records, builds the marts and publishes the read-only snapshot this dashboard "
    "reads), then reload this page."
)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


@st.cache_data(ttl=TTL_SECONDS, show_spinner=False)
def _query(name: str, path: str, mtime: float, *args: str) -> pd.DataFrame:
    # mtime is part of the cache key: a newly published snapshot is read at once
    return getattr(queries, name)(Path(path), *args)


def snapshot_or_stop() -> Path:
    """The snapshot path; when it has no runs, explain how to make some and stop the page."""
    path = queries.snapshot_path()
    if not queries.has_runs(path):
        st.info(RUN_HINT)
        st.caption(
            f"Looked for the snapshot at `{path}` "
            f"(set `{queries.SNAPSHOT_ENV}` to read another file)."
        )
        st.stop()
    return path


def query(name: str, path: Path, *args: str) -> pd.DataFrame:
    """Run ``queries.<name>(path, *args)``, cached for a minute (or until a new snapshot)."""
    return _query(name, str(path), _mtime(path), *args)


def download(frame: pd.DataFrame, name: str, label: str = "Download CSV") -> None:
    st.download_button(
        label,
        frame.to_csv(index=False).encode("utf-8"),
        file_name=f"{name}.csv",
        mime="text/csv",
        key=f"download-{name}",
    )


def footer(path: Path) -> None:
    st.caption(f"Snapshot: `{path}` · queries cached for {TTL_SECONDS} s")
