"""Records are strict JSON (issue 25): a non-finite number is never written, whatever field it
is in; it becomes null with a note in record_notes, and every reader of records agrees.

The property test generates records with inf, -inf, nan, huge, tiny and ordinary floats in
every float field and follows each through write_record → a strict JSON parser → read_record →
the warehouse loader. Old records with non-finite numbers already on disk are read with null and
a note (runner/attempts/records.py says so), by read_record and the loader alike.
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
import types
import typing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner.attempts.records import RunRecord, read_record, write_record
from runner.errors import TmlbenchError
from tests.support.run_folders import write, write_raw
from tools.records import make_record
from warehouse.db import apply_ddl, connect
from warehouse.loader import load_runs

FLOAT_FIELDS = [
    name
    for name, info in RunRecord.model_fields.items()
    if float in typing.get_args(info.annotation) or info.annotation is float
]
SPECIAL = [
    math.inf, -math.inf, math.nan, sys.float_info.max, -sys.float_info.max, sys.float_info.min,
    5e-324, -5e-324, 0.0, -0.0, 1e300, 1e-300,
]  # fmt: skip
floats = st.one_of(st.none(), st.sampled_from(SPECIAL), st.floats())


def strict_loads(text: str) -> Any:
    """RFC 8259 and nothing more: NaN, Infinity, -Infinity or an overflowing number refused."""

    def refuse(token: str) -> float:
        raise ValueError(f"not JSON: {token}")

    def finite(token: str) -> float:
        number = float(token)
        if not math.isfinite(number):
            raise ValueError(f"a number beyond float64: {token}")
        return number

    return json.loads(text, parse_constant=refuse, parse_float=finite)


def same(a: float | None, b: float | None) -> bool:
    return a == b and (a is None or math.copysign(1, a) == math.copysign(1, b))  # type: ignore[arg-type]


def test_every_float_field_may_be_null():
    """Else a non-finite number there would be refused rather than recorded as null."""
    assert {"score", "local_validation_score", "wall_seconds", "cost_usd"} <= set(FLOAT_FIELDS)
    for name in FLOAT_FIELDS:
        annotation = RunRecord.model_fields[name].annotation
        assert typing.get_origin(annotation) in (typing.Union, types.UnionType), name
        assert type(None) in typing.get_args(annotation), name


# slow: 40 warehouse loads
@pytest.mark.slow
# 40 generated batches of 1-4 records per run (one warehouse load each: about 10 s).
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.fixed_dictionaries({name: floats for name in FLOAT_FIELDS}), min_size=1, max_size=4)
)
def test_non_finite_numbers_become_null_with_a_note_through_every_reader(
    batch: list[dict[str, float | None]],
):
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp) / "runs"
        written = []
        for minute, values in enumerate(batch):
            # model_construct skips validation: write_record itself must keep the record strict
            valid = make_record(minute=minute)
            record = RunRecord.model_construct(**(dict(valid) | values))
            path = write(runs, record)
            text = path.read_text(encoding="utf-8")
            data = strict_loads(text)  # raises on anything but strict JSON
            non_finite = sorted(
                n for n, v in values.items() if v is not None and not math.isfinite(v)
            )
            for name, value in values.items():
                expected = value if name not in non_finite else None
                assert same(data[name], expected), (name, value, data[name])
            notes = data["record_notes"] or []
            assert sorted(note.split(":")[0] for note in notes) == non_finite
            assert all("recorded as null" in note for note in notes)
            # read_record gives what the file holds, and so does a record validated in memory
            read = read_record(path)
            assert read.model_dump(mode="json") == data
            assert RunRecord.model_validate(dict(valid) | values) == read
            written.append(data)

        con = connect(Path(tmp) / "wh.duckdb")
        try:
            apply_ddl(con)
            report = load_runs(con, runs)
            assert (report.new, report.rejected) == (len(batch), [])
            columns = ", ".join([*FLOAT_FIELDS, "record_notes"])
            rows = con.execute(f"select {columns} from raw.runs order by run_id").fetchall()
        finally:
            con.close()
    for row, data in zip(rows, written, strict=True):
        for name, value in zip(FLOAT_FIELDS, row, strict=False):
            assert same(value, data[name]), (name, value, data[name])
        assert (row[-1] or None) == data["record_notes"]


def test_an_old_record_with_non_finite_numbers_is_read_with_null_and_a_note(con, tmp_path):
    """Written before records were strict (or by hand): the file stays as it is; read_record
    and the loader both read null there, each with a note, and reject nothing."""
    runs = tmp_path / "runs"
    text = make_record(minute=1).model_dump_json(indent=2)
    text = text.replace('"local_validation_score": null', '"local_validation_score": Infinity')
    text = text.replace('"wall_seconds": null', '"wall_seconds": NaN')
    text = text.replace('"cost_usd": null', '"cost_usd": -Infinity')
    text = text.replace('"cpu_seconds": null', '"cpu_seconds": 1e999')
    path = write_raw(runs, "old", text)
    record = read_record(path)
    replaced = ["local_validation_score", "wall_seconds", "cpu_seconds", "cost_usd"]
    assert all(getattr(record, name) is None for name in replaced)
    assert sorted(n.split(":")[0] for n in record.record_notes or []) == sorted(replaced)
    assert "local_validation_score: inf is not a finite number" in " ".join(
        record.record_notes or []
    )
    write(runs, make_record(minute=2))  # a strict one beside it: the bulk path
    report = load_runs(con, runs)
    assert (report.new, report.rejected) == (2, [])
    row = con.execute(
        "select local_validation_score, wall_seconds, cost_usd, cpu_seconds, record_notes "
        "from raw.runs where run_id = $id",
        {"id": record.run_id},
    ).fetchone()
    assert row == (None, None, None, None, record.record_notes)
    assert path.read_text() == text  # records are immutable: only the reading changed


@pytest.mark.parametrize(
    "value, field",
    [('"inf"', "local_validation_score"), ("Infinity", "budget_seconds"), ("NaN", "seed")],
)
def test_a_non_finite_number_where_null_is_not_allowed_is_refused_naming_the_file(
    con, tmp_path, value, field
):
    text = make_record().model_dump_json()
    start = text.index(f'"{field}":') + len(f'"{field}":')
    end = text.index(",", start)
    path = write_raw(tmp_path / "runs", "bad", text[:start] + value + text[end:])
    with pytest.raises(TmlbenchError, match=rf"{path}: not a valid run record: {field}"):
        read_record(path)
    report = load_runs(con, tmp_path / "runs")
    [(where, message)] = report.rejected
    assert where == str(path.resolve()) and field in message and report.new == 0


def test_write_record_fails_loudly_rather_than_write_a_non_finite_number(tmp_path, monkeypatch):
    """The last guard (``allow_nan=False``): were the nulling ever skipped, no record is written."""
    from runner.attempts import records

    monkeypatch.setattr(records, "finite_only", lambda values, nullable: values)
    record = RunRecord.model_construct(**(dict(make_record()) | {"wall_seconds": math.inf}))
    with pytest.raises(ValueError, match="JSON compliant"):
        write_record(tmp_path, record)
    assert list(tmp_path.iterdir()) == []
