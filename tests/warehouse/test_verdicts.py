"""Each record judged against what is loaded (warehouse/verdicts.py), through real loads: a run is
its folder and id; the same run with other content is refused naming both files and never
overwritten; repeats in later batches and copies are judged against the loaded one."""

from __future__ import annotations

from pathlib import Path

from tests.support.run_folders import write, write_raw
from tools.records import make_record as rec
from warehouse import loader
from warehouse.loader import Candidate, ingest, load_runs


def test_changed_content_for_a_loaded_run_id_is_rejected(con, tmp_path: Path):
    first_dir, second_dir = tmp_path / "runs1", tmp_path / "runs2"
    original = write(first_dir, rec(score=0.5))
    assert load_runs(con, first_dir).new == 1
    changed = write(second_dir, rec(score=0.9))
    report = load_runs(con, second_dir)
    assert report.new == 0 and report.unchanged == 0
    [(path, message)] = report.rejected
    assert path == str(changed.resolve())
    assert message.startswith("records are immutable; ")
    assert str(original.resolve()) in message and str(changed.resolve()) in message
    assert con.execute("select score from raw.runs").fetchone()[0] == 0.5


def test_same_run_id_in_three_folders_is_three_runs(con, tmp_path: Path):
    # a run is (its folder below the runs root, its id): suites' folders may repeat run ids
    runs = tmp_path / "runs"
    write(runs, rec(score=0.5), sub="a")
    write(runs, rec(score=0.5), sub="b")  # byte-identical copy
    write(runs, rec(score=0.7), sub="c/d")  # same run_id, other content
    report = load_runs(con, runs)
    assert (report.new, report.unchanged, report.rejected) == (3, 0, [])
    spaces = con.execute("select run_space from raw.runs order by 1").fetchall()
    assert spaces == [("a",), ("b",), ("c/d",)]


def test_a_run_repeated_in_a_later_batch_is_judged_against_the_earlier_ones(
    con, tmp_path: Path, monkeypatch
):
    # batches of two files: each repeat of run x comes in a batch after the one that inserted it
    monkeypatch.setattr(loader, "BULK_BATCH", 2)
    runs = tmp_path / "runs"
    x = rec(score=0.5).model_dump(mode="json")
    first = write_raw(runs, "r1", x)
    write_raw(runs, "r2", rec(minute=1).model_dump(mode="json"))
    write_raw(runs, "r3", x)  # the same content again: unchanged
    changed = write_raw(runs, "r4", dict(x, score=0.9))  # other content: a conflict
    write_raw(runs, "r5", rec(minute=2).model_dump(mode="json"))
    report = load_runs(con, runs)
    assert (report.new, report.unchanged) == (3, 1)
    [(path, message)] = report.rejected
    assert path == str(changed.resolve())
    assert message == (
        f"records are immutable; {path} differs from the loaded one "
        f"(loaded from {first.resolve()}, run_id {x['run_id']})"
    )
    assert con.execute(
        "select score from raw.runs where run_id = $id", {"id": x["run_id"]}
    ).fetchall() == [(0.5,)]


def test_copies_of_a_loaded_run_are_judged_against_the_loaded_one_not_each_other(
    con, tmp_path: Path
):
    runs = tmp_path / "runs"
    x = rec(score=0.5).model_dump(mode="json")
    loaded = write_raw(runs, "r1", x)
    assert load_runs(con, runs).new == 1
    changed = write_raw(runs, "q1", dict(x, score=0.9))  # first by path: a conflict
    write_raw(runs, "q2", x)  # the loaded content, after a conflicting copy: unchanged
    report = load_runs(con, runs)
    assert (report.new, report.unchanged) == (0, 2)
    assert report.rejected == [
        (
            str(changed.resolve()),
            f"records are immutable; {changed.resolve()} differs from the loaded one "
            f"(loaded from {loaded.resolve()}, run_id {x['run_id']})",
        )
    ]


def test_same_run_twice_in_one_import_is_a_conflict(con):
    # an import's runs share one space (its source): the same run id twice must agree
    first = rec(score=0.5)
    candidates = [
        Candidate(first, "db#1", "sha-1"),
        Candidate(first, "db#2", "sha-1"),  # the same content again
        Candidate(rec(score=0.7), "db#3", "sha-2"),
    ]
    report = ingest(con, candidates, source="tml-bench")
    assert (report.new, report.unchanged, len(report.rejected)) == (1, 1, 1)
    assert "records are immutable" in report.rejected[0][1]
    assert con.execute("select count(*) from raw.runs").fetchone() == (1,)
