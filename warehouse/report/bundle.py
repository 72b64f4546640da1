"""Write one suite's report bundle: figures (PNG, SVG, CSV), the leaderboard tables, report.html
and manifest.json, all read from the marts and display models of a DuckDB file.

Deterministic: the same warehouse gives byte-identical text files. Rows come in each select's
own order; floats are written as Python's ``repr`` (the shortest text that reads back as the
same double: exact, no rounding) in CSV and JSON; Markdown and HTML tables round for the eye
(score and points 4 decimals, ratios 3, rates as percent with 1); no clock is read: the only
times in the bundle are the data's own (the first and last attempt's ``created_at``).
"""

from __future__ import annotations

import csv
import hashlib
import html
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from runner import __version__
from runner.errors import TmlbenchError
from warehouse.report import render
from warehouse.report.figures import FIGURES, Frames, read_frames

LEADERBOARD_COLUMNS = (
    "rank",
    "agent_id",
    "score",
    "score_low",
    "score_high",
    "p_rank_1",
    "success_rate",
    "mean_rank",
    "rank_std",
    "run_rel_iqr",
    "n_cells",
    "successes",
    "attempts",
    "coverage",
    "contamination",
    "duplicates",
)


@dataclass(frozen=True)
class ReportManifest:
    """What ``write_report`` wrote: the folder, each file's path (relative) and sha256, the
    figures left out for want of rows, and whether the suite is provisional."""

    suite_id: str
    out_dir: Path
    files: dict[str, str]  # relative path → sha256
    empty_figures: tuple[str, ...]
    provisional: bool


def csv_text(frame: pd.DataFrame) -> str:
    """A frame as CSV: the models' column names, floats as ``repr`` (pandas' own writer keeps 16
    significant digits, which does not always read back as the same double), nulls empty,
    \\n line ends."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(frame.columns)
    for row in records(frame):
        writer.writerow(
            "" if v is None else repr(v) if isinstance(v, float) else v for v in row.values()
        )
    return out.getvalue()


def _plain(value: Any) -> Any:
    """A cell as JSON: NaN/NA as null, numpy scalars as Python's, timestamps as ISO text."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return None
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    if hasattr(value, "item"):
        return _plain(value.item())
    return value


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [
        {str(k): _plain(v) for k, v in row.items()}
        for row in frame.astype(object).to_dict(orient="records")
    ]


def json_text(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def _cell(name: str, value: Any) -> str:
    """A value as a table cell for people (Markdown and HTML), rounded by its unit."""
    value = _plain(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if name in ("success_rate", "p_rank_1", "share_monotone"):
            return f"{value:.1%}"
        if name in ("rank_std", "mean_rank"):
            return f"{value:.2f}"
        if name in ("run_rel_iqr", "gain"):
            return f"{value:.3f}"
        return f"{value:.4f}"
    return str(value)


# Markdown's own characters: ids come from spec files and imported results we did not write, and
# a cell is text, never a link, an image, emphasis or markup (ARCHITECTURE: shown, never rendered)
MARKDOWN_SPECIAL = "\\`*_{}[]()<>#+!|~&"


def markdown_text(text: str) -> str:
    """``text`` as literal Markdown inline text: each special character backslash-escaped, line
    breaks and other control characters as spaces."""
    flat = "".join(" " if ch.isspace() or not ch.isprintable() else ch for ch in text)
    return "".join("\\" + ch if ch in MARKDOWN_SPECIAL else ch for ch in flat)


def markdown_table(frame: pd.DataFrame) -> str:
    def row(cells: list[str]) -> str:
        return "| " + " | ".join(markdown_text(c) for c in cells) + " |"

    # the header: the models' column names (ours: letters, digits, underscores), as they are
    header = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    lines = [header, "|" + " --- |" * len(frame.columns)]
    lines += [row([_cell(k, v) for k, v in r.items()]) for r in records(frame)]
    return "\n".join(lines) + "\n"


def html_table(frame: pd.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_cell(k, v))}</td>" for k, v in r.items()) + "</tr>"
        for r in records(frame)
    )
    # in a box of its own that scrolls sideways: a wide table never widens the page
    return (
        f"<div class='table'><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody>"
        "</table></div>"
    )


def _one(con: duckdb.DuckDBPyConnection, sql: str, suite_id: str) -> dict[str, Any]:
    frame = con.execute(sql, [suite_id]).df()
    return {} if frame.empty else records(frame)[0]


def _rows(con: duckdb.DuckDBPyConnection, sql: str, suite_id: str) -> list[dict[str, Any]]:
    return records(con.execute(sql, [suite_id]).df())


UTC_TEXT = "%Y-%m-%dT%H:%M:%S.%fZ"
SUITE_RUNS = "select run_space, run_id from marts.suite_runs where suite_id = ?"


