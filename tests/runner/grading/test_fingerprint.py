"""Submission fingerprints (runner.grading.fingerprint): byte hash and canonical-content hash.

Unit tests grade real files with the real grader; the attempt tests run agents in the bwrap
sandbox and check what lands in record.json against hashes computed here, independently of
the grader (the csv module and struct, not pyarrow).
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import io
import os
import struct
import textwrap
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from runner.agent_files import AgentFolder
from runner.agents.scripted_provider import ScriptedProvider, call, error, reply
from runner.attempts.records import read_record
from runner.grading import (
    InvalidSubmission,
    default_max_bytes,
    grade_submission,
    guarded_open,
    hash_submission_file,
    load_answers,
)
from runner.grading.fingerprint import canonical_text, normalized_sha256
from runner.specs import AgentSpec, TaskSpec
from runner.specs.registry import load_task
from tests.support.attempts import attempt
from tests.support.prepared_tasks import prepared

IDS = [1000 + 7 * i for i in range(12)]  # integers, not contiguous
VALUES = [0.5, 1.0, 0.1, 0.0, 1e-07, 123456.789, 2.5e150, -3.25, 5e-324, 42.0, 0.3, 7.0]
# Ways to write each value that all parse to the same float64; index 0 is what repr writes.
SPELLINGS = {
    0.5: ["0.5", "0.50", ".5", "5e-1", "5E-1", "+0.5", "0.5000000000000000001"],
    1.0: ["1.0", "1", "1.", "1e0", "10e-1", "001"],
    0.1: ["0.1", "1e-1", "0.10", "0.1000000000000000055511151231257827"],
    0.0: ["0.0", "0", "-0.0", "-0", "0e5", "-0e-3"],
    1e-07: ["1e-07", "1e-7", "0.0000001", "1E-07", "100e-9"],
    123456.789: ["123456.789", "1.23456789e5", "123456.7890"],
    2.5e150: ["2.5e+150", "2.5e150", "25e149"],  # large, yet its RMSE stays finite
    -3.25: ["-3.25", "-3.250", "-325e-2"],
    5e-324: ["5e-324", "4.9406564584124654e-324"],
    42.0: ["42.0", "42", "4.2e1"],
    0.3: ["0.3", "0.29999999999999999"],
    7.0: ["7.0", "7", "7.000"],
}


def make_task(metric: str = "rmse") -> TaskSpec:
    binary = metric == "auc"
    return TaskSpec(
        id=f"fp-{metric}",
        title="fingerprint task",
        task_type="binary" if binary else "regression",
        id_column="id",
        target_column="target",
        feature_columns=("x",),
        metric={"name": metric, "direction": "maximize" if binary else "minimize"},
        submission={"file": "submission.csv", "columns": ("id", "target")},
        split={"strategy": "stratified" if binary else "random", "test_fraction": 0.2, "seed": 1},
        source={"twin": {"generator": "generate.py", "default_rows": 100}},
        start_date=dt.date(2024, 1, 1),
    )


TASK = make_task()


def answers_for(ids: list[object]) -> pd.DataFrame:
    return pd.DataFrame({"id": [str(i) for i in ids], "target": [1.0] * len(ids)})


ANSWERS = answers_for(IDS)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write(tmp_path: Path, data: str | bytes, name: str = "submission.csv") -> Path:
    path = tmp_path / name
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def rows_text(
    rows: list[tuple[str, str]],
    *,
    header: str = "id,target",
    eol: str = "\n",
    final_eol: bool = True,
) -> str:
    lines = [header, *(f"{i},{v}" for i, v in rows)]
    return eol.join(lines) + (eol if final_eol else "")


BASE_ROWS = [(str(i), SPELLINGS[v][0]) for i, v in zip(IDS, VALUES, strict=True)]
BASE = rows_text(BASE_ROWS)


def spelled(k: int) -> list[tuple[str, str]]:
    """Every value written its k-th way (cycling through its spellings)."""
    return [
        (i, SPELLINGS[v][k % len(SPELLINGS[v])])
        for (i, _), v in zip(BASE_ROWS, VALUES, strict=True)
    ]


def reference_normalized(path: Path, id_column: str, target_column: str, numeric: bool) -> str:
    """The canonical form rebuilt from the docstring with the csv module and struct alone."""
    text = path.read_bytes().decode("utf-8-sig")
    rows = [row for row in csv.reader(io.StringIO(text, newline="")) if row]
    header = [name.strip() for name in rows[0]]
    id_at, value_at = header.index(id_column), header.index(target_column)
    pairs = []
    for row in rows[1:]:
        raw_id = row[id_at].strip()
        key: object = int(Decimal(raw_id)) if numeric else raw_id
        pairs.append((key, float(row[value_at].strip()) + 0.0))
    pairs.sort(key=lambda p: p[0])
    lines = [f"{quote(id_column)},{quote(target_column)}\n"]
    lines += [f"{quote(str(k))},{struct.pack('>d', v).hex()}\n" for k, v in pairs]
    return sha("".join(lines).encode("utf-8"))


def quote(field: str) -> str:
    if any(c in field for c in ',"\r\n'):
        return '"' + field.replace('"', '""') + '"'
    return field


# --------------------------------------------------------------------------- the canonical form


def test_the_canonical_form_is_sorted_ids_and_the_bits_of_each_value():
    ids = pa.array(["10", "9", "100", "-3"])
    values = np.array([0.5, -0.0, 0.1, 1.0])
    text = canonical_text("id", "y", ids, np.array([10, 9, 100, -3]), values)
    assert text == (
        b"id,y\n"
        b"-3,3ff0000000000000\n"
        b"9,0000000000000000\n"  # -0.0 is written as 0.0
        b"10,3fe0000000000000\n"
        b"100,3fb999999999999a\n"
    )
    assert normalized_sha256("id", "y", ids, np.array([10, 9, 100, -3]), values) == sha(text)


def test_text_ids_sort_by_code_point_and_are_quoted_when_needed():
    ids = ["b", "a", "B", "é", "z", "10", "9", "\uffff", "\U00010000", "a,b", 'say "hi"', "ä"]
    values = np.arange(len(ids), dtype=np.float64)
    text = canonical_text("id", "target", pa.array(ids), None, values).decode("utf-8")
    lines = text.splitlines()
    assert lines[0] == "id,target"
    expected_order = sorted(ids)  # Python orders str by code point: the same as UTF-8 bytes
    assert expected_order[:4] == ["10", "9", "B", "a"]  # text, not numeric, and case-sensitive
    written = [quote(i) for i in expected_order]
    assert [line.rsplit(",", 1)[0] for line in lines[1:]] == written
    assert '"a,b"' in written and '"say ""hi"""' in written
    by_id = dict(zip(ids, values, strict=True))
    assert [line.rsplit(",", 1)[1] for line in lines[1:]] == [
        struct.pack(">d", by_id[i]).hex() for i in expected_order
    ]


