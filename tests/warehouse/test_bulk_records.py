"""The loader's bulk parser (issue 15): one home for the record's schema, and never a verdict
other than pydantic's: every document it accepts, pydantic accepts with the same values."""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from runner.attempts.records import RunRecord
from tools.records import make_record
from warehouse import loader, parse
from warehouse.bulk_records import COLUMN_TYPES, bulk_parse, field_rules


@pytest.fixture
def columns(con) -> dict[str, str]:
    return parse.run_columns(con)


def full_record() -> RunRecord:
    """A record with every field set (maps and lists included)."""
    return make_record(
        created_at=dt.datetime(2026, 3, 4, 5, 6, 7, 891011, tzinfo=dt.timezone(dt.timedelta(hours=2))),
        finished_at=dt.datetime(2026, 3, 4, 3, 16, 7, tzinfo=dt.UTC),
        suite_id="suite-x", agent_kind="llm", provider="openai", model_id="gpt-x",
        seed=2**40, cpuset="0-1", memory_limit_bytes=4 * 2**30, pids_limit=256,
        disk_limit_bytes=2**31, validation_code="ok", validation_message='a "quoted"\nline, {x}',
        error_message="é ü 😀 \\ tab\t", local_validation_score=1.1, wall_seconds=12.5,
        cpu_seconds=11.0, peak_memory_bytes=2**29, exit_code=-9, limit_exceeded="memory",
        workspace_bytes=10, workspace_files=2, workspace_removed=False,
        workspace_listing_path="listing.txt", sandbox_notes=["one", "two \u0000"],
        tokens_in=1000, tokens_out=200, cost_usd=0.0123, requests=14, retries=2, steps=12,
        provider_seconds=40.5, tool_seconds=70.25, egress_requests=9, egress_denied=3,
        egress_denied_hosts={"models.dev:443": 2, 'a"b': 1}, egress_bytes_up=12345,
        egress_bytes_down=2**33, public_manifest_sha256="m" * 64, instructions_sha256="i" * 64,
        git_sha="g" * 40, stdout_path="stdout.log", stderr_path="stderr.log",
        transcript_path="t.jsonl", submission_path="workspace/submission.csv",
        submission_sha256="s" * 64, submission_normalized_sha256="n" * 64,
    )  # fmt: skip


def test_every_field_has_a_rule_and_a_column_of_its_kind(columns):
    rules = field_rules()
    assert [r.name for r in rules] == list(RunRecord.model_fields)
    for rule in rules:
        assert columns[rule.name] in COLUMN_TYPES[rule.kind], rule
    kinds = {r.name: r.kind for r in rules}
    assert kinds["status"] == "enum" and kinds["created_at"] == "timestamp"
    assert kinds["egress_denied_hosts"] == "int_map" and kinds["sandbox_notes"] == "str_list"
    assert {r.name for r in rules if not r.nullable} >= {"run_id", "status", "schema_version"}


def test_a_column_of_another_type_is_a_clear_error(con):
    con.execute("alter table raw.runs alter column pids_limit type varchar")
    with pytest.raises(Exception, match=r"pids_limit \(integer\) is VARCHAR"):
        parse.run_columns(con)


def canonical(record: RunRecord) -> bytes:
    """As runner.attempts.records.write_record writes it."""
    return (json.dumps(record.model_dump(mode="json"), indent=2, sort_keys=True) + "\n").encode()


# A value of every JSON type and many spellings: each goes into every field in turn.
ODD_VALUES: list[Any] = [
    None, "x", "", 0, 1, -1, 7, 2**31 - 1, 2**31, 2**63 - 1, 2**63, 2**64, 10**30, 1.0, 1.5,
    -0.0, 1e300, "12", "-3", "1.5", "1e5", "007", " 1", "true", "false", "yes", True, False,
    [], ["a"], ["a", 1], {}, {"h": 1}, {"h": 1.5}, {"h": "1"}, {"h": 2**40},
    "2026-01-01T00:00:00Z", "2026-01-01T00:00:00+02:00", "2026-01-01T00:00:00.5-05:30",
    "2026-01-01T00:00:00", "2026-01-01 00:00:00Z", "2026-02-30T00:00:00Z",
    "2026-01-01T24:00:00Z", "2026-01-01T00:00:00.1234567Z", "0001-01-01T00:00:00Z", 1767225600,
    "success", "timeout", "maximize", "minimize", "memory", "disks", "SUCCESS",
]  # fmt: skip

