"""Column kinds and model-ready feature frames shared by the linear and the gbm baseline.

Every feature column ends up either numeric (float, NaN for missing) or categorical (pandas
``category`` dtype whose categories come from the training table, rare and unseen values
folded into one ``__other__`` level). Datetime-like strings are expanded into calendar parts.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

OTHER = "__other__"
CALENDAR_PARTS = ("hour", "dow", "month", "doy", "year")
# Parts a linear model should see as categories (daily, weekly, yearly profiles are not linear).
CYCLIC_PARTS = ("hour", "dow", "month")
_TRUTHY = {"true", "yes", "y", "t", "1"}
_FALSY = {"false", "no", "n", "f", "0"}
_ISO = re.compile(
    r"^\d{4}-\d{1,2}-\d{1,2}([ T]\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?$"
)
_OTHER_DATE = re.compile(r"^\d{1,4}[/.]\d{1,2}[/.]\d{1,4}( \d{1,2}:\d{2}(:\d{2})?)?$")
_OTHER_FORMATS = tuple(
    f"{day}{time}"
    for day in ("%d/%m/%Y", "%m/%d/%Y", "%Y/%m/%d", "%d.%m.%Y", "%d/%m/%y", "%m/%d/%y")
    for time in ("", " %H:%M", " %H:%M:%S")
)
_SAMPLE = 500


@dataclass
class ColumnPlan:
    numeric: list[str] = field(default_factory=list)
    boolean: list[str] = field(default_factory=list)
    categorical: list[str] = field(default_factory=list)
    datetime: list[str] = field(default_factory=list)
    dropped: dict[str, str] = field(default_factory=dict)


@dataclass
class FeatureFrames:
    train: pd.DataFrame
    test: pd.DataFrame
    numeric: list[str]  # float columns, including booleans (0/1) and calendar parts
    categorical: list[str]  # ``category`` dtype
    cyclic: list[str]  # calendar hour/day-of-week/month columns among ``numeric``
    plan: ColumnPlan


def plan_columns(train: pd.DataFrame, *, unique_share_to_drop: float = 0.5) -> ColumnPlan:
    """Decide each column's kind from the training table."""
    plan = ColumnPlan()
    for name in train.columns:
        column = train[name]
        present = column.dropna()
        if present.empty or present.nunique() <= 1:
            plan.dropped[name] = "constant or empty"
        elif pd.api.types.is_bool_dtype(column):
            plan.boolean.append(name)
        elif pd.api.types.is_numeric_dtype(column):
            plan.numeric.append(name)
        elif pd.api.types.is_datetime64_any_dtype(column):
            plan.datetime.append(name)
        else:
            _plan_text_column(plan, name, present, unique_share_to_drop)
    return plan


def _plan_text_column(
    plan: ColumnPlan, name: str, present: pd.Series, unique_share_to_drop: float
) -> None:
    text = present.astype(str).str.strip()
    sample = text.sample(min(_SAMPLE, len(text)), random_state=0) if len(text) > _SAMPLE else text
    distinct = set(sample.str.lower().unique())
    if len(distinct) == 2 and distinct <= _TRUTHY | _FALSY and distinct & _TRUTHY:
        plan.boolean.append(name)
    elif _date_format(sample) is not None and parse_datetimes(sample).notna().mean() >= 0.9:
        plan.datetime.append(name)
    elif pd.to_numeric(sample, errors="coerce").notna().mean() >= 0.95:
        plan.numeric.append(name)
    elif text.nunique() > max(20, unique_share_to_drop * len(text)):
        plan.dropped[name] = "mostly unique text (names, ids)"
    else:
        plan.categorical.append(name)


def _date_format(sample: pd.Series) -> str | None:
    """The format a column of date strings uses, or None if it does not look like dates.

    Slash and dot dates are ambiguous (day or month first), so every candidate format is
    tried on the sample and the one that parses most of it wins.
    """
    if sample.empty:
        return None
    if sample.str.match(_ISO).mean() >= 0.9:
        return "ISO8601"
    if sample.str.match(_OTHER_DATE).mean() < 0.9:
        return None
    best, best_share = None, 0.0
    for fmt in _OTHER_FORMATS:
        share = pd.to_datetime(sample, errors="coerce", format=fmt).notna().mean()
        if share > best_share:
            best, best_share = fmt, share
    return best if best_share >= 0.9 else None


