"""``tmlbench import tml-bench`` survives any file: hostile result databases and trees.

Results are downloaded from others, so the importer is attacked at its mechanism: a fixed
corpus of named cases, one per known route (each through the real CLI in its own process, under
a memory cap and a deadline), and generated cases (``hypothesis``) that mutate valid fixtures
written as the original harness writes them, in process. Every case must end in exit 0, or a
refusal that names what it refused (exit 1: rows rejected, each by name; exit 2: the source
refused); never a traceback, never a raw control character on the terminal, and a refused
source changes nothing on disk.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing
import os
import re
import resource
import sqlite3
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner.errors import TmlbenchError
from runner.sandbox.treewalk import remove_tree
from runner.terminal import printable
from tests.support import tml_bench as tb
from warehouse.db import all_or_nothing, apply_ddl
from warehouse.importers.tml_bench import import_source, read_tml_bench
from warehouse.importers.tml_bench_format import RUN_COLUMNS, RUN_KEY_COLUMNS, Limits

# slow: hundreds of generated hostile databases and result trees, each imported (minutes)
pytestmark = pytest.mark.slow

PT = "-08:00"
RUNS = [
    tb.result("churn_a1", f"2026-02-01T10:00:00{PT}", score=0.92),
    tb.result("churn_a2", f"2026-02-01T11:00:00{PT}", status="timeout"),
    tb.result("traffic_a1", f"2026-02-02T08:00:00{PT}", competition=tb.TRAFFIC, score=31.5),
]
ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b[31m\u202e\x9b"  # retitle, clear, colour, bidi, CSI
# What one import may add to the preloaded CLI's address space. Virtual, not resident: DuckDB
# reserves its blocks (64 MiB at a commit) beside its threads' arenas, and 1 GiB failed the
# commit of a 64 MiB import now and then.
MEMORY_CAP = 2 << 30
DEADLINE = 60.0  # seconds per case: each takes well under one; the margin is for a busy machine


# ---------------------------------------------------------------------------------------------
# the corpus: builders of hostile sources


def database(tmp: Path, runs: list[Any] = RUNS, **kw: Any) -> Path:
    return tb.database(tmp / "results.sqlite", runs, **kw)


def sql(path: Path, *statements: str, params: tuple[Any, ...] = ()) -> Path:
    con = sqlite3.connect(path)
    for statement in statements:
        con.execute(statement, params if "?" in statement else ())
    con.commit()
    con.close()
    return path


def tree(tmp: Path, runs: list[Any] = RUNS) -> Path:
    return tb.result_tree(tmp / "runs", runs)


def result_file(tmp: Path) -> Path:
    return tmp / "runs" / "churn_a1" / "result.json"


def tree_where(tmp: Path, change: Callable[[Path], object]) -> Path:
    """The tree, its first result.json changed by ``change`` (given its path)."""
    root = tree(tmp)
    change(result_file(tmp))
    return root


def replaced_by(make: Callable[[Path], object]) -> Callable[[Path], object]:
    """A change that puts what ``make`` makes in the file's place."""
    return lambda path: path.unlink() or make(path)


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def deep_folders(root: Path, depth: int) -> None:
    """``depth`` nested folders, made through descriptors (the path outgrows PATH_MAX)."""
    root.mkdir(parents=True)
    fd = os.open(root, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)


def with_result(tmp: Path, edit: Callable[[dict[str, Any]], object]) -> Path:
    root = tree(tmp)
    path = result_file(tmp)
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    return root


def million_rows(tmp: Path) -> Path:
    return sql(
        database(tmp, RUNS[:1], baselines=False),
        "insert into runs (run_id, created_at, competition_id, status) "
        "with recursive n(i) as (select 1 union all select i + 1 from n where i < 1000000) "
        "select 'r' || i, '2026-02-01T10:00:00+00:00', 'c', 'timeout' from n",
    )


def noise(tmp: Path, rows: int, char: str) -> Path:
    """``rows`` runs, each with a megabyte of ``char`` in a column the importer does not know."""
    runs = [tb.result(f"r{i}", "2026-02-01T10:00:00Z") for i in range(rows)]
    return sql(
        database(tmp, runs, baselines=False),
        "alter table runs add column noise",
        f"update runs set noise = printf('%.*c', 1040000, {char})",
    )


