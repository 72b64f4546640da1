"""Shared page helpers: the page skeleton every page is drawn in (``page``), the snapshot,
typed cached queries (``query``), the suite picker and global filters, the empty state, tables
(labelled and formatted by app/columns.py), CSVs, the report bundle's zip, the notice of a newer
snapshot, and the one way to show text that an agent controls."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Concatenate, Literal, ParamSpec, TypeVar, cast

import duckdb
import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from app import queries
from app.columns import column_config

CACHED_RESULTS = 512  # query results kept (per snapshot, filters and arguments)
RUN_HINT = (
    "No benchmark results yet. Run the benchmark with `make run` (it runs the demo suite, "
    "loads the records, builds the marts and publishes the read-only snapshot this dashboard "
    "reads) or from the Dagster UI (`make ui`); this page offers the results as soon as they "
    "are published."
)
# session-state keys of the sidebar filters (app/router.py draws them)
FILTER_KEYS = {
    "suite": "filter_suite",
    "agents": "filter_agents",
    "tasks": "filter_tasks",
    "budgets": "filter_budgets",
    "dates": "filter_dates",
}
DATE_BOUNDS_KEY = "filter_date_bounds"
FILTERS_OPEN_KEY = "filters_open"  # the sidebar's Filters expander (drawn only when open)
FILTER_SCOPE = (
    "The suite (chosen at the top of the page) chooses whose benchmark every page shows: each suite's scores, ranks and rates "
    "are computed from the attempts it counts alone (the runs in its folder, of the settings its "
    "file lists). Agents, tasks and budgets narrow its tables and charts; scores and ranks are "
    "not recomputed. The date range applies to attempt-level views only: the run explorer and "
    "the counted attempts on the Settings page."
)


# --- text from agents --------------------------------------------------------------------------
# Whatever an agent (or anything in its sandbox, or its model provider) controls is shown as text,
# never rendered: its messages and tool calls, logs, its submission's header that a validation
# message quotes, error messages built from its output, host and file names, usage fields, and
# ids from spec files or imported results we did not write. Streamlit renders GitHub-flavoured
# Markdown in st.markdown, st.caption, st.title/header/subheader, st.error/warning/info/success and
# widget labels: images (fetched by the maintainer's browser as soon as the page is drawn: a
# tracking pixel, a request to a service on their machine), links of any scheme (its renderer
# passes every href through, javascript: included), bare URLs made links, emoji and colour
# directives, LaTeX. There is no switch that turns images or links off: unsafe_allow_html=False
# only escapes raw HTML. So agent text goes to st.code / st.text (no Markdown, no HTML: a <pre> or
# a plain text node) through show_text, or, inside a sentence of ours, becomes an inline code
# span through literal(); nothing else of a page passes it to a Markdown element.

AGENT_TEXT_LIMIT = 8000  # characters of one piece of agent text a page draws
_BACKTICKS = re.compile(r"`+")
_LINE_ENDINGS = re.compile(r"\r\n|\r|\n")


def clip(text: object, limit: int | None = AGENT_TEXT_LIMIT) -> str:
    value = "" if text is None else str(text)
    if limit is not None and len(value) > limit:
        return value[:limit] + f"\n… ({len(value) - limit:,} more characters not shown)"
    return value


def show_text(
    text: object,
    *,
    limit: int | None = AGENT_TEXT_LIMIT,
    where: DeltaGenerator | None = None,
    code: bool = True,
) -> None:
    """Draw untrusted text verbatim in ``where`` (``st`` or a container): a code block with
    ``language="text"`` (monospace, wrapped, no highlighting), or plain text with ``code=False``."""
    value = clip(text, limit)
    if code:
        (where or st).code(value, language="text", wrap_lines=True)
    else:
        (where or st).text(value)


def literal(text: object, limit: int | None = 300) -> str:
    """``text`` as a Markdown inline code span, for an untrusted value inside a sentence of ours
    (a caption, an alert, a heading): inside a code span nothing is Markdown or HTML, and
    Streamlit's directives, emoji and icons apply to text nodes only. The fence is one backtick
    longer than any run of backticks in the text, and line endings become spaces because a line
    that starts a block (``# heading``, ``![image](...)`` on its own line) would end the span."""
    value = _LINE_ENDINGS.sub(" ", clip(text, limit))
    if not value:
        return ""
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(value)), default=0) + 1)
    return f"{fence} {value} {fence}"