def read_provenance(con: duckdb.DuckDBPyConnection, suite_id: str) -> dict[str, Any]:
    """Where the suite's numbers come from: versions and hashes the attempts recorded, the
    suite file's hash and settings, counts per status, faults, duplicates, provisional state."""
    runs = f"raw.runs where (run_space, run_id) in ({SUITE_RUNS})"
    return {
        "report_tmlbench_version": __version__,
        "suite": _one(
            con,
            "select s.suite_id, s.title, s.spec_sha256 as suite_file_sha256, s.attempts, "
            "s.attempt_ceiling, s.harness_error_ceiling, s.provider_error_ceiling, "
            "st.counted_successes, st.settings_expected, st.settings_complete, "
            "st.agents_expected, st.agents_ranked, st.provisional "
            "from marts.suite_status st left join raw.suites s using (suite_id) "
            "where st.suite_id = ?",
            suite_id,
        ),
        "attempts": _one(
            con,
            # UTC text in SQL: a timestamp read into pandas would take the session's time zone
            "select count(*) as attempts, "
            f"strftime(timezone('UTC', min(created_at)), '{UTC_TEXT}') as first_created_at, "
            f"strftime(timezone('UTC', max(created_at)), '{UTC_TEXT}') as last_created_at "
            f"from {runs}",
            suite_id,
        ),
        "status_counts": _rows(
            con,
            f"select status, count(*) as attempts from {runs} group by status order by status",
            suite_id,
        ),
        "tmlbench_versions": _rows(
            con,
            f"select tmlbench_version, git_sha, count(*) as attempts from {runs} "
            "group by all order by all",
            suite_id,
        ),
        "tasks": _rows(
            con,
            "select task_id, task_spec_sha256, public_manifest_sha256 as prepared_data_sha256, "
            f"count(*) as attempts from {runs} group by all order by all",
            suite_id,
        ),
        "instructions": _rows(
            con,
            "select instruction_profile, instructions_sha256, count(*) as attempts "
            f"from {runs} group by all order by all",
            suite_id,
        ),
        # an agent spec's own hash is not recorded by the runs: its identity is what they record
        "agents": _rows(
            con,
            "select agent_id, agent_kind, harness, harness_version, provider, model_id, "
            f"sandbox_backend, count(*) as attempts from {runs} group by all order by all",
            suite_id,
        ),
        "provider_faults": _rows(
            con,
            "select agent_id, n_provider_error, provider_faults, interrupted_calls, "
            "rate_limited, n_harness_error from marts.success_rates where suite_id = ? "
            "order by agent_id",
            suite_id,
        ),
        "duplicates": _one(
            con,
            "select count(*) filter (where duplicated) as settings_with_duplicates, "
            "count(*) filter (where duplicated_counted) as settings_with_counted_duplicates, "
            "count(*) as settings from marts.setting_duplicates where suite_id = ?",
            suite_id,
        ),
        "incomplete_settings": _rows(
            con,
            "select agent_id, task_id, budget_seconds, successes, missing, "
            "harness_error_ceiling_reached, provider_error_ceiling_reached from marts.coverage "
            "where suite_id = ? and missing > 0 order by agent_id, task_id, budget_seconds",
            suite_id,
        ),
    }


def check_suite(con: duckdb.DuckDBPyConnection, suite_id: str, where: str) -> None:
    """Refuse a suite the warehouse does not know, or one without attempts, saying what to run."""
    present = {
        name
        for (name,) in con.execute(
            "select table_schema || '.' || table_name from information_schema.tables"
        ).fetchall()
    }
    needed = ["display.filter_options", "marts.suite_status", "marts.time_scaling_gains"]
    missing = [name for name in needed if name not in present]
    if missing:
        raise TmlbenchError(
            f"{where} has no {', '.join(missing)}: build the marts with `tmlbench warehouse "
            "build` (or `make run`)"
        )
    suites = dict(
        con.execute("select suite_id, has_runs from display.filter_options order by 1").fetchall()
    )
    if suite_id not in suites:
        raise TmlbenchError(
            f"unknown suite {suite_id!r} in {where} (it has: {', '.join(suites) or 'none'}); "
            "load the suite files with `tmlbench warehouse build`"
        )
    if not suites[suite_id]:
        raise TmlbenchError(
            f"suite {suite_id!r} has no attempt in {where}; run: tmlbench bench --suite "
            f"{suite_id}, then tmlbench warehouse build"
        )


def read_leaderboard(con: duckdb.DuckDBPyConnection, suite_id: str) -> pd.DataFrame:
    """The three variants, best first, with the dashboard's columns and the paper's min-max
    score and rank beside the primary ones (``score_paper``, ``rank_paper``: for replication)."""
    columns = ", ".join(f"d.{c}" for c in LEADERBOARD_COLUMNS)
    return con.execute(
        f"select d.variant, {columns}, l.score_paper, l.rank_paper "
        "from display.leaderboard_display d join marts.leaderboard l "
        "using (suite_id, agent_id, variant) where suite_id = ? "
        "order by case variant when 'best_budget' then 0 when 'all_cells' then 1 else 2 end, "
        "d.rank, d.agent_id",
        [suite_id],
    ).df()