def wal_mode(tmp: Path) -> Path:
    path = database(tmp)
    con = sqlite3.connect(path)
    con.execute("pragma journal_mode=wal")
    con.execute("update runs set seed = 8")
    con.commit()
    con.close()
    return path


@dataclass(frozen=True)
class Case:
    """A hostile source, the exit codes that are a right answer, and what the output must say."""

    build: Callable[[Path], Path]
    exits: tuple[int, ...]
    says: str = ""


CORPUS: dict[str, Case] = {
    # the database: not one, or not a file
    "zero-byte file": Case(lambda t: (t / "z.sqlite").touch() or t / "z.sqlite", (2,),
                           "no table 'runs'"),
    "a text file": Case(lambda t: (t / "x.txt").write_text("hello\n") and t / "x.txt", (2,),
                        "not a readable SQLite database"),
    "random bytes": Case(lambda t: (t / "r.db").write_bytes(os.urandom(8192)) and t / "r.db",
                         (2,), "not a readable SQLite database"),
    "a DuckDB file": Case(lambda t: duckdb.connect(str(t / "w.db")).close() or t / "w.db", (2,),
                          "not a readable SQLite database"),
    "truncated database": Case(lambda t: _truncated(database(t), 4096), (2,), "results.sqlite"),
    "garbage over its pages": Case(lambda t: _scribble(database(t)), (0, 1, 2), "results.sqlite"),
    "a symlink to a database": Case(lambda t: _link(database(t), t / "link.sqlite"), (2,),
                                    "links are never followed"),
    "a symlink to /dev/zero": Case(lambda t: _link(Path("/dev/zero"), t / "zero.sqlite"), (2,),
                                   "links are never followed"),
    "a FIFO": Case(lambda t: os.mkfifo(t / "f.sqlite") or t / "f.sqlite", (2,),
                   "not a regular file"),
    "a device": Case(lambda t: Path("/dev/zero"), (2,), "not a regular file"),
    # the database: its schema
    "runs is a view that loops": Case(lambda t: sql(
        t / "v.sqlite",
        "create view runs as with recursive n(i) as (select 1 union all select i + 1 from n) "
        "select i as run_id, i as created_at, i as competition_id, i as status from n"),
        (2,), "no table 'runs'"),
    "a looping view beside runs": Case(lambda t: sql(
        database(t), "create view spin as with recursive n(i) as (select 1 union all "
        "select i + 1 from n) select * from n"), (0,), "3 new"),
    "runs without its key columns": Case(lambda t: sql(t / "k.sqlite", "create table runs (a)"),
                                         (2,), "no column run_id"),
    "runs without rowid, empty": Case(lambda t: sql(
        t / "w.sqlite", "create table runs (run_id primary key, created_at, competition_id, "
        "status) without rowid"), (0,), "nothing imported: no warehouse created"),
    "a million rows": Case(million_rows, (2,), "more than 50,000 rows"),
    "values up to the byte limit": Case(lambda t: noise(t, 60, "'x'"), (0,),
                                        "runs.noise (60 values)"),
    "past the byte limit": Case(lambda t: noise(t, 70, "'x'"), (2,),
                                "more than 64 MiB of values"),
    "control characters, which JSON stores sixfold": Case(lambda t: noise(t, 12, "char(1)"),
                                                          (2,), "more than 64 MiB of values"),
    "1,500 columns": Case(lambda t: sql(
        t / "wide.sqlite", "create table runs (run_id, created_at, competition_id, status, "
        + ", ".join(f"c{i}" for i in range(1500)) + ")", "insert into runs (run_id, created_at, "
        "competition_id, status, c7) values ('w', '2026-02-01T10:00:00Z', 'c', 'timeout', 1)"),
        (0,), "runs.c7 (1 values)"),
    "wrong types everywhere": Case(lambda t: sql(
        database(t), "update runs set created_at = 12, competition_id = 3.5, status = x'01', "
        "budget_time_seconds = 'ten', seed = 1e300, score_raw = 'inf'",
        "update runs set run_id = x'00ff' where rowid = 1",
        "update baselines set created_at = 'never', score_raw = x'00'"), (1,), "rejected"),
    "integers that fit nothing": Case(lambda t: sql(
        database(t), "update runs set budget_time_seconds = '1e300', seed = 9223372036854775807, "
        "max_tokens = -1e30"), (1,), "too large for a whole number"),
    "escape sequences in names and values": Case(lambda t: sql(
        database(t), f'alter table runs add column "col{ESCAPES}"',
        f'update runs set "col{ESCAPES}" = 1, run_id = run_id || ?, status = ?',
        params=(ESCAPES, ESCAPES)), (1,), "\\x1b]0;pwned"),
    "a run id of a megabyte": Case(lambda t: sql(
        database(t), "update runs set run_id = printf('%.*c', 1000000, 'x') || rowid, "
        "status = 'exploded'"), (1,), "more characters"),
    "created_at in year 0 in UTC": Case(lambda t: sql(
        database(t), "update runs set created_at = '0001-01-01T00:00:00+14:00'"), (1,),
        "outside the dates a timestamp holds"),
    "created_at past year 9999 in UTC": Case(lambda t: sql(
        database(t), "update runs set created_at = '9999-12-31T23:59:59-12:00'"), (1,),
        "outside the dates a timestamp holds"),
    "an offset no time zone has": Case(lambda t: sql(
        database(t), "update runs set created_at = '2026-02-01T10:00:00+23:59'"), (1,),
        "offset no time zone has"),
    "a write-ahead-log database": Case(wal_mode, (0,), "3 new"),
    # result.json trees
    "JSON nested 100,000 deep": Case(lambda t: tree_where(
        t, lambda p: p.write_text(nested(100_000))), (1,), "nested deeper than 32"),
    "JSON nested 33 deep in notes": Case(lambda t: with_result(
        t, lambda d: d["artifacts"]["notes"].update(deep=json.loads(nested(31)))), (1,),
        "nested deeper than 32"),
    "a 1,500-level folder tree": Case(lambda t: deep_folders(t / "deep", 1500) or t / "deep",
                                      (1,), "more than 16 folders"),
    "result.json links to /dev/zero": Case(lambda t: tree_where(
        t, replaced_by(lambda p: p.symlink_to("/dev/zero"))), (1,), "links are never followed"),
    "result.json links to a result": Case(lambda t: tree_where(
        t, replaced_by(lambda p: p.symlink_to(p.parent.parent / "churn_a2" / "result.json"))),
        (1,), "links are never followed"),
    "result.json is a FIFO": Case(lambda t: tree_where(t, replaced_by(os.mkfifo)), (1,),
                                  "not a regular file"),
    "result.json is a folder": Case(lambda t: tree_where(t, replaced_by(os.mkdir)), (1,),
                                    "not a regular file"),
    "result.json of 2 MiB": Case(lambda t: tree_where(
        t, lambda p: p.write_text(" " * (2 << 20) + "{}")), (1,), "too large"),
    "result.json not UTF-8": Case(lambda t: tree_where(
        t, lambda p: p.write_bytes(b'{"run_id": "\xff\xfe"}')), (1,), "not JSON"),
    "a 5,000-digit number": Case(lambda t: tree_where(
        t, lambda p: p.write_text(p.read_text().replace('"seed": 7', '"seed": ' + "9" * 5000))),
        (1,), "not JSON"),
    "model is a string": Case(lambda t: with_result(t, lambda d: d.update(model="glm")), (1,),
                              "'model' must be an object"),
    "a run folder is a link": Case(lambda t: tree_where(
        t, lambda p: (p.parent.parent / "linked").symlink_to(p.parent)), (1,),
        "links are never followed"),
    "the tree is a link": Case(lambda t: _link(tree(t), t / "runs-link"), (2,),
                               "links are never followed"),
    "escape sequences in folder names": Case(lambda t: tree(t, [tb.result(
        f"r{ESCAPES}", "never", score=0.5)]), (1,), "\\x1b[2J"),
    "an empty folder": Case(lambda t: (t / "empty").mkdir() or t / "empty", (2,),
                            "no result.json files found"),
}  # fmt: skip