# --- the snapshot: the newest one's connection, query results cached per snapshot --------------
# A snapshot is identified by its file (device, inode, mtime, size): publishing a new one
# replaces the file, so the next query of any session opens it (queries.SnapshotReader) and its
# results are cached under the new identity. A query runs on a cursor of its own (queries._read).


@st.cache_resource(show_spinner=False)
def _reader(path: str) -> queries.SnapshotReader:
    return queries.SnapshotReader(Path(path))


def current_snapshot(path: Path) -> queries.Snapshot:
    """The newest snapshot at ``path``: its identity and its read-only connection."""
    return _reader(str(path)).current()


class SnapshotUnreadable(RuntimeError):
    """The snapshot file was replaced by one that is not a DuckDB database mid-page."""


def connection(path: Path) -> duckdb.DuckDBPyConnection:
    """The read-only connection to the newest snapshot at ``path``."""
    return _connection_of(current_snapshot(path), path)


def _connection_of(snapshot: queries.Snapshot, path: Path) -> duckdb.DuckDBPyConnection:
    if snapshot.connection is None:  # a page checked has_runs first: the file changed since
        raise SnapshotUnreadable(
            f"The snapshot {path} cannot be read now (replaced, or not a DuckDB file): "
            "reload the page once `make run` has published it again."
        )
    return snapshot.connection


P = ParamSpec("P")
R = TypeVar("R")


@st.cache_data(max_entries=CACHED_RESULTS, show_spinner=False)
def _cached(
    name: str,
    path: str,
    identity: queries.Identity | None,
    _query: Callable[..., object],
    _con: duckdb.DuckDBPyConnection,
    *args: object,
    **kwargs: object,
) -> object:
    # keyed on the query's name and the snapshot's identity, not on _query and _con (never
    # hashed): a newly published snapshot is read at once
    return _query(_con, *args, **kwargs)


def query(
    read: Callable[Concatenate[duckdb.DuckDBPyConnection, P], R],
    path: Path,
    *args: P.args,
    **kwargs: P.kwargs,
) -> R:
    """``read(connection, *args, **kwargs)`` (a function of app/queries.py) on the snapshot at
    ``path``, cached until a new snapshot is published."""
    snapshot = current_snapshot(path)
    con = _connection_of(snapshot, path)
    name = f"{read.__module__}.{read.__qualname__}"
    # the cache returns what ``read`` returned for these arguments: an R (st.cache_data's
    # CachedFunc keeps a function's signature, but not the type variables of a generic one)
    return cast(R, _cached(name, str(path), snapshot.identity, read, con, *args, **kwargs))


@st.cache_data(max_entries=CACHED_RESULTS, show_spinner=False)
def _has_runs(
    path: str, identity: queries.Identity | None, _con: duckdb.DuckDBPyConnection | None
) -> bool:
    return queries.has_runs(_con)


def snapshot_path() -> Path:
    return queries.snapshot_path()


def has_runs(path: Path) -> bool:
    snapshot = current_snapshot(path)
    return _has_runs(str(path), snapshot.identity, snapshot.connection)


def snapshot_or_stop() -> Path:
    """The snapshot path; when it has no runs, or the chosen suite has none yet, say how to make
    some and stop the page."""
    path = snapshot_path()
    if not has_runs(path):
        st.info(RUN_HINT)
        st.caption(
            f"Looked for the snapshot at {literal(path, None)} "
            f"(set `{queries.SNAPSHOT_ENV}` to read another file)."
        )
        st.stop()
    suite = chosen_suite(path)
    if suite is not None and not suite_has_runs(path, suite):
        st.info(suite_run_hint(suite))
        st.stop()
    return path


def suite_run_hint(suite: str) -> str:
    """How to run a suite file that has no runs yet: its Dagster asset group (named as
    orchestration/suites.py's SuiteFile.group names it) or the command `make run` uses."""
    group = "suite_" + re.sub(r"[-.]", "_", suite)
    command = f"uv run python -m orchestration.materialize --suite {suite}"
    return (
        f"Suite {literal(suite)} has no runs yet. Run it from the Dagster UI (`make ui`, then "
        f"materialize the asset group {literal(group)}) or from a terminal: {literal(command)}. "
        "Its results appear here as soon as the new snapshot is published."
    )


