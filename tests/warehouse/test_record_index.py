"""The loader's index of record files (issue 15): unchanged files are not read, changed ones are
read again and held to immutability, a load can be limited to some run folders."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.run_folders import write, write_raw
from tools.records import make_record as rec
from warehouse import loader, parse, record_files
from warehouse.loader import LoadReport, load_runs


def count(con, table: str = "raw.runs") -> int:
    return con.execute(f"select count(*) from {table}").fetchone()[0]


def no_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(path: str, limit: int = 0) -> None:
        raise AssertionError(f"{path} was read")

    monkeypatch.setattr(record_files, "read_record_file", refuse)


def test_unchanged_files_are_neither_read_nor_parsed(con, tmp_path: Path, monkeypatch):
    runs = tmp_path / "runs"
    for minute in range(4):
        write(runs, rec(minute=minute), sub="suite")
    first = load_runs(con, runs)
    assert (first.new, first.parsed) == (4, 4)
    assert count(con, "raw.record_files") == 4
    no_reads(monkeypatch)
    again = load_runs(con, runs)
    assert again == LoadReport(new=0, unchanged=4, rejected=[]) and again.parsed == 0


def test_a_new_setting_is_the_only_thing_read(con, tmp_path: Path):
    runs = tmp_path / "runs"
    for minute in range(3):
        write(runs, rec(minute=minute))
    load_runs(con, runs)
    for minute in range(5):
        write(runs, rec(agent="b", minute=minute))
    report = load_runs(con, runs)
    assert (report.new, report.unchanged, report.parsed) == (5, 3, 5)


def test_an_edit_that_keeps_size_and_mtime_is_still_seen_and_rejected(con, tmp_path: Path):
    runs = tmp_path / "runs"
    path = write(runs, rec(score=0.5))
    assert load_runs(con, runs).new == 1
    before = path.stat()
    text = path.read_text()
    assert '"score": 0.5' in text
    path.chmod(0o644)
    path.write_text(text.replace('"score": 0.5', '"score": 0.7'))  # same length
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # and the old mtime
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    report = load_runs(con, runs)
    [(rejected, message)] = report.rejected
    assert rejected == str(path.resolve()) and report.parsed == 1
    assert message == (
        f"records are immutable; {rejected} differs from the loaded one "
        f"(loaded from {rejected}, run_id {rec().run_id})"
    )
    assert con.execute("select score from raw.runs").fetchall() == [(0.5,)]
    # rejected files stay out of the index: the next load reports it again
    assert load_runs(con, runs).rejected == report.rejected


def test_a_touched_but_unchanged_file_is_read_once_and_not_parsed(con, tmp_path: Path):
    runs = tmp_path / "runs"
    path = write(runs, rec())
    load_runs(con, runs)
    os.utime(path)  # a new mtime, the same bytes
    report = load_runs(con, runs)
    assert (report.new, report.unchanged, report.parsed) == (0, 1, 0)
    (mtime,) = con.execute("select mtime_ns from raw.record_files").fetchone()
    assert mtime == path.stat().st_mtime_ns  # the index row is refreshed


def test_rehash_sees_what_the_stat_cannot(con, tmp_path: Path):
    """The one change an mtime/ctime index cannot see (here: forged in the index itself) is
    found by ``rehash``, which reads and hashes every file."""
    runs = tmp_path / "runs"
    path = write(runs, rec(score=0.5))
    load_runs(con, runs)
    path.chmod(0o644)
    path.write_text(path.read_text().replace('"score": 0.5', '"score": 0.7'))
    st = path.stat()
    con.execute(
        "update raw.record_files set size = ?, mtime_ns = ?, ctime_ns = ?, inode = ?",
        [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino],
    )
    assert load_runs(con, runs) == LoadReport(new=0, unchanged=1, rejected=[])
    report = load_runs(con, runs, rehash=True)
    assert report.new == 0 and report.unchanged == 0
    assert report.rejected[0][1].startswith("records are immutable; ")


def test_a_run_deleted_from_the_warehouse_is_loaded_again(con, tmp_path: Path):
    runs = tmp_path / "runs"
    write(runs, rec(minute=0))
    write(runs, rec(minute=1))
    load_runs(con, runs)
    con.execute("delete from raw.runs where attempt_index = 1")
    report = load_runs(con, runs)
    assert (report.new, report.unchanged, report.parsed) == (1, 1, 1)
    assert count(con) == 2


def test_the_same_run_id_in_another_folder_is_another_run(con, tmp_path: Path):
    # Two suites' folders (the demo's and tml-v1's) hold the same run ids: each is its folder's run
    runs = tmp_path / "runs"
    path = write(runs, rec(), sub="a")
    load_runs(con, runs)
    write(runs, rec(score=0.25), sub="b")  # the same run id, other content
    report = load_runs(con, runs)
    assert (report.new, report.unchanged, report.rejected) == (1, 1, [])
    rows = con.execute("select run_space, run_id from raw.runs order by 1").fetchall()
    assert rows == [("a", path.parent.name), ("b", path.parent.name)]
    assert count(con, "raw.record_files") == 2


def test_a_full_scan_forgets_files_that_are_gone(con, tmp_path: Path):
    runs = tmp_path / "runs"
    write(runs, rec(minute=0))
    gone = write(runs, rec(minute=1))
    load_runs(con, runs)
    gone.unlink()
    assert load_runs(con, runs).unchanged == 1
    assert count(con, "raw.record_files") == 1 and count(con) == 2  # runs are never deleted


def test_prefixes_limit_a_load_to_some_run_folders(con, tmp_path: Path):
    runs = tmp_path / "runs"
    for agent in ("a", "b", "c"):
        for minute in range(2):
            write(runs, rec(agent=agent, minute=minute))
    report = load_runs(con, runs, prefixes=["b__", "c__t__60s__"])
    assert (report.new, report.parsed) == (4, 4)
    assert con.execute("select distinct agent_id from raw.runs order by 1").fetchall() == [
        ("b",),
        ("c",),
    ]
    assert load_runs(con, runs, prefixes=[]) == LoadReport(new=0, unchanged=0, rejected=[])
    assert load_runs(con, runs).new == 2  # the full scan finds the rest
    assert count(con, "raw.record_files") == 6


def test_links_huge_files_and_fifos_are_rejected_by_name(con, tmp_path: Path, monkeypatch):
    runs = tmp_path / "runs"
    real = write(runs, rec(minute=0))
    linked = runs / "linked" / "record.json"
    linked.parent.mkdir()
    linked.symlink_to(real)
    fifo = runs / "fifo" / "record.json"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    limit = real.stat().st_size
    huge = write_raw(runs, "huge", rec(minute=1).model_dump_json() + " " * limit)
    monkeypatch.setattr(record_files, "RECORD_MAX_BYTES", limit)
    report = load_runs(con, runs)
    messages = dict(report.rejected)
    assert report.new == 1
    assert messages[str(linked)].endswith("is a symbolic link; links are never followed")
    assert messages[str(fifo)].endswith("not a regular file")
    assert "too large for a run record" in messages[str(huge.resolve())]


def test_the_index_is_rolled_back_with_the_runs(con, tmp_path: Path, monkeypatch):
    runs = tmp_path / "runs"
    write(runs, rec(minute=0))

    def fail(con_, table):
        raise RuntimeError("disk full")

    monkeypatch.setattr(loader, "_insert_runs", fail)
    with pytest.raises(RuntimeError):
        load_runs(con, runs)
    assert count(con, "raw.record_files") == 0


class ParseSpy:
    """Counts what a load hands to either parser: documents to the bulk parser, files to pydantic."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.bulk: list[bytes] = []
        self.pydantic: list[bytes] = []
        real_bulk, real_validate = parse.bulk_parse, parse.RunRecord.model_validate_json

        def bulk(docs, *args):
            self.bulk += docs
            return real_bulk(docs, *args)

        def validate(data, *args, **kwargs):
            self.pydantic.append(data)
            return real_validate(data, *args, **kwargs)

        monkeypatch.setattr(parse, "bulk_parse", bulk)
        monkeypatch.setattr(parse.RunRecord, "model_validate_json", validate)


