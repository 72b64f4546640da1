"""``tmlbench warehouse load|build``, ``tmlbench import tml-bench``, ``tmlbench sql``,
``tmlbench leaderboard``, ``tmlbench report``.

Registered through the ``tmlbench.commands`` entry points (pyproject.toml); the runner's CLI
never imports this module by name. It loads with every ``tmlbench`` command, ``--help``
included, so DuckDB, dbt and the importers are imported inside the commands that use them.
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.text import Text

from runner.config import Paths
from runner.errors import TmlbenchError
from runner.terminal import console, printable
from warehouse.db import WAREHOUSE_ENV, all_or_nothing, connect, one_row, warehouse_path

if TYPE_CHECKING:
    from warehouse.loader import LoadReport, SpecReport

warehouse_option = click.option(
    "--warehouse",
    "warehouse_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"DuckDB file (default: ${WAREHOUSE_ENV} or warehouse/tmlbench.duckdb).",
)


def _resolve(warehouse_file: Path | None) -> Path:
    return warehouse_file.expanduser().resolve() if warehouse_file else warehouse_path()


def say(*parts: str | tuple[str, str]) -> None:
    """Print one line: plain parts escaped by ``printable`` (they may come from a file, a
    database or a path: no markup, emoji code or control character in them is acted on),
    (text, style) parts are the command's own labels."""
    console.print(
        Text.assemble(*(p if isinstance(p, tuple) else printable(p) for p in parts)),
        highlight=False,
    )


def _print_report(report: LoadReport, what: str) -> None:
    say(
        f"{what}: ",
        (f"{report.new:,} new", "green"),
        f", {report.unchanged:,} unchanged, ",
        (f"{len(report.rejected):,} rejected", "red" if report.rejected else "green"),
    )
    for _, message in report.rejected:
        say("  ", ("rejected", "red"), f" {message}")


@click.group("warehouse")
def warehouse() -> None:
    """The DuckDB warehouse: load run records and specs into schema raw."""


RUNS_DIR_OPTION = click.option(
    "--runs-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the run records are (default: $TMLBENCH_RUNS_DIR or runs/).",
)


def _print_specs(specs: SpecReport) -> None:
    console.print(f"specs: {specs.tasks} tasks, {specs.agents} agents, {specs.suites} suites")
    for problem in specs.skipped:
        say("  ", ("skipped", "red"), f" {problem.message}")
    if specs.skipped:
        console.print(
            f"  {len(specs.skipped)} spec file(s) skipped: fix each as its line says; until "
            "then the warehouse keeps what an earlier load had for them",
            markup=False,
            highlight=False,
        )


def _load_everything(
    paths: Paths, runs_dir: Path | None, db: Path, rehash: bool = False
) -> tuple[SpecReport, LoadReport]:
    """Specs, then every record under the runs dir, into ``db``; prints what happened."""
    from warehouse.db import apply_ddl
    from warehouse.loader import LoadReport, load_runs, load_specs

    runs_dir = runs_dir or paths.runs_dir
    con = connect(db)
    try:
        apply_ddl(con)
        specs = load_specs(con, paths)
        _print_specs(specs)
        if runs_dir.is_dir():
            report = load_runs(con, runs_dir, rehash=rehash)
        else:
            say(f"no runs directory at {runs_dir}: no records to load")
            report = LoadReport(0, 0, [])
        _print_report(report, f"run records from {runs_dir}")
        (total,) = one_row(con, "select count(*) from raw.runs")
    finally:
        con.close()
    say(f"warehouse {db}: {total:,} runs")
    return specs, report


@warehouse.command("load")
@RUNS_DIR_OPTION
@click.option(
    "--rehash",
    is_flag=True,
    help="Read and hash every record file, not only those whose size, mtime or ctime changed.",
)
@warehouse_option
@click.pass_obj
def warehouse_load(
    paths: Paths, runs_dir: Path | None, rehash: bool, warehouse_file: Path | None
) -> None:
    """Load task/agent/suite specs and every new or changed run record (idempotent; exit code 1
    if any record is rejected or any spec file skipped: the rest is loaded all the same). Files
    already loaded and unchanged are only stat'ed."""
    specs, report = _load_everything(
        paths or Paths.from_env(), runs_dir, _resolve(warehouse_file), rehash=rehash
    )
    if report.rejected or specs.skipped:
        sys.exit(1)


@warehouse.command("build")
@RUNS_DIR_OPTION
@click.option(
    "--counted-successes",
    type=click.IntRange(min=1),
    help="Successes counted per setting of imported suites, which have no suite file (dbt var "
    "counted_successes; default 5, the paper's). A suite file's `attempts` is its own N.",
)
@warehouse_option
@click.pass_obj
def warehouse_build(
    paths: Paths, runs_dir: Path | None, counted_successes: int | None, warehouse_file: Path | None
) -> None:
    """Load specs and run records, then build the dbt marts (models, data and unit tests).

    Rejected records and skipped spec files are reported and left out; the marts are built
    from the rest.
    """
    from warehouse.marts import build_marts  # dbt: seconds to import, only for a build

    db = _resolve(warehouse_file)
    _load_everything(paths or Paths.from_env(), runs_dir, db)
    dbt_vars = {"counted_successes": counted_successes} if counted_successes else None
    with console.status("dbt build: staging → intermediate → marts, with data and unit tests"):
        result = build_marts(db, dbt_vars=dbt_vars)
    console.print(
        f"marts built in {result.seconds:.1f} s: {result.count('success')} models, "
        f"{result.count('pass')} tests passed. "
        "Query them: tmlbench sql -f warehouse/queries/leaderboard.sql"
    )