def resume_hint(suite: str | None) -> str:
    """How to give settings stopped at a fault ceiling their attempts back, once the cause is
    fixed: an action (runner/suites/resumptions.py), never an edit of the suite file."""
    suite = suite or "<suite>"
    command = f"uv run tmlbench resume --suite {suite}"
    return (
        f"Once the cause is fixed, resume them: {literal(command)}, or in the Dagster UI "
        f"materialize their partitions of {literal(suite + '/agent_runs')} with the launch "
        "config `resume_stopped: true`. Their faults stay recorded; the ceilings count only "
        "those after the resumption."
    )


def suite_label(suites: pd.DataFrame, suite: str) -> str:
    """A suite as the picker lists it: id, title, and whether it has runs yet."""
    row = suites.loc[suites["suite_id"] == suite].iloc[0]
    title = row["suite_title"]
    text = suite if title is None or title != title else f"{suite} · {title}"
    return text if bool(row["has_runs"]) else f"{text} (no runs yet)"


def suite_picker(path: Path) -> None:
    """The suite every page shows, chosen at the top of the main area (app/router.py draws it
    before the page): every suite file loaded into the snapshot, with runs or not (a suite
    without runs gets a page saying how to run it), and every imported source."""
    suites = query(queries.suites, path)
    if suites.empty:
        return
    key = FILTER_KEYS["suite"]
    st.session_state[key] = chosen_suite(path)  # a suite no longer in this snapshot: the default
    st.selectbox(
        "Suite",
        suites["suite_id"].tolist(),
        format_func=lambda suite: suite_label(suites, suite),
        key=key,
        width=520,
        help="Each suite's scores, ranks and rates are computed from the attempts it counts "
        "alone (the runs in its folder, of the settings its file lists).",
    )


def suite_has_runs(path: Path, suite: str) -> bool:
    suites = query(queries.suites, path)
    return bool(suites.loc[suites["suite_id"] == suite, "has_runs"].any())


def sidebar_filters(path: Path) -> None:
    """Draw the global filters in the sidebar, in an expander whose widgets are drawn only while
    it is open: a page load then draws no multiselect or date input (nor loads their code in the
    browser). Their values live in st.session_state, set while the expander is closed and
    across pages; every page says which filters are active (``filters_note``)."""
    options = query(queries.filter_options, path, chosen_suite(path))
    state = st.session_state
    for name, key in (*FILTER_KEYS.items(), ("open", FILTERS_OPEN_KEY)):
        if name == "suite":  # the picker above the page is drawn on every run
            continue
        # Streamlit drops a widget's value after a run that did not draw it (and the expander's
        # on a page switch), unless the script sets it: set again, the filters stay while their
        # widgets are not drawn, and the expander stays open across pages
        if key in state:
            state[key] = state[key]
    first, last = options["first_day"], options["last_day"]
    if first is not None:
        state[DATE_BOUNDS_KEY] = (first, last)  # the whole range = no date filter
    _keep_within(options)
    with st.sidebar.expander("Filters", key=FILTERS_OPEN_KEY, on_change="rerun") as box:
        if not box.open:
            return
        box.multiselect("Agents", options["agents"], key=FILTER_KEYS["agents"])
        box.multiselect("Tasks", options["tasks"], key=FILTER_KEYS["tasks"])
        box.multiselect("Budgets (s)", options["budgets"], key=FILTER_KEYS["budgets"])
        if first is not None and last is not None:
            dates, title = FILTER_KEYS["dates"], "Attempts created between (UTC)"
            # the whole range is the default only until a range is chosen (then it is in the
            # session state, and a default beside it would be refused)
            if dates in state:
                box.date_input(title, min_value=first, max_value=last, key=dates)
            else:
                box.date_input(
                    title, value=(first, last), min_value=first, max_value=last, key=dates
                )
        box.caption(FILTER_SCOPE)


def _keep_within(options: queries.FilterOptions) -> None:
    """Drop the selections another suite's options allowed and this suite's do not (agents it has
    no attempt of, days outside its attempts): a widget refuses a value outside its options."""
    state = st.session_state
    for name in ("agents", "tasks", "budgets"):
        key = FILTER_KEYS[name]
        if key in state:
            state[key] = [v for v in state[key] or () if v in options[name]]
    dates = state.get(FILTER_KEYS["dates"])
    first, last = options["first_day"], options["last_day"]
    if dates is not None and (
        first is None or any(not first <= day <= last for day in dates if day is not None)
    ):
        del state[FILTER_KEYS["dates"]]