def test_integer_ids_sort_by_value_not_by_text(tmp_path):
    ids = [10, 9, 100, 1, 1000000]
    answers = answers_for(ids)
    path = write(tmp_path, rows_text([(str(i), "0.25") for i in ids]))
    graded = grade_submission(path, TASK, answers)
    text = canonical_text(
        "id", "target", pa.array([str(i) for i in ids]), np.array(ids), [0.25] * 5
    )
    assert [line.split(b",")[0] for line in text.splitlines()[1:]] == [
        b"1",
        b"9",
        b"10",
        b"100",
        b"1000000",
    ]
    assert graded.normalized_sha256 == sha(text)
    assert graded.normalized_sha256 == reference_normalized(path, "id", "target", numeric=True)


def test_ids_that_are_not_canonical_integers_are_text(tmp_path):
    ids = ["007", "10", "9"]  # a leading zero: the grader matches these as text
    answers = answers_for(ids)
    path = write(tmp_path, rows_text([("9", "1"), ("007", "2"), ("10", "3")]))
    graded = grade_submission(path, TASK, answers)
    assert graded.normalized_sha256 == reference_normalized(path, "id", "target", numeric=False)
    text = canonical_text("id", "target", pa.array(ids), None, np.array([2.0, 3.0, 1.0]))
    assert [line.split(b",")[0] for line in text.splitlines()[1:]] == [b"007", b"10", b"9"]