VARIANT_TITLES = {
    "best_budget": "Best budget per task (primary)",
    "all_cells": "Mean over all task × budget cells",
    "largest_budget": "Largest budget only",
}
NO_RANKED_AGENT = (
    "No agent is ranked yet: an agent is ranked once it has enough successes in every setting "
    "the suite lists (see the incomplete settings under Provenance)."
)

RULES = (
    "Each attempt runs in a sandbox with no network under a hard time budget and is scored on "
    "labels the agent never saw; exactly one status per attempt, and only a success has a score "
    "that counts. A setting (agent × task × budget) scores the median of its first {n} "
    "successful attempts by creation time; an agent is ranked only with {n} successes in every "
    "setting the suite lists, and a suite with settings still missing is provisional. Harness "
    "faults and provider faults (429, 5xx, cut streams) are not the agent's: they are counted "
    "apart, re-run up to a ceiling per setting ({harness} harness, {provider} provider), and "
    "kept out of the success rate.",
    "Within each task × budget cell the setting scores are turned higher-is-better and "
    "normalized to points (primary: anchored at reference points no agent controls; the paper's "
    "min-max variant is kept for replication). The primary leaderboard takes, per task, the "
    "agent's best points over budgets, then the mean over tasks, with a bootstrap 95% interval; "
    "the variants average all cells or the largest budget only. Rank stability is the mean and "
    "sample standard deviation of the per-task ranks; run-to-run stability is the median over "
    "settings of IQR ÷ |median|; time scaling is the mean points per budget and the share of "
    "curves that never get worse. Every number here is read from the warehouse's dbt marts.",
)


def _figure_html(name: str, title: str, caption: str, svg: str | None) -> str:
    body = svg if svg is not None else "<p class='empty'>No rows to plot for this suite (yet).</p>"
    return (
        f"<figure id='fig-{name}' data-figure='{name}'><figcaption><b>{html.escape(title)}</b> "
        f"— {html.escape(caption)} <a href='figures/{name}.csv'>CSV</a></figcaption>"
        f"{body}</figure>"
    )


CSS = (
    "body{font-family:sans-serif;max-width:1000px;margin:2em auto;color:#222}"
    "table{border-collapse:collapse;font-size:.9em;margin:.5em 0}"
    "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}"
    ".table{overflow-x:auto}"
    ".provisional{background:#fff3cd;border:1px solid #e0b400;padding:.6em}"
    "figure{margin:1.5em 0}figcaption{margin-bottom:.4em}"
)


def report_html(
    suite_id: str,
    provenance: dict[str, Any],
    board: pd.DataFrame,
    figures_svg: dict[str, str | None],
) -> str:
    suite = provenance["suite"]
    title = f"tmlbench report: {suite.get('title') or suite_id}"
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
    ]
    if suite.get("provisional"):
        parts.append(
            "<p class='provisional' id='provisional'><b>Provisional</b>: "
            f"{suite['settings_complete']} of {suite['settings_expected']} settings have enough "
            "successes; agents still missing some are not ranked, and ranks may change.</p>"
        )
    attempts = provenance["attempts"]
    parts.append(
        f"<p>Suite <code>{html.escape(suite_id)}</code>: {attempts['attempts']} attempts from "
        f"{html.escape(str(attempts['first_created_at']))} to "
        f"{html.escape(str(attempts['last_created_at']))}; N = "
        f"{suite.get('counted_successes')} counted successes per setting.</p>"
    )
    parts.append("<h2>Leaderboard</h2>")
    if board.empty:
        parts.append(f"<p>{html.escape(NO_RANKED_AGENT)}</p>")
    for variant, rows in board.groupby("variant", sort=False):
        parts.append(f"<h3>{html.escape(VARIANT_TITLES[str(variant)])}</h3>")
        parts.append(html_table(rows.drop(columns="variant").dropna(axis=1, how="all")))
    parts.append("<h2>Rules</h2>")
    n = suite.get("counted_successes")
    parts += [
        f"<p>{html.escape(p.format(n=n, harness=suite.get('harness_error_ceiling'), provider=suite.get('provider_error_ceiling')))}</p>"
        for p in RULES
    ]
    parts.append("<h2>Figures</h2>")
    for figure in FIGURES:
        parts.append(
            _figure_html(figure.name, figure.title, figure.caption, figures_svg[figure.name])
        )
    parts.append("<h2>Provenance</h2>")
    for key, value in provenance.items():
        parts.append(f"<h3>{html.escape(key.replace('_', ' '))}</h3>")
        if isinstance(value, list):
            parts.append(html_table(pd.DataFrame(value)) if value else "<p>none</p>")
        elif isinstance(value, dict):
            parts.append(html_table(pd.DataFrame([value])) if value else "<p>none</p>")
        else:
            parts.append(f"<p>{html.escape(str(value))}</p>")
    parts.append("</body></html>\n")
    return "".join(parts)