def _link(target: Path, link: Path) -> Path:
    link.symlink_to(target)
    return link


def _truncated(path: Path, size: int) -> Path:
    os.truncate(path, size)
    return path


def _scribble(path: Path) -> Path:
    data = bytearray(path.read_bytes())
    for at in range(200, len(data), 997):  # past the 100-byte header: every page hit
        data[at] ^= 0x5A
    path.write_bytes(bytes(data))
    return path


# ---------------------------------------------------------------------------------------------
# the CLI, in its own process


def _cli_in_child(args: list[str], output: str) -> None:
    """Run ``tmlbench ARGS`` (runner.command_line.main) in this forked process, capped, output to a file."""
    vm = int(re.search(r"VmSize:\s+(\d+)", Path("/proc/self/status").read_text())[1]) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (vm + MEMORY_CAP, vm + MEMORY_CAP))
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    sys.argv = ["tmlbench", *args]
    from runner.command_line import main

    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # a crash: shown, and an exit code no right answer has
        import traceback

        traceback.print_exc()
        code = 99
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


@pytest.fixture(scope="module")
def cli_processes() -> Iterator[Any]:
    """Processes forked from one that has the CLI imported: each case costs a fork, not a start."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(
        ["runner.command_line", "warehouse.cli", "warehouse.importers.tml_bench"]
    )
    yield ctx


def run_cli(ctx: Any, tmp: Path, *args: str) -> tuple[int, str]:
    output = tmp / "cli-output.txt"
    process = ctx.Process(target=_cli_in_child, args=(list(args), str(output)))
    # The child re-runs the parent's __main__ unless it is a bare module; after a dashboard page
    # test that is the page's script (Streamlit's AppTest runs pages as __main__).
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        process.start()
    finally:
        sys.modules["__main__"] = main
    process.join(DEADLINE)
    if process.is_alive():
        process.kill()
        process.join()
        pytest.fail(f"tmlbench {' '.join(args)} still running after {DEADLINE} s")
    return process.exitcode, output.read_text(errors="replace") if output.exists() else ""


@pytest.mark.parametrize("name", list(CORPUS))
def test_hostile_source_ends_in_an_import_or_a_clear_refusal(
    name: str, cli_processes: Any, tmp_path: Path
) -> None:
    case = CORPUS[name]
    (tmp_path / "src").mkdir()
    try:
        source = case.build(tmp_path / "src")
        warehouse = tmp_path / "wh" / "warehouse.duckdb"
        args = ("import", "tml-bench", str(source), "--warehouse", str(warehouse))
        code, output = run_cli(cli_processes, tmp_path, *args)
    finally:
        remove_tree(tmp_path / "src")  # iteratively: pytest's rmtree recurses on the deep tree
    assert code in case.exits, output[-3000:]
    assert "Traceback" not in output
    assert case.says in output, output[-3000:]
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]", output)  # all escaped
    if code == 1:  # every rejected row is named by its source
        rejected = [line for line in output.splitlines() if line.startswith("  rejected ")]
        assert rejected and all(str(tmp_path / "src") in line for line in rejected), output
    if code == 2:
        assert output.startswith("error: ") and str(source) in output, output
    # A refused source, or nothing new: no warehouse made, no folder left; never a part-made one.
    made = sorted(p.name for p in warehouse.parent.iterdir()) if warehouse.parent.exists() else []
    kept = code != 2 and "nothing imported: no warehouse created" not in output
    assert made == (["warehouse.duckdb"] if kept else []), made


def test_a_refused_source_leaves_an_existing_warehouse_as_it_was(
    cli_processes: Any, tmp_path: Path
) -> None:
    warehouse = tmp_path / "wh.duckdb"
    good = database(tmp_path)
    code, output = run_cli(
        cli_processes, tmp_path, "import", "tml-bench", str(good), "--warehouse", str(warehouse)
    )
    assert code == 0, output
    before = hashlib.sha256(warehouse.read_bytes()).hexdigest()
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n")
    again = ["import", "tml-bench", str(good), str(text), "--warehouse", str(warehouse)]
    code, output = run_cli(cli_processes, tmp_path, *again)
    assert code == 2 and "notes.txt: not a readable SQLite database" in output
    assert hashlib.sha256(warehouse.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp_path.iterdir() if "wh" in p.name) == ["wh.duckdb"]


# ---------------------------------------------------------------------------------------------
# generated cases: valid fixtures, mutated (in process: a read and an import into memory)


HOSTILE_TEXT = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs",)) | st.sampled_from(list(ESCAPES)),
    max_size=40,
)
OFFSETS = ["", "Z", "+14:00", "-12:00", "+23:59", "-23:59:59", "+00:00"]
TIMESTAMPS = st.one_of(
    st.sampled_from(  # the ends of the calendar, where an offset takes a date out of it
        [f"{day}{offset}" for day in ("0001-01-01T00:00:00", "9999-12-31T23:59:59")
         for offset in OFFSETS]),
    st.builds(
        lambda year, month, day, offset: f"{year:04d}-{month:02d}-{day:02d}T12:00:00{offset}",
        st.integers(1, 9999), st.integers(1, 12), st.integers(1, 28), st.sampled_from(OFFSETS)),
)  # fmt: skip
SQL_VALUES = st.one_of(
    TIMESTAMPS,
    st.none(),
    HOSTILE_TEXT,
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.binary(max_size=64),
    st.sampled_from(["1e300", "-1e300", "nan", "inf", "0x10", "", " ", "success", "timeout"]),
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | HOSTILE_TEXT | TIMESTAMPS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(HOSTILE_TEXT, inner, max_size=3),
    max_leaves=12,
)
COLUMNS = st.sampled_from(RUN_KEY_COLUMNS) | st.sampled_from(RUN_COLUMNS)  # keys: half the time
SMALL = Limits(max_rows=40, max_bytes=200_000, max_depth=3, max_entries=60, max_value_bytes=4096)


def import_all(*sources: Path) -> list[tuple[str, str]]:
    """Read and import into a fresh in-memory warehouse; the rejected rows (a TmlbenchError, a
    refused source, propagates: the caller says which are right)."""
    read = read_tml_bench(*sources, limits=SMALL)
    con = duckdb.connect(":memory:")
    try:
        apply_ddl(con)
        report = import_source(con, read)
        (n,) = con.execute("select count(*) from raw.runs").fetchone() or (0,)
        assert n == report.runs.new
        return report.rejected
    finally:
        con.close()


def assert_named(messages: list[str], where: Path) -> None:
    for message in messages:
        assert message.startswith(str(where)), message
        assert printable(message).isprintable()


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("template")
    database(root)
    tree(root)
    return root


def refused_or_named(path: Path) -> list[tuple[str, str]]:
    """Import ``path``: a refusal or rejections must name it (the rejections, if any, returned)."""
    try:
        rejected = import_all(path)
    except TmlbenchError as exc:
        assert str(exc).startswith(str(path)), exc
        return []
    assert_named([m for _, m in rejected], path)
    return rejected


# 60 databases: values and schemas mutated
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    cells=st.lists(
        st.tuples(st.integers(1, len(RUNS)), COLUMNS, TIMESTAMPS | SQL_VALUES), max_size=6
    ),
    created_at=TIMESTAMPS | SQL_VALUES,  # every run's, the field each must have right
    extra_columns=st.lists(HOSTILE_TEXT.filter(lambda s: s.strip()), max_size=3, unique=True),
    extra_rows=st.integers(0, 40),  # past SMALL.max_rows from 36 on (3 runs, 2 baselines)
)
def test_mutated_databases_import_or_are_refused_by_name(
    template: Path,
    tmp_path_factory: pytest.TempPathFactory,
    cells: list[tuple[int, str, Any]],
    created_at: Any,
    extra_columns: list[str],
    extra_rows: int,
) -> None:
    path = tmp_path_factory.mktemp("db") / "results.sqlite"
    path.write_bytes((template / "results.sqlite").read_bytes())
    con = sqlite3.connect(path)
    for name in extra_columns:
        quoted = name.replace('"', '""').replace("\x00", "")
        with contextlib.suppress(sqlite3.Error):  # a name SQLite refuses: not this test's case
            con.execute(f'alter table runs add column "{quoted}"')
            con.execute(f'update runs set "{quoted}" = ?', (name,))
    with contextlib.suppress(sqlite3.IntegrityError):  # NOT NULL: the original's own
        con.execute("update runs set created_at = ?", (created_at,))
    for rowid, column, value in cells:
        with contextlib.suppress(sqlite3.IntegrityError):  # NOT NULL, UNIQUE: the original's
            con.execute(f'update runs set "{column}" = ? where rowid = ?', (value, rowid))
    if extra_rows:
        con.execute(
            "insert into runs (run_id, created_at, competition_id, status) with recursive "
            "n(i) as (select 1 union all select i + 1 from n where i < ?) "
            "select 'x' || i, '2026-01-01', 'c', 'timeout' from n",
            (extra_rows,),
        )
    con.commit()
    con.close()
    try:
        rejected = import_all(path)
    except TmlbenchError as exc:
        assert str(exc).startswith(str(path)), exc
        assert len(RUNS) + 2 + extra_rows > SMALL.max_rows or "larger than" in str(exc), exc
        return
    assert_named([m for _, m in rejected], path)


# 30 databases with bytes flipped anywhere (header, schema, pages)
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(flips=st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(1, 255)), min_size=1))
def test_corrupted_databases_import_or_are_refused_by_name(
    template: Path, tmp_path_factory: pytest.TempPathFactory, flips: list[tuple[int, int]]
) -> None:
    path = tmp_path_factory.mktemp("db") / "results.sqlite"
    data = bytearray((template / "results.sqlite").read_bytes())
    for at, mask in flips:
        data[at % len(data)] ^= mask
    path.write_bytes(bytes(data))
    refused_or_named(path)


# 60 result trees: documents mutated at any path, replaced by bytes, links and FIFOs
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    edits=st.lists(
        st.tuples(
            st.integers(0, len(RUNS) - 1),
            st.lists(st.sampled_from(["model", "artifacts", "notes", "run_id", "created_at",
                                      "budget", "time_seconds", "status", "seed", "x"]),
                     min_size=1, max_size=3),
            JSON_VALUES | st.integers(20, 40).map(lambda n: json.loads(nested(n))),
        ),
        max_size=5,
    ),
    replace=st.lists(
        st.tuples(st.integers(0, len(RUNS) - 1),
                  st.sampled_from(["bytes", "fifo", "link", "folder", "deep"]),
                  st.binary(max_size=200)),
        max_size=2,
    ),
)  # fmt: skip
def test_mutated_result_trees_import_or_are_refused_by_name(
    template: Path,
    tmp_path_factory: pytest.TempPathFactory,
    edits: list[tuple[int, list[str], Any]],
    replace: list[tuple[int, str, bytes]],
) -> None:
    root = tmp_path_factory.mktemp("tree") / "runs"
    docs = {r.run_id: json.loads((template / "runs" / r.run_id / "result.json").read_text())
            for r in RUNS}  # fmt: skip
    for index, keys, value in edits:
        node = docs[RUNS[index].run_id]
        for key in keys[:-1]:
            child = node.get(key) if isinstance(node, dict) else None
            if not isinstance(child, dict):
                child = node[key] = {} if isinstance(node, dict) else None
            if child is None:
                break
            node = child
        else:
            node[keys[-1]] = value
    for run_id, doc in docs.items():
        (root / run_id).mkdir(parents=True)
        (root / run_id / "result.json").write_text(json.dumps(doc))
    for n, (index, how, data) in enumerate(replace):
        path = root / RUNS[index].run_id / "result.json"
        if path.is_symlink() or (path.exists() and not path.is_file()):
            continue
        path.unlink(missing_ok=True)
        if how == "bytes":
            path.write_bytes(data)
        elif how == "fifo":
            os.mkfifo(path)
        elif how == "link":
            path.symlink_to("/dev/zero")
        elif how == "folder":
            path.mkdir()
        else:
            deep_folders(root / f"deep{n}", 10)
    refused_or_named(root)


def test_what_the_warehouse_commands_print_from_imported_text_is_escaped(
    cli_processes: Any, tmp_path: Path
) -> None:
    """Imported ids reach ``tmlbench sql``'s table, and any text an error quotes reaches the
    error line: both are shown as text, never acted on by the terminal or rich's markup."""
    evil = tb.result(f"run{ESCAPES}[/]:smile:", "2026-02-01T10:00:00Z", score=0.5)
    wh = ("--warehouse", str(tmp_path / "wh.duckdb"))
    source = str(database(tmp_path, [evil]))
    imported = run_cli(cli_processes, tmp_path, "import", "tml-bench", source, *wh)
    table = run_cli(cli_processes, tmp_path, "sql", "select run_id from raw.runs", *wh)
    error = run_cli(cli_processes, tmp_path, "sql", f"selec '{ESCAPES}[/]'", *wh)
    assert [code for code, _ in (imported, table, error)] == [0, 0, 2], (imported, table, error)
    assert "run\\x1b]0;pwned\\x07\\x1b[2J\\x1b[31m\\u202e\\x9b[/]:smile:" in table[1]
    assert error[1].startswith("error: SQL error") and "\\x1b[2J" in error[1], error
    for _, output in (imported, table, error):
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]", output), output