def parse_datetimes(values: pd.Series) -> pd.Series:
    """Timestamps from strings (NaT where unparseable), naive, in the strings' own clock time."""
    if pd.api.types.is_datetime64_any_dtype(values):
        parsed = values
    else:
        text = values.astype("string").str.strip()
        fmt = _date_format(text.dropna().head(_SAMPLE))
        if fmt is None:
            return pd.Series(pd.NaT, index=values.index, dtype="datetime64[ns]")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            parsed = pd.to_datetime(text, errors="coerce", format=fmt)
            if not pd.api.types.is_datetime64_any_dtype(parsed):  # mixed UTC offsets
                parsed = pd.to_datetime(text, errors="coerce", format=fmt, utc=True)
    if getattr(parsed.dt, "tz", None) is not None:
        parsed = parsed.dt.tz_convert(None)
    return parsed


def calendar_parts(values: pd.Series) -> pd.DataFrame:
    """hour, day of week, month, day of year and year of each timestamp (NaN where missing)."""
    stamps = parse_datetimes(values)
    parts = {
        "hour": stamps.dt.hour,
        "dow": stamps.dt.dayofweek,
        "month": stamps.dt.month,
        "doy": stamps.dt.dayofyear,
        "year": stamps.dt.year,
    }
    return pd.DataFrame(
        {key: part.astype(float) for key, part in parts.items()}, index=values.index
    )


def _as_boolean(column: pd.Series) -> pd.Series:
    text = column.astype("string").str.strip().str.lower()
    return text.map(lambda v: 1.0 if v in _TRUTHY else 0.0 if v in _FALSY else np.nan).astype(float)


def _category_levels(column: pd.Series, max_categories: int, min_count: int) -> list[str]:
    counts = column.dropna().astype(str).value_counts()
    return [str(level) for level in counts[counts >= min_count].index[:max_categories]]


def _as_category(column: pd.Series, levels: list[str]) -> pd.Series:
    text = column.astype(str).where(column.notna())
    folded = text.where(text.isin(levels) | text.isna(), OTHER)
    return pd.Series(pd.Categorical(folded, categories=[*levels, OTHER]), index=column.index)


def build_features(
    train: pd.DataFrame, test: pd.DataFrame, *, max_categories: int = 250, min_count: int = 5
) -> FeatureFrames:
    """Numeric and categorical frames for train and test, with datetime columns expanded."""
    plan = plan_columns(train)
    out_train: dict[str, pd.Series] = {}
    out_test: dict[str, pd.Series] = {}
    numeric: list[str] = []
    categorical: list[str] = []
    cyclic: list[str] = []
    for name in plan.numeric:
        out_train[name] = pd.to_numeric(train[name], errors="coerce").astype(float)
        out_test[name] = pd.to_numeric(test[name], errors="coerce").astype(float)
        numeric.append(name)
    for name in plan.boolean:
        out_train[name], out_test[name] = _as_boolean(train[name]), _as_boolean(test[name])
        numeric.append(name)
    for name in plan.datetime:
        parts_train, parts_test = calendar_parts(train[name]), calendar_parts(test[name])
        for part in CALENDAR_PARTS:
            if parts_train[part].nunique() <= 1:
                continue  # e.g. the hour of a date-only column
            key = f"{name}__{part}"
            out_train[key], out_test[key] = parts_train[part], parts_test[part]
            numeric.append(key)
            if part in CYCLIC_PARTS:
                cyclic.append(key)
    for name in plan.categorical:
        levels = _category_levels(train[name], max_categories, min_count)
        if not levels:
            plan.dropped[name] = f"no category seen {min_count}+ times"
            continue
        out_train[name] = _as_category(train[name], levels)
        out_test[name] = _as_category(test[name], levels)
        categorical.append(name)
    frame_train = pd.DataFrame(out_train, index=train.index)
    frame_test = pd.DataFrame(out_test, index=test.index)
    return FeatureFrames(frame_train, frame_test, numeric, categorical, cyclic, plan)


def describe(frames: FeatureFrames) -> str:
    plan = frames.plan
    dropped = ", ".join(f"{k} ({v})" for k, v in plan.dropped.items()) or "none"
    return (
        f"{len(frames.numeric)} numeric ({len(plan.datetime)} datetime expanded), "
        f"{len(frames.categorical)} categorical; dropped: {dropped}"
    )