def test_the_base_file_matches_the_independent_reference(tmp_path):
    path = write(tmp_path, BASE)
    graded = grade_submission(path, TASK, ANSWERS)
    assert graded.submission_sha256 == sha(path.read_bytes())
    assert graded.normalized_sha256 == reference_normalized(path, "id", "target", numeric=True)


VARIANTS = {
    "reversed rows": rows_text(BASE_ROWS[::-1]),
    "shuffled rows": rows_text([BASE_ROWS[i] for i in np.random.default_rng(5).permutation(12)]),
    "other spellings 1": rows_text(spelled(1)),
    "other spellings 2": rows_text(spelled(2)[::-1]),
    "other spellings 3": rows_text(spelled(3)),
    "other spellings 4": rows_text(spelled(4)),
    "crlf": rows_text(BASE_ROWS, eol="\r\n"),
    "bare cr": rows_text(BASE_ROWS, eol="\r"),
    "no final newline": rows_text(BASE_ROWS, final_eol=False),
    "quoted": rows_text([(f'"{i}"', f'"{v}"') for i, v in BASE_ROWS], header='"id","target"'),
    "bom and blank lines": "\ufeff" + rows_text(BASE_ROWS).replace("\n", "\n\n"),
    "columns swapped": "target,id\n" + "".join(f"{v},{i}\n" for i, v in BASE_ROWS),
    "whitespace": " id , target \n" + "".join(f"  {i} ,\t{v} \n" for i, v in BASE_ROWS),
    "ids as floats": rows_text([(f"{i}.0", v) for i, v in BASE_ROWS]),
    "ids with plus and zeros": rows_text([(f"+0{i}", v) for i, v in BASE_ROWS]),
    "pandas to_csv": pd.DataFrame({"id": IDS, "target": VALUES}).to_csv(
        index=False,
        float_format="%.10g",  # every value has at most 10 significant digits
    ),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_byte_different_files_with_the_same_content_share_the_normalized_hash(tmp_path, variant):
    base = grade_submission(write(tmp_path, BASE, "base.csv"), TASK, ANSWERS)
    path = write(tmp_path, VARIANTS[variant])
    graded = grade_submission(path, TASK, ANSWERS)
    assert graded.submission_sha256 == sha(path.read_bytes())
    assert graded.submission_sha256 != base.submission_sha256
    assert graded.normalized_sha256 == base.normalized_sha256
    assert graded.score == base.score


def test_minus_zero_and_zero_share_the_normalized_hash(tmp_path):
    zero = grade_submission(
        write(tmp_path, rows_text([(i, "0") for i, _ in BASE_ROWS])), TASK, ANSWERS
    )
    minus = grade_submission(
        write(tmp_path, rows_text([(i, "-0.0") for i, _ in BASE_ROWS]), "m.csv"), TASK, ANSWERS
    )
    assert zero.submission_sha256 != minus.submission_sha256
    assert zero.normalized_sha256 == minus.normalized_sha256


def test_the_normalized_hash_depends_on_the_task_ids_not_the_answers_order(tmp_path):
    path = write(tmp_path, BASE)
    shuffled = ANSWERS.sample(frac=1.0, random_state=3).reset_index(drop=True)
    assert not shuffled["id"].equals(ANSWERS["id"])
    assert (
        grade_submission(path, TASK, shuffled).normalized_sha256
        == grade_submission(path, TASK, ANSWERS).normalized_sha256
    )


@pytest.mark.parametrize(
    "change",
    ["one ulp up", "one ulp down", "zero to tiny", "two predictions swapped", "sign"],
)
def test_different_predictions_never_share_the_normalized_hash(tmp_path, change):
    values = list(VALUES)
    if change == "one ulp up":
        values[5] = float(np.nextafter(values[5], np.inf))
    elif change == "one ulp down":
        values[0] = float(np.nextafter(values[0], -np.inf))
    elif change == "zero to tiny":
        values[3] = 5e-324
    elif change == "two predictions swapped":  # same values, bound to other ids
        values[0], values[1] = values[1], values[0]
    else:
        values[7] = -values[7]
    base = grade_submission(write(tmp_path, BASE, "base.csv"), TASK, ANSWERS)
    path = write(tmp_path, rows_text([(str(i), repr(v)) for i, v in zip(IDS, values, strict=True)]))
    graded = grade_submission(path, TASK, ANSWERS)
    assert graded.normalized_sha256 != base.normalized_sha256
    assert graded.normalized_sha256 == reference_normalized(path, "id", "target", numeric=True)


def test_text_id_submissions_in_any_order_share_the_normalized_hash(tmp_path):
    ids = ["row-b", "row-a", "Row-c", "row-ü", "row-10", "row-9"]
    answers = answers_for(ids)
    auc = make_task("auc")
    answers["target"] = [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    preds = ["0.25", "0.5", "0.75", "1", "0", "0.125"]
    one = write(tmp_path, rows_text(list(zip(ids, preds, strict=True))), "one.csv")
    two = write(
        tmp_path,
        rows_text(
            [(f'" {i} "', f"{float(p):.3e}") for i, p in zip(ids[::-1], preds[::-1], strict=True)]
        ),
        "two.csv",
    )
    a, b = grade_submission(one, auc, answers), grade_submission(two, auc, answers)
    assert a.submission_sha256 != b.submission_sha256
    assert a.normalized_sha256 == b.normalized_sha256
    assert a.normalized_sha256 == reference_normalized(one, "id", "target", numeric=False)


def test_mismatched_lengths_are_refused():
    with pytest.raises(ValueError, match="one entry per row"):
        normalized_sha256("id", "y", pa.array(["1", "2"]), None, np.array([1.0]))


# --------------------------------------------------------------------------- the byte hash


def test_a_symlink_is_never_followed(tmp_path):
    secret = write(tmp_path, BASE, "answers.csv")  # a valid submission, even: still refused
    link = tmp_path / "submission.csv"
    link.symlink_to(secret)
    with pytest.raises(InvalidSubmission) as info:
        grade_submission(link, TASK, ANSWERS)
    assert info.value.code == "not_regular_file"
    assert info.value.submission_sha256 is None
    assert hash_submission_file(link, max_bytes=1 << 20) is None
    assert hash_submission_file(secret, max_bytes=1 << 20) == sha(secret.read_bytes())


def test_a_symlink_swapped_in_after_the_check_is_not_followed(tmp_path, monkeypatch):
    """``O_NOFOLLOW`` holds even when the ``lstat`` check saw a regular file (a race)."""
    secret = write(tmp_path, BASE, "answers.csv")
    link = tmp_path / "submission.csv"
    link.symlink_to(secret)
    # As if the link appeared just after the check: the check sees what it points at.
    monkeypatch.setattr(AgentFolder, "lstat", lambda self, name: os.stat(name, dir_fd=self.fd))
    assert hash_submission_file(link, max_bytes=1 << 20) is None
    with pytest.raises(InvalidSubmission) as info:
        grade_submission(link, TASK, ANSWERS)
    assert info.value.code == "not_regular_file" and "became a symbolic link" in info.value.message
    assert info.value.submission_sha256 is None


@pytest.mark.timeout(20)
def test_special_files_and_missing_files_get_no_hash(tmp_path):
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    (tmp_path / "dir.csv").mkdir()
    dev = tmp_path / "dev.csv"
    dev.symlink_to("/dev/zero")
    for path in (fifo, tmp_path / "dir.csv", dev, tmp_path / "none.csv", tmp_path / "x" / "y"):
        assert hash_submission_file(path, max_bytes=1 << 20) is None, path


def test_an_oversized_file_gets_no_hash(tmp_path):
    data = BASE.encode()
    path = write(tmp_path, data)
    assert hash_submission_file(path, max_bytes=len(data)) == sha(data)  # the cap is inclusive
    assert hash_submission_file(path, max_bytes=len(data) - 1) is None
    with pytest.raises(InvalidSubmission) as info:
        grade_submission(path, TASK, ANSWERS, max_bytes=len(data) - 1)
    assert info.value.code == "too_large" and info.value.submission_sha256 is None
    assert grade_submission(path, TASK, ANSWERS, max_bytes=len(data)).submission_sha256 == sha(data)


def test_a_large_file_is_hashed_in_blocks(tmp_path):
    data = os.urandom(3 * guarded_open._HASH_BLOCK + 17)
    path = write(tmp_path, data)
    assert hash_submission_file(path, max_bytes=len(data)) == sha(data)
    assert hash_submission_file(path, max_bytes=len(data) - 1) is None


@pytest.mark.parametrize(
    ("content", "code"),
    [
        ("id,wrong\n1000,1\n", "wrong_columns"),
        (b"\x00\x01garbage", "unreadable_csv"),
        (BASE.replace("0.5", "half"), "non_numeric_predictions"),
        (BASE.replace("\n1007,", "\n1,"), "id_mismatch"),
    ],
)
def test_an_invalid_submission_that_was_read_carries_its_byte_hash(tmp_path, content, code):
    path = write(tmp_path, content)
    with pytest.raises(InvalidSubmission) as info:
        grade_submission(path, TASK, ANSWERS)
    assert info.value.code == code
    assert info.value.submission_sha256 == sha(path.read_bytes())


def test_a_refused_score_keeps_the_byte_hash_only(tmp_path):
    """Validated predictions whose RMSE overflows: non_finite_score, no canonical form."""
    path = write(tmp_path, BASE.replace("0.5", "1e160"))
    with pytest.raises(InvalidSubmission) as info:
        grade_submission(path, TASK, ANSWERS)
    assert info.value.code == "non_finite_score"
    assert info.value.submission_sha256 == sha(path.read_bytes())


# --------------------------------------------------------------------------- whole attempts

ATTEMPT_TASK = "bank-customer-churn-ict-u-ai"  # AUC: predictions are probabilities
# Deterministic predictions from the test ids, written in several ways by the agents below.
WRITER = """
import csv
table = list(csv.reader(open("test.csv")))
ids = [row[table[0].index("id")] for row in table[1:]]
preds = [((int(i) * 7919) % 1000) / 1000 for i in ids]
rows = list(zip(ids, preds, strict=True))
"""


def command_agent(tmp_path: Path, agent_id: str, body: str) -> tuple[AgentSpec, Path]:
    code = tmp_path / f"{agent_id}-code"
    code.mkdir()
    (code / "agent.py").write_text(textwrap.dedent(WRITER) + textwrap.dedent(body))
    spec = AgentSpec(
        id=agent_id,
        kind="command",
        title="fingerprint test agent",
        harness="test",
        command=("{python}", "{agent_dir}/agent.py"),
    )
    return spec, code


def submitted(paths, record) -> Path:
    assert record.submission_path == "workspace/submission.csv"
    return paths.runs_dir / record.run_id / record.submission_path


@pytest.mark.sandbox
def test_an_attempt_records_both_fingerprints_and_a_replay_shares_the_normalized_one(
    small_paths, tmp_path
):
    first, first_code = command_agent(
        tmp_path,
        "writes-plainly",
        """
        with open("submission.csv", "w") as fh:
            fh.write("id,Exited\\n")
            fh.writelines(f"{i},{p!r}\\n" for i, p in rows)
        """,
    )
    replay, replay_code = command_agent(
        tmp_path,
        "replays-reformatted",
        """
        with open("submission.csv", "w", newline="") as fh:
            fh.write('"Exited","id"\\r\\n')
            fh.writelines(f'"{p:.17e}","{i}.0"\\r\\n' for i, p in reversed(rows))
        """,
    )
    records = [
        attempt(small_paths, agent, ATTEMPT_TASK, budget=30, code_dir=code)
        for agent, code in ((first, first_code), (replay, replay_code))
    ]
    for record in records:
        assert record.status == "success", (record.error_message, record.validation_message)
        path = submitted(small_paths, record)
        assert record.submission_sha256 == sha(path.read_bytes())
        assert record.submission_normalized_sha256 == reference_normalized(
            path, "id", "Exited", numeric=True
        )
        stored = read_record(small_paths.runs_dir / record.run_id / "record.json")
        assert stored.submission_sha256 == record.submission_sha256
        assert stored.submission_normalized_sha256 == record.submission_normalized_sha256
    a, b = records
    assert a.submission_sha256 != b.submission_sha256
    assert a.submission_normalized_sha256 == b.submission_normalized_sha256
    assert a.score == b.score


@pytest.mark.sandbox
def test_a_timed_out_attempt_records_the_hash_of_the_file_it_left(small_paths, tmp_path):
    agent, code = command_agent(
        tmp_path,
        "writes-then-hangs",
        """
        import time
        with open("submission.csv", "w") as fh:
            fh.writelines(["id,Exited\\n", *(f"{i},{p}\\n" for i, p in rows)])
        time.sleep(1000)
        """,
    )
    record = attempt(small_paths, agent, ATTEMPT_TASK, budget=3, code_dir=code)
    assert record.status == "timeout"
    assert record.submission_sha256 == sha(submitted(small_paths, record).read_bytes())
    assert record.submission_normalized_sha256 is None  # not graded: no canonical form


@pytest.mark.sandbox
@pytest.mark.parametrize("hang", [False, True], ids=["graded", "timed-out"])
def test_a_symlink_to_the_answers_is_never_hashed(small_paths, tmp_path, hang):
    answers = prepared(small_paths, ATTEMPT_TASK).answers_path
    agent, code = command_agent(
        tmp_path,
        "links-the-answers",
        f"""
        import os, time
        os.symlink({str(answers)!r}, "submission.csv")
        if {hang}:
            time.sleep(1000)
        """,
    )
    record = attempt(small_paths, agent, ATTEMPT_TASK, budget=3 if hang else 30, code_dir=code)
    if hang:
        assert record.status == "timeout"
    else:
        assert (record.status, record.validation_code) == ("invalid_submission", "not_regular_file")
    assert submitted(small_paths, record).is_symlink()
    assert record.submission_sha256 is None
    assert record.submission_normalized_sha256 is None


@pytest.mark.sandbox
def test_an_oversized_file_left_by_a_timed_out_attempt_gets_no_hash(small_paths, tmp_path):
    task = load_task(small_paths.tasks_dir, ATTEMPT_TASK)
    cap = default_max_bytes(
        len(load_answers(prepared(small_paths, ATTEMPT_TASK).answers_path, task))
    )
    agent, code = command_agent(
        tmp_path,
        "writes-too-much",
        f"""
        import time
        with open("submission.csv", "wb") as fh:
            fh.truncate({cap + 1})  # sparse: one byte over the grader's cap
        time.sleep(1000)
        """,
    )
    record = attempt(small_paths, agent, ATTEMPT_TASK, budget=3, code_dir=code)
    assert record.status == "timeout"
    assert submitted(small_paths, record).stat().st_size == cap + 1
    assert record.submission_sha256 is None


@pytest.mark.sandbox
@pytest.mark.timeout(180)
def test_a_provider_error_still_records_the_file_the_agent_left(small_paths, monkeypatch):
    from tests.support.llm_attempts import KEY, KEY_ENV, run

    monkeypatch.setenv(KEY_ENV, KEY)
    script = [
        reply(tool_calls=[call("run", {"command": "cp sample_submission.csv submission.csv"})]),
        error(402, "Insufficient balance", code="insufficient_quota"),
    ]
    with ScriptedProvider(script, api_key=KEY) as provider:
        record = run(small_paths, provider)
    assert provider.mismatches == []
    assert record.status == "provider_error", (record.status, record.error_message)
    sample = prepared(small_paths, ATTEMPT_TASK).public / "sample_submission.csv"
    assert record.submission_sha256 == sha(sample.read_bytes())
    assert record.submission_sha256 == sha(submitted(small_paths, record).read_bytes())
    assert record.submission_normalized_sha256 is None