def test_an_unchanged_file_is_never_parsed_even_if_it_no_longer_parses(
    con, tmp_path: Path, monkeypatch
):
    """Proof that the index, not a parse, decides: the loaded file is overwritten with garbage
    and its index row made to match the garbage's stat. A load that parsed it would reject it."""
    runs = tmp_path / "runs"
    kept = write(runs, rec(minute=0))
    load_runs(con, runs)
    kept.chmod(0o644)
    kept.write_text("{not json at all")
    st = kept.stat()
    con.execute(
        "update raw.record_files set size = ?, mtime_ns = ?, ctime_ns = ?, inode = ?",
        [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino],
    )
    for minute in range(1, 6):  # and a new setting's five records
        write(runs, rec(agent="b", minute=minute))
    spy = ParseSpy(monkeypatch)
    report = load_runs(con, runs)
    assert (report.new, report.unchanged, report.rejected, report.parsed) == (5, 1, [], 5)
    assert b"{not json at all" not in spy.bulk + spy.pydantic
    assert len(spy.bulk) == 5 and spy.pydantic == []  # the new ones, in bulk only
    # the stat is the whole key: once it differs, the file is read and its garbage reported
    os.utime(kept, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    [(path, message)] = load_runs(con, runs).rejected
    assert path == str(kept.resolve()) and "not a valid run record" in message


def test_a_reload_with_nothing_new_parses_nothing(con, tmp_path: Path, monkeypatch):
    runs = tmp_path / "runs"
    for minute in range(5):
        write(runs, rec(minute=minute), sub="suite")
    load_runs(con, runs)
    spy = ParseSpy(monkeypatch)
    assert load_runs(con, runs) == LoadReport(new=0, unchanged=5, rejected=[])
    assert load_runs(con, runs, prefixes=["suite/a__"]).unchanged == 5
    assert spy.bulk == [] and spy.pydantic == []


def test_a_changed_file_is_read_again_and_its_conflict_reported(con, tmp_path: Path):
    """An ordinary edit (new size and mtime), the case the index must not hide."""
    runs = tmp_path / "runs"
    path = write(runs, rec(score=0.5))
    other = write(runs, rec(minute=1))
    load_runs(con, runs)
    path.chmod(0o644)
    path.write_text(path.read_text().replace('"score": 0.5', '"score": 0.25'))
    report = load_runs(con, runs)
    assert (report.new, report.unchanged, report.parsed) == (0, 1, 1)
    [(rejected, message)] = report.rejected
    assert rejected == str(path.resolve())
    assert message == (
        f"records are immutable; {rejected} differs from the loaded one "
        f"(loaded from {rejected}, run_id {rec().run_id})"
    )
    assert con.execute("select score from raw.runs order by run_id").fetchall() == [(0.5,), (0.5,)]
    assert str(other.resolve()) != rejected