# Documents whose text, not a value, is odd.
ODD_TEXTS: list[str] = [
    "", "{", "[]", "1", "null", '"x"', "{not json", "\ufeff{}",
]  # fmt: skip


def odd_documents() -> list[bytes]:
    # egress_denied_hosts: the fast path takes only an empty map (a map's keys are data, which
    # pyarrow's reader cannot take); the variants below have none, one document has some.
    record = full_record().model_copy(update={"egress_denied_hosts": {}})
    base = record.model_dump(mode="json")
    docs = [canonical(record), canonical(full_record()), canonical(make_record())]
    for name in base:
        for value in ODD_VALUES:
            docs.append(json.dumps(base | {name: value}).encode())
        missing = {k: v for k, v in base.items() if k != name}
        docs.append(json.dumps(missing).encode())
    text = json.dumps(base)
    docs += [
        text.replace('"seed": ', '"seed": 1, "seed": ').encode(),  # a key twice (pydantic: last)
        text.replace('"run_id": ', '"surprise": 1, "run_id": ').encode(),
        (text[:-1] + ",}").encode(),  # trailing comma: DuckDB's reader allows it, JSON does not
        text.replace('"score": 0.5', '"score": NaN').encode(),
        text.replace('"score": 0.5', '"score": Infinity').encode(),
        text.replace('"score": 0.5', '"score": 1e400').encode(),
        text.replace('"score": 0.5', '"score": 5E-1').encode(),
        text.replace('"seed": 1099511627776', '"seed": 1099511627776.0').encode(),
        text.replace('"suite_id": "suite-x"', '"suite_id": "\\ud800"').encode(),  # lone surrogate
        text.replace('"suite_id": "suite-x"', '"suite_id": "\\ud83d\\ude00\\u00e9\\/"').encode(),
        text.replace('"suite_id": "suite-x"', '"suite_id": "a\tb"').encode(),  # raw control char
        text.replace('"suite_id": "suite-x"', '"suite_id": "\xff"').encode("latin-1"),
        text.replace('"egress_denied_hosts": {', '"egress_denied_hosts": {"x": 1, "x": 2').encode(),
        text.replace('"sandbox_notes": [', '"sandbox_notes": [1, ').encode(),
        ("  " + text + "\n\n").encode(),
        (text + " x").encode(),
        (text + text).encode(),
        json.dumps(base | {"status": "timeout"}).encode(),  # a score without success
        json.dumps(base | {"status": "timeout", "score": None, "score_hib": None}).encode(),
        json.dumps(base | {"metric_direction": None}).encode(),
        json.dumps(base | {"budget_seconds": 0}).encode(),
        json.dumps({**base, "schema_version": 1}).encode(),
    ]
    docs += [t.encode() for t in ODD_TEXTS]
    # floats of every magnitude, as Python writes them: read to the same double
    rng = random.Random(15)
    for _ in range(300):
        value = rng.random() * 10.0 ** rng.randint(-300, 300) * rng.choice((1, -1))
        docs.append(json.dumps(base | {"score": value, "wall_seconds": abs(value)}).encode())
    return docs


def expected_row(data: bytes, columns: dict[str, str]) -> dict[str, Any] | None:
    """What the per-file path loads from ``data`` (None: it refuses the record)."""
    try:
        record = RunRecord.model_validate_json(data)
    except ValueError:
        return None
    if parse.constraint_problem(record, parse.int_checks(columns)):
        return None
    rows = parse.model_rows(
        [parse.Candidate(record, "p", "h")], parse.record_schema(columns)
    ).to_pylist()
    return rows[0]


