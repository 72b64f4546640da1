"""The dashboard's tables: the shared column table (warehouse/report/columns.py: labels, units,
help) turned into Streamlit's ``column_config`` by ``column_config``.

Pages never rename or format a column themselves: they choose which columns a table shows, in
which order (key columns first), and ``app_pages._common.table`` draws it with these labels.
The CSV downloads keep the models' own column names (what SQL users and scripts know).
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd
import streamlit as st

from warehouse.report.columns import (
    COLUMNS,
    FORMATS,
    KINDS,
    TOOLTIP_FORMATS,
    Column,
    label,
    tooltips,
)

__all__ = [
    "COLUMNS",
    "FORMATS",
    "KINDS",
    "TOOLTIP_FORMATS",
    "Column",
    "column_config",
    "label",
    "tooltips",
]


def _config(name: str, dtype, bars: Iterable[str]):
    spec = COLUMNS.get(name, Column(label(name)))
    common = {"label": spec.label, "help": spec.help, "width": spec.width}
    kind = "bar" if name in bars else spec.kind
    if kind == "bar":
        fmt = "percent" if spec.kind in ("percent", "bar") else "%.3f"
        return st.column_config.ProgressColumn(**common, min_value=0, max_value=1, format=fmt)
    if kind == "datetime":
        return st.column_config.DatetimeColumn(**common, format="YYYY-MM-DD HH:mm")
    if kind == "check":
        return st.column_config.CheckboxColumn(**common)
    if kind in FORMATS and pd.api.types.is_numeric_dtype(dtype):
        return st.column_config.NumberColumn(**common, format=FORMATS[kind])
    # text, or a badge that spells the number out (e.g. "⊘ 3 of 3: stopped at the ceiling")
    return st.column_config.TextColumn(**common)


def column_config(frame: pd.DataFrame, bars: Iterable[str] = ()) -> dict:
    """Streamlit's column_config for every column of ``frame``: label, format, help, width;
    ``bars``: columns of a 0..1 value drawn as a bar (the leaderboard's score)."""
    bars = tuple(bars)
    return {name: _config(name, frame[name].dtype, bars) for name in frame.columns}