def chosen_suite(path: Path) -> str | None:
    """The suite chosen at the top of the page, or the default one until a suite is chosen (or
    when the chosen one is not in this snapshot)."""
    suites = query(queries.suites, path)
    chosen = st.session_state.get(FILTER_KEYS["suite"])
    return chosen if chosen in set(suites["suite_id"]) else queries.default_suite(suites)


def current_filters(path: Path) -> queries.Filters:
    """The sidebar's filters as a ``queries.Filters``: the chosen suite and the other filters'
    selections (empty: all)."""
    state = st.session_state
    dates = state.get(FILTER_KEYS["dates"]) or ()
    start = end = None
    if (
        isinstance(dates, (tuple, list))
        and len(dates) == 2
        and tuple(dates) != state.get(DATE_BOUNDS_KEY)
    ):
        start, end = dates
    return queries.Filters(
        suite=chosen_suite(path),
        agents=tuple(state.get(FILTER_KEYS["agents"]) or ()),
        tasks=tuple(state.get(FILTER_KEYS["tasks"]) or ()),
        budgets=tuple(int(b) for b in state.get(FILTER_KEYS["budgets"]) or ()),
        start=start,
        end=end,
    )


def filters_note(filters: queries.Filters) -> None:
    """Say which of the sidebar's filters are active (the suite is the picker's, above)."""
    active = [  # agent ids come from spec files and imported results: literal
        f"{label}: {', '.join(literal(v) for v in values)}"
        for label, values in (
            ("agents", filters.agents),
            ("tasks", filters.tasks),
            ("budgets", filters.budgets),
        )
        if values
    ]
    if filters.start is not None:
        active.append(f"created {filters.start} – {filters.end} (attempt-level views)")
    if active:
        st.caption("Filtered: " + " · ".join(active))


def provisional_note(path: Path, filters: queries.Filters) -> queries.SuiteStatus | None:
    """Warn when the suite is provisional (some setting its file lists still lacks successes):
    its ranks, scores and P(rank) are among the agents complete so far and may still change.
    Returns the suite's status row (display.suite_status_display), None when unknown."""
    status = query(queries.suite_status, path, filters)
    if status is not None and status["provisional"]:
        st.warning(
            f"**Provisional**: {status['settings_complete']} of {status['settings_expected']} "
            f"settings complete ({status['counted_successes']} successes each). Ranks, scores "
            f"and P(rank) are among the {status['agents_ranked']} of {status['agents_expected']} "
            "agents complete in all their settings, and may change as the rest complete."
        )
    return status


def table(
    frame: pd.DataFrame,
    columns: list[str] | None = None,
    *,
    bars: tuple[str, ...] = (),
    height: int | Literal["auto"] = "auto",
) -> None:
    """Draw ``frame``'s ``columns`` (all when None), in that order (key columns first), with their
    labels, formats, help and widths from app/columns.py, and missing values as empty cells;
    ``bars``: 0..1 columns drawn as bars."""
    shown = frame if columns is None else frame[list(columns)]
    st.dataframe(
        shown,
        hide_index=True,
        width="stretch",
        height=height,
        column_config=column_config(shown, bars),
        placeholder="",
    )


def download(frame: pd.DataFrame, name: str, label: str = "Download CSV") -> None:
    # the CSV is made when the button is clicked, not on every render
    st.download_button(
        label,
        lambda: frame.to_csv(index=False).encode("utf-8"),
        file_name=f"{name}.csv",
        mime="text/csv",
        key=f"download-{name}",
    )


REPORT_ZIPS = 8  # report zips kept (per snapshot and suite; a few MB each)


@st.cache_data(max_entries=REPORT_ZIPS, show_spinner=False)
def _report_zip(
    path: str,
    identity: queries.Identity | None,
    _con: duckdb.DuckDBPyConnection,
    suite: str,
) -> bytes:
    # keyed on the snapshot's identity, as _query: a newly published snapshot gets a new report
    return queries.report_zip(_con, suite)