def test_bulk_accepts_only_what_pydantic_accepts_with_the_same_values(con, columns):
    docs = odd_documents()
    accepted = bulk_parse(docs, parse.RULES, columns)
    rows = accepted.drop_columns(["i"]).cast(parse.record_schema(columns)).to_pylist()
    by_position = dict(zip(accepted.column("i").to_pylist(), rows, strict=True))
    expected = [expected_row(d, columns) for d in docs]
    for i, row in by_position.items():
        assert expected[i] is not None, f"bulk accepted what pydantic refuses: {docs[i][:300]!r}"
        assert row == expected[i], docs[i][:300]
    # the fast path is the common path: the harness's own records, and most plain variants
    assert 0 in by_position and 2 in by_position  # the harness's records, full and sparse
    assert 1 not in by_position  # a map of refused hosts: per file
    accepted_by_pydantic = sum(e is not None for e in expected)
    assert len(by_position) > 0.6 * accepted_by_pydantic
    assert sum(e is None for e in expected) > len(docs) / 4  # the variants do probe refusals


def test_a_bulk_parse_that_fails_leaves_every_file_to_pydantic(con, tmp_path, monkeypatch):
    """Whatever Arrow raises on a batch, the load goes on: pydantic judges each of its files."""
    from tests.support.run_folders import write, write_raw

    runs = tmp_path / "runs"
    for minute in range(3):
        write(runs, make_record(minute=minute))
    bad = write_raw(runs, "bad", "{not json")

    def broken(*args: Any) -> pa.Table:
        raise pa.ArrowInvalid("a parser bug")

    monkeypatch.setattr(parse, "bulk_parse", broken)
    report = loader.load_runs(con, runs)
    assert (report.new, report.unchanged, report.parsed) == (3, 0, 4)
    [(path, message)] = report.rejected
    assert path == str(bad.resolve()) and "not a valid run record" in message


@pytest.mark.parametrize("path", ["bulk", "fallback"])
def test_a_bad_file_is_rejected_with_the_message_it_always_had(con, tmp_path, monkeypatch, path):
    """The per-file messages of the loader before the bulk path (pydantic's, and the raw
    schema's checks), word for word, whether the bulk parser ran (``bulk``: it refuses the bad
    files and pydantic judges them) or failed on the whole batch (``fallback``)."""
    from pydantic import ValidationError

    from runner.errors import describe_validation_error
    from tests.support.run_folders import write, write_raw

    runs = tmp_path / "runs"
    for minute in range(3):
        write(runs, make_record(minute=minute))
    good = make_record(minute=9).model_dump(mode="json")
    bad = {
        "bad-json": "{not json",
        "bad-status": dict(good, run_id="s", status="crashed"),
        "missing-field": {k: v for k, v in good.items() if k != "agent_id"} | {"run_id": "m"},
        "extra-field": dict(good, run_id="e", surprise=1),
        "text-for-int": dict(good, run_id="si", seed="twelve"),
        "zero-budget": dict(good, run_id="z", budget_seconds=0),
        "scored-timeout": dict(good, run_id="st", status="timeout", score=0.1),
        "too-big": dict(good, run_id="big", pids_limit=2**40),
    }
    paths = {name: write_raw(runs, name, content).resolve() for name, content in bad.items()}

    def pydantic_message(name: str) -> str:
        with pytest.raises(ValidationError) as exc:
            RunRecord.model_validate_json(paths[name].read_bytes())
        return f"{paths[name]}: not a valid run record: {describe_validation_error(exc.value)}"

    expected = {
        name: pydantic_message(name)
        for name in ("bad-json", "bad-status", "missing-field", "extra-field", "text-for-int")
    }
    expected |= {
        "zero-budget": f"{paths['zero-budget']}: budget_seconds: must be > 0, got 0",
        "scored-timeout": f"{paths['scored-timeout']}: status 'timeout' must not carry a score "
        "(only success has one)",
        "too-big": f"{paths['too-big']}: pids_limit: {2**40} does not fit the column's type "
        "(integer)",
    }
    if path == "fallback":

        def broken(*args: Any) -> pa.Table:
            raise pa.ArrowInvalid("a parser bug")

        monkeypatch.setattr(parse, "bulk_parse", broken)
    report = loader.load_runs(con, runs)
    assert (report.new, report.unchanged) == (3, 0)
    by_name = {Path(p).parent.name: m for p, m in report.rejected}
    assert by_name == expected
    # and again on the next load: rejected files are never indexed, so never forgotten
    assert {Path(p).parent.name: m for p, m in loader.load_runs(con, runs).rejected} == expected
