"""The run record is filled from typed parts, one per step of an attempt (runner.attempts.records)."""

from __future__ import annotations

import datetime as dt

import pytest
from pydantic import ValidationError

from runner.attempts import limits
from runner.attempts.records import (
    AttemptSetup,
    DriverReport,
    EgressReport,
    ModelUsage,
    RunRecord,
    SandboxReport,
    Verdict,
    read_record,
    write_record,
)
from runner.sandbox import lifecycle
from tools.records import make_record

PARTS = (AttemptSetup, Verdict, SandboxReport, DriverReport)
OWN_FIELDS = {
    "schema_version",
    "finished_at",
    "local_validation_score",
    "instructions_sha256",
    "record_notes",
}
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def setup() -> AttemptSetup:
    record = make_record()
    return AttemptSetup.model_validate(
        {name: getattr(record, name) for name in AttemptSetup.model_fields}
    )


def test_every_field_of_the_record_is_declared_once_in_one_part():
    declared = [name for part in PARTS for name in part.model_fields]
    assert len(declared) == len(set(declared)), "a field in two parts"
    assert set(declared).isdisjoint(OWN_FIELDS)
    assert set(declared) | OWN_FIELDS == set(RunRecord.model_fields)


def test_a_record_is_assembled_from_its_parts_and_round_trips(tmp_path):
    verdict = Verdict(status="timeout", error_message="budget of 60 s ran out")
    sandbox = SandboxReport(wall_seconds=60.2, exit_code=137, stdout_path="stdout.log")
    driver = DriverReport(tokens_in=10, tokens_out=None, egress_denied_hosts={"x.org:443": 2})
    record = RunRecord.assemble(
        setup(),
        verdict,
        sandbox=sandbox,
        driver=driver,
        finished_at=T0 + dt.timedelta(minutes=1),
        local_validation_score=0.7,
    )
    assert record.status == "timeout" and record.error_message == "budget of 60 s ran out"
    assert record.wall_seconds == 60.2 and record.exit_code == 137 and record.score is None
    assert record.tokens_in == 10 and record.tokens_out is None  # unknown stays None
    assert record.egress_denied_hosts == {"x.org:443": 2} and record.local_validation_score == 0.7
    assert record.instructions_sha256 is None and record.run_id == setup().run_id
    write_record(tmp_path, record)
    assert read_record(tmp_path / "record.json") == record


def test_the_drivers_report_is_its_usage_then_its_egress_then_the_transcript():
    """Declared in that order, so the record's fields (the warehouse's columns) keep theirs."""
    assert list(DriverReport.model_fields) == [
        *ModelUsage.model_fields,
        *EgressReport.model_fields,
        "transcript_path",
    ]
    usage = ModelUsage(requests=3, steps=2, tokens_in=10, provider_fault_evidence=["call 3: x"])
    egress = EgressReport(egress_requests=1, egress_denied_hosts={"x.org:443": 2})
    report = DriverReport.of(usage, egress, transcript_path="transcript.jsonl")
    assert (report.requests, report.steps, report.tokens_in, report.tokens_out) == (3, 2, 10, None)
    assert report.provider_fault_evidence == ["call 3: x"] and report.egress_requests == 1
    assert report.egress_denied_hosts == {"x.org:443": 2}
    assert report.transcript_path == "transcript.jsonl"
    assert DriverReport.of() == DriverReport()  # a baseline: nothing counted, all unknown


def test_a_part_refuses_a_field_it_does_not_declare():
    with pytest.raises(ValidationError, match="tokens_in"):
        Verdict.model_validate({"status": "success", "tokens_in": 3})


def test_limit_exceeded_is_one_of_the_caps_the_sandbox_enforces():
    assert lifecycle.Limit is limits.Limit  # one declaration for the sandbox and the record
    for cap in ("memory", "pids", "disk", "spend"):
        assert SandboxReport(limit_exceeded=cap).limit_exceeded == cap
    with pytest.raises(ValidationError, match="limit_exceeded"):
        make_record(status="runtime_error", limit_exceeded="cpu")