def test_printable_escapes_what_a_terminal_would_act_on() -> None:
    assert printable("plain é 中 [red]") == "plain é 中 [red]"
    assert printable("a\x1b[2Jb\u202ec\x9b\x00\t\n") == "a\\x1b[2Jb\\u202ec\\x9b\\x00\\t\\n"
    assert printable("two\nlines\x1b", keep_newlines=True) == "two\nlines\\x1b"


def test_a_database_read_past_its_deadline_is_refused(tmp_path: Path) -> None:
    """SQLite is interrupted (its progress handler), whatever it was doing; here, at once."""
    path = database(tmp_path)
    with pytest.raises(TmlbenchError, match=r"reading took longer than 0 s: not imported"):
        read_tml_bench(path, limits=Limits(max_seconds=0))
    assert len(read_tml_bench(path).runs) == len(RUNS)


def contents(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every raw table's rows, in a stable order."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        tables = con.execute(
            "select table_name from duckdb_tables() where schema_name = 'raw' order by 1"
        ).fetchall()
        return {t: con.execute(f"select * from raw.{t} order by all").fetchall() for (t,) in tables}
    finally:
        con.close()


def test_a_failed_import_leaves_no_new_warehouse_and_rolls_an_existing_one_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write phase failing part-way (its runs inserted, then the agents fail): a new
    warehouse never appears, an existing one keeps its rows (the transaction rolls back)."""
    from warehouse.importers import tml_bench

    existing = tmp_path / "wh.duckdb"
    with all_or_nothing(existing) as con:
        import_source(con, read_tml_bench(tree(tmp_path, RUNS[:1])))
    before = contents(existing)
    read = read_tml_bench(database(tmp_path))

    def cut(*_: object) -> None:
        raise RuntimeError("cut")

    monkeypatch.setattr(tml_bench, "_add_agents", cut)
    new = tmp_path / "made" / "for" / "it.duckdb"
    for path in (new, existing):
        with pytest.raises(RuntimeError, match="cut"), all_or_nothing(path) as con:
            import_source(con, read)
    assert not (tmp_path / "made").exists()
    # The same rows (not the same bytes: DuckDB rewrites its catalog when the DDL is re-applied)
    assert contents(existing) == before and len(before["runs"]) == 1
    monkeypatch.undo()
    with all_or_nothing(new) as con:
        report = import_source(con, read)
    assert new.is_file() and report.runs.new == len(RUNS)


def test_a_tree_of_too_many_entries_is_refused_as_it_is_listed(tmp_path: Path) -> None:
    root = tree(tmp_path)
    for i in range(SMALL.max_entries):
        (root / f"litter{i}").touch()
    with pytest.raises(TmlbenchError, match=r"more than 60 files and folders: not a folder of"):
        read_tml_bench(root, limits=SMALL)
    assert len(read_tml_bench(root).runs) == len(RUNS)
