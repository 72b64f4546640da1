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
from streamlit.elements.lib.column_types import ColumnConfig

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


def _config(name: str, numeric: bool, bars: Iterable[str]) -> ColumnConfig:
    spec = COLUMNS.get(name, Column(label(name)))
    text, help, width = spec.label, spec.help, spec.width
    kind = "bar" if name in bars else spec.kind
    if kind == "bar":
        fmt = "percent" if spec.kind in ("percent", "bar") else "%.3f"
        return st.column_config.ProgressColumn(
            text, help=help, width=width, min_value=0, max_value=1, format=fmt
        )
    if kind == "datetime":
        return st.column_config.DatetimeColumn(
            text, help=help, width=width, format="YYYY-MM-DD HH:mm"
        )
    if kind == "check":
        return st.column_config.CheckboxColumn(text, help=help, width=width)
    if kind in FORMATS and numeric:
        return st.column_config.NumberColumn(text, help=help, width=width, format=FORMATS[kind])
    # text, or a badge that spells the number out (e.g. "⊘ 3 of 3: stopped at the ceiling")
    return st.column_config.TextColumn(text, help=help, width=width)


def column_config(frame: pd.DataFrame, bars: Iterable[str] = ()) -> dict[str, ColumnConfig]:
    """Streamlit's column_config for every column of ``frame``: label, format, help, width;
    ``bars``: columns of a 0..1 value drawn as a bar (the leaderboard's score)."""
    bars = tuple(bars)
    return {
        str(name): _config(str(name), pd.api.types.is_numeric_dtype(frame[name].dtype), bars)
        for name in frame.columns
    }