def leaderboard_markdown(suite_id: str, provenance: dict[str, Any], board: pd.DataFrame) -> str:
    suite = provenance["suite"]
    lines = [f"# Leaderboard: {markdown_text(str(suite.get('title') or suite_id))}", ""]
    if suite.get("provisional"):
        lines += [
            f"**Provisional**: {suite['settings_complete']} of {suite['settings_expected']} "
            "settings complete.",
            "",
        ]
    if board.empty:
        lines += [NO_RANKED_AGENT, ""]
    for variant, rows in board.groupby("variant", sort=False):
        lines += [
            f"## {VARIANT_TITLES[str(variant)]}",
            "",
            markdown_table(rows.drop(columns="variant")),
            "",
        ]
    return "\n".join(lines)


def leaderboard_html(suite_id: str, provenance: dict[str, Any], board: pd.DataFrame) -> str:
    suite = provenance["suite"]
    title = f"Leaderboard: {suite.get('title') or suite_id}"
    notice = (
        f"<p class='provisional'><b>Provisional</b>: {suite['settings_complete']} of "
        f"{suite['settings_expected']} settings complete.</p>"
        if suite.get("provisional")
        else ""
    )
    body = f"<p>{html.escape(NO_RANKED_AGENT)}</p>" if board.empty else html_table(board)
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>{notice}{body}</body></html>\n"
    )


def write_report(
    con: duckdb.DuckDBPyConnection, suite_id: str, out_dir: Path, source: str = "the warehouse"
) -> ReportManifest:
    """Write the bundle of ``suite_id`` into ``out_dir`` from an open connection to a warehouse
    or a snapshot (its catalog in use: marts, display and raw readable by those names).

    Files: figures/<name>.{png,svg,csv} for every figure with rows, LEADERBOARD.{md,csv,json,
    html}, report.html, provenance.json and manifest.json (every other file and its sha256).
    Raises TmlbenchError for an unknown suite or one without attempts (``source`` names the
    database in its message), before writing anything.
    """
    check_suite(con, suite_id, source)
    frames: Frames = read_frames(con, suite_id)
    provenance = read_provenance(con, suite_id)
    board = read_leaderboard(con, suite_id)

    out_dir = Path(out_dir)
    (out_dir / "figures").mkdir(parents=True, exist_ok=True)
    written: dict[str, bytes] = {}
    svgs: dict[str, str | None] = {}
    for figure in FIGURES:
        frame = frames[figure.name]
        # a figure without rows is left out (named in the manifest), never an empty picture
        for suffix in ("png", "svg", "csv"):
            (out_dir / "figures" / f"{figure.name}.{suffix}").unlink(missing_ok=True)
        if frame.empty:
            svgs[figure.name] = None
            continue
        chart = figure.draw(frame, frames)
        svg = render.to_svg(chart)
        svgs[figure.name] = svg
        written[f"figures/{figure.name}.csv"] = csv_text(frame).encode()
        written[f"figures/{figure.name}.svg"] = svg.encode()
        written[f"figures/{figure.name}.png"] = render.svg_to_png(svg)

    written["LEADERBOARD.csv"] = csv_text(board).encode()
    written["LEADERBOARD.json"] = json_text(
        {
            "suite_id": suite_id,
            "provisional": bool(provenance["suite"].get("provisional")),
            "rows": records(board),
        }
    ).encode()
    written["LEADERBOARD.md"] = leaderboard_markdown(suite_id, provenance, board).encode()
    written["LEADERBOARD.html"] = leaderboard_html(suite_id, provenance, board).encode()
    written["provenance.json"] = json_text(provenance).encode()
    written["report.html"] = report_html(suite_id, provenance, board, svgs).encode()

    for name, data in written.items():
        (out_dir / name).write_bytes(data)
    files = {name: hashlib.sha256(data).hexdigest() for name, data in sorted(written.items())}
    empty = tuple(f.name for f in FIGURES if svgs[f.name] is None)
    provisional = bool(provenance["suite"].get("provisional"))
    (out_dir / "manifest.json").write_text(
        json_text(
            {
                "suite_id": suite_id,
                "tmlbench_version": __version__,
                "provisional": provisional,
                "empty_figures": list(empty),
                "files": files,
            }
        ),
        encoding="utf-8",
    )
    return ReportManifest(suite_id, out_dir, files, empty, provisional)