def report_download(path: Path, suite: str) -> None:
    """A button that downloads ``suite``'s report bundle as a zip, made from the snapshot this
    page was drawn from when it is clicked (a few seconds: every figure is rendered), then kept
    until a new snapshot is published."""
    # the page's snapshot, even if a newer one is published before the click: the button holds
    # its connection (and a replaced file's disk space) until the page's next run
    snapshot = current_snapshot(path)
    con = _connection_of(snapshot, path)
    st.download_button(
        "Download the report (zip)",
        lambda: _report_zip(str(path), snapshot.identity, con, suite),
        file_name=f"tmlbench-report-{suite}.zip",
        mime="application/zip",
        key="download-report",
        icon=":material/download:",
        help="What `tmlbench report` writes for the whole suite (the filters do not apply): "
        "report.html, LEADERBOARD.md/.csv/.json/.html, every figure as PNG, SVG and the CSV of "
        "its numbers, provenance.json and manifest.json.",
    )


def footer(path: Path) -> None:
    published = published_at(current_snapshot(path).identity)
    st.caption(
        f"Snapshot: {literal(path, None)}, published {published} · read again as soon as a new "
        f"one is published: an open page offers it at the top within {NEWER_SNAPSHOT_EVERY} s, "
        "and shows it on its next interaction"
    )


# --- the page skeleton ---------------------------------------------------------------------------
# The router draws what is above every page (the newer-snapshot notice, the suite picker, the
# sidebar filters); ``page`` draws the rest of what every page shares, so a page's script holds
# only what is its own.
NOT_RANKED = "No agent is ranked yet (see the coverage on the Leaderboard page)."


@dataclass(frozen=True)
class Page:
    """What a page's body reads: the snapshot it is drawn from, the sidebar's filters and, on the
    pages that rank agents, the suite's status (None when unknown)."""

    path: Path
    filters: queries.Filters
    status: queries.SuiteStatus | None = None

    def query(
        self,
        read: Callable[Concatenate[duckdb.DuckDBPyConnection, P], R],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> R:
        """``read(connection, *args, **kwargs)`` on this page's snapshot, cached (``query``)."""
        return query(read, self.path, *args, **kwargs)


@contextmanager
def page(title: str, *, caption: str | None = None, provisional: bool = False) -> Iterator[Page]:
    """Every page's frame: its title (and caption); without runs, or for a suite without runs,
    how to make some instead of the page (``snapshot_or_stop``); the active filters; with
    ``provisional``, the warning that the suite's ranks may still change; then the page's own
    body (the ``with`` block), then the footer. A body that stops the page (``st.stop``, e.g.
    ``stop_if_empty``) ends it there, without the footer."""
    st.title(title)
    if caption is not None:
        st.caption(caption)
    path = snapshot_or_stop()
    filters = current_filters(path)
    filters_note(filters)
    status = provisional_note(path, filters) if provisional else None
    yield Page(path, filters, status)
    footer(path)


def stop_if_empty(frame: pd.DataFrame, message: str) -> None:
    """Say ``message`` and stop the page when ``frame`` has no rows (nothing below can be drawn)."""
    if frame.empty:
        st.warning(message)
        st.stop()


# --- a newer snapshot than the page shows ---------------------------------------------------------
NEWER_SNAPSHOT_EVERY = 5  # seconds between an open page's looks at the snapshot file (one stat)


def published_at(identity: queries.Identity | None) -> str:
    """When the snapshot file of ``identity`` was published (its mtime), in UTC."""
    if identity is None:
        return "never"
    moment = dt.datetime.fromtimestamp(identity[2] / 1e9, dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def newer_snapshot_notice(path: Path) -> None:
    """Offer a newer snapshot than the one this run reads, as soon as one is published, while
    the page stays open (app/router.py draws it above every page). Any rerun reads the newest
    snapshot already; this tells a reader who is not clicking that there is one."""
    _newer_snapshot_notice(path, current_snapshot(path).identity)


@st.fragment(run_every=NEWER_SNAPSHOT_EVERY)
def _newer_snapshot_notice(path: Path, shown: queries.Identity | None) -> None:
    # a fragment reruns with the arguments of the full run that drew it: ``shown`` stays the
    # identity of the snapshot the page was drawn from until the page itself reruns
    now = queries.snapshot_identity(path)
    if now is None or now == shown:
        return
    drawn_from = (
        f"this page shows the one published at {published_at(shown)}"
        if shown is not None
        else "this page was drawn before there was one"
    )
    st.info(
        f"A newer snapshot was published at {published_at(now)}; {drawn_from}.",
        icon=":material/update:",
    )
    if st.button("Show the new snapshot", key="newer_snapshot", type="primary"):
        st.rerun()  # the whole page, not just this fragment: it reads the new snapshot