@click.group("import")
def import_group() -> None:
    """Import results of other harnesses into the warehouse."""


@import_group.command("tml-bench")
@click.argument("sources", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@warehouse_option
def import_tml_bench_cmd(sources: Sequence[Path], warehouse_file: Path | None) -> None:
    """Import the original TML-bench's results: its SQLite database (.sqlite/.db) or a folder
    of its result.json files (exit code 1 if any run is rejected). A source that cannot be read
    changes nothing: the sources are read in full before the warehouse is opened."""
    from warehouse.importers.tml_bench import import_source, read_tml_bench

    db = _resolve(warehouse_file)
    read = read_tml_bench(*sources)
    added: list[int] = []
    with all_or_nothing(db, keep_new=lambda: any(added)) as con:
        report = import_source(con, read)
        added += (report.runs.new, report.baselines.new)
        (total,) = one_row(con, "select count(*) from raw.runs where source = 'tml-bench'")
    _print_report(report.runs, f"TML-bench runs from {', '.join(map(str, sources))}")
    if report.baselines.total:
        _print_report(report.baselines, "TML-bench baselines")
    if report.unknown_fields:
        kept = ", ".join(f"{name} ({n:,} values)" for name, n in report.unknown_fields.items())
        say(f"kept column(s) this importer does not know, in source_fields: {kept}")
    for note in report.notes:
        say(f"note: {note}")
    if db.exists():
        say(f"warehouse {db}: {total:,} imported TML-bench runs")
    else:
        say(f"nothing imported: no warehouse created at {db}")
    if report.rejected:
        sys.exit(1)


@click.command("sql")
@click.argument("query", required=False)
@click.option(
    "-f",
    "--file",
    "query_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Read the query from a file (e.g. warehouse/queries/slowest_attempts.sql).",
)
@click.option("--write", is_flag=True, help="Open the warehouse read-write (default: read-only).")
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV instead of a table.")
@click.option(
    "--max-rows",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="Rows shown in the table (CSV output is never cut).",
)
@warehouse_option
def sql(
    query: str | None,
    query_file: Path | None,
    write: bool,
    as_csv: bool,
    max_rows: int,
    warehouse_file: Path | None,
) -> None:
    """Run a SQL QUERY against the warehouse (read-only unless --write) and print the result."""
    import duckdb

    if query_file is not None and query is None:
        text = query_file.read_text(encoding="utf-8")
    elif query is not None and query_file is None:
        text = query
    else:
        raise TmlbenchError("give a query or -f FILE (exactly one of them)")
    con = connect(_resolve(warehouse_file), read_only=not write)
    try:
        try:
            cur = con.execute(text)
            columns = [d[0] for d in cur.description] if cur.description else None
            rows = cur.fetchall() if columns else []
        except duckdb.Error as exc:
            hint = ""
            if not write and "read-only" in str(exc):
                hint = " (the warehouse is opened read-only; pass --write to change it)"
            elif isinstance(exc, duckdb.CatalogException) and "marts." in text.lower():
                hint = " (schema marts is built by dbt: run `tmlbench warehouse build` first)"
            raise TmlbenchError(f"SQL error: {exc}{hint}") from None
    finally:
        con.close()
    if columns is None:
        console.print("ok")
        return
    if as_csv:
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(rows)
        return
    from rich.table import Table

    table = Table()
    for column in columns:
        table.add_column(Text(printable(column)))
    for row in rows[:max_rows]:
        table.add_row(*(Text("" if v is None else printable(str(v))) for v in row))
    console.print(table)
    shown = f"{max_rows:,} of " if len(rows) > max_rows else ""
    console.print(f"{shown}{len(rows):,} row{'s' if len(rows) != 1 else ''}")


@click.command("leaderboard")
@click.option(
    "--suite", "suite_id", default="demo", show_default=True, help="Suite id (suites/<id>.yaml)."
)
@warehouse_option
def leaderboard(suite_id: str, warehouse_file: Path | None) -> None:
    """Print a suite's leaderboard from the marts (built by `tmlbench warehouse build`)."""
    from warehouse.leaderboard import print_board, read_board

    print_board(console, read_board(_resolve(warehouse_file), suite_id))


@click.command("report")
@click.option("--suite", "suite_id", required=True, help="Suite id (suites/<id>.yaml).")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder of the bundle, replaced whole: new, empty or an earlier report's (default: "
    "reports/<suite>/ next to the warehouse, where Dagster's reports asset publishes).",
)
@warehouse_option
def report(suite_id: str, out_dir: Path | None, warehouse_file: Path | None) -> None:
    """Write a suite's report bundle: figures (PNG, SVG, CSV), LEADERBOARD.md/.csv/.json/.html,
    report.html and manifest.json, from the marts (built by `tmlbench warehouse build`)."""
    from warehouse.report import publish_report
    from warehouse.report.publish import bundle_folder
    from warehouse.snapshot import reports_path

    warehouse_file = _resolve(warehouse_file)
    if not warehouse_file.is_file():
        raise TmlbenchError(
            f"no warehouse at {warehouse_file}: build it and its marts with `tmlbench warehouse "
            "build` (or `make run`)"
        )
    target = out_dir or bundle_folder(reports_path(warehouse_file), suite_id)
    con = connect(warehouse_file, read_only=True)
    try:
        manifest = publish_report(con, suite_id, target, f"the warehouse {warehouse_file}")
    finally:
        con.close()
    say(f"wrote {len(manifest.files) + 1} files to {target}")
    if manifest.provisional:
        say(("provisional", "yellow"), ": some settings still lack successes (see report.html)")
    if manifest.empty_figures:
        say(f"no rows to plot yet: {', '.join(manifest.empty_figures)}")
