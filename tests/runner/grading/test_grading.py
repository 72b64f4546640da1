"""Strict submission validation and grading (runner.grading)."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from runner.errors import HarnessError
from runner.grading import (
    REASON_CODES,
    GradeResult,
    InvalidSubmission,
    csv_scan,
    default_max_bytes,
    grade_submission,
    load_answers,
    scoring,
    validate_submission,
    validation,
)
from runner.specs import TaskSpec
from runner.tasks.metrics import Metric

N = 20


def make_task(kind: str) -> TaskSpec:
    binary = kind == "binary"
    return TaskSpec(
        id=f"tiny-{kind}",
        title=f"tiny {kind} task",
        task_type="binary" if binary else "regression",
        id_column="id",
        target_column="target",
        feature_columns=("x1", "x2"),
        metric={"name": "auc", "direction": "maximize"}
        if binary
        else {"name": "rmse", "direction": "minimize"},
        submission={"file": "submission.csv", "columns": ("id", "target")},
        split={"strategy": "stratified" if binary else "random", "test_fraction": 0.2, "seed": 1},
        source={"twin": {"generator": "generate.py", "default_rows": 100}},
        start_date=dt.date(2024, 1, 1),
    )


BINARY = make_task("binary")
REGRESSION = make_task("regression")
IDS = [str(1000 + 3 * i) for i in range(N)]  # integers, not contiguous
Y_BIN = [i % 2 for i in range(N)]
Y_REG = [round(0.5 * i - 3.25, 2) for i in range(N)]


def answers_df(kind: str, ids: list[str] = IDS) -> pd.DataFrame:
    y = Y_BIN if kind == "binary" else Y_REG
    return pd.DataFrame({"id": ids, "target": y})


@pytest.fixture(params=["binary", "regression"])
def setup(request, tmp_path: Path):
    kind = request.param
    task = BINARY if kind == "binary" else REGRESSION
    return task, answers_df(kind), tmp_path


def csv_text(ids, preds, header: str = "id,target") -> str:
    return header + "\n" + "".join(f"{i},{p}\n" for i, p in zip(ids, preds, strict=True))


def perfect(kind: str) -> list[float]:
    return [float(v) for v in (Y_BIN if kind == "binary" else Y_REG)]


def write(tmp_path: Path, content: str | bytes, name: str = "submission.csv") -> Path:
    path = tmp_path / name
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_bytes(content)
    return path


def expect_invalid(
    code: str, path: Path, task: TaskSpec, answers: pd.DataFrame, *words: str, **kw
) -> InvalidSubmission:
    assert code in REASON_CODES
    with pytest.raises(InvalidSubmission) as info:
        validate_submission(path, task, answers, **kw)
    err = info.value
    assert err.code == code, err.message
    for word in words:
        assert word in err.message, (word, err.message)
    assert "A valid submission is a UTF-8 CSV file" in err.message
    # grading reports exactly the same problem
    with pytest.raises(InvalidSubmission) as again:
        grade_submission(path, task, answers, **kw)
    assert again.value.code == code
    return err


def kind_of(task: TaskSpec) -> str:
    return task.task_type


# --------------------------------------------------------------------------- file-level checks


def test_missing_file(setup):
    task, answers, tmp = setup
    expect_invalid("missing_file", tmp / "nope.csv", task, answers, "nope.csv")


def test_missing_parent_directory(setup):
    task, answers, tmp = setup
    expect_invalid("missing_file", tmp / "nodir" / "submission.csv", task, answers)


def test_symlink_to_valid_file_is_rejected(setup):
    task, answers, tmp = setup
    good = write(tmp, csv_text(IDS, perfect(kind_of(task))), name="real.csv")
    validate_submission(good, task, answers)  # the target itself is fine
    link = tmp / "submission.csv"
    link.symlink_to(good)
    expect_invalid("not_regular_file", link, task, answers, "symbolic link")


def test_dangling_symlink_and_device_symlink(setup):
    task, answers, tmp = setup
    dangling = tmp / "dangling.csv"
    dangling.symlink_to(tmp / "does-not-exist.csv")
    expect_invalid("not_regular_file", dangling, task, answers, "symbolic link")
    dev = tmp / "dev.csv"
    dev.symlink_to("/dev/zero")
    expect_invalid("not_regular_file", dev, task, answers, "symbolic link")


@pytest.mark.timeout(20)
def test_fifo_is_never_opened(setup):
    task, answers, tmp = setup
    fifo = tmp / "submission.csv"
    os.mkfifo(fifo)
    expect_invalid("not_regular_file", fifo, task, answers, "FIFO")


def test_directory(setup):
    task, answers, tmp = setup
    d = tmp / "submission.csv"
    d.mkdir()
    expect_invalid("not_regular_file", d, task, answers, "directory")


def test_too_large_with_explicit_cap(setup):
    task, answers, tmp = setup
    path = write(tmp, csv_text(IDS, perfect(kind_of(task))))
    err = expect_invalid("too_large", path, task, answers, "limit of 50 bytes", max_bytes=50)
    assert f"{path.stat().st_size:,} bytes" in err.message


def test_too_large_default_cap_without_reading(setup):
    task, answers, tmp = setup
    path = tmp / "submission.csv"
    with open(path, "wb") as f:  # sparse: 65 MiB on paper, nothing on disk
        f.truncate(65 * 1024 * 1024)
    assert default_max_bytes(N) == 64 * 1024 * 1024
    expect_invalid("too_large", path, task, answers, "67,108,864")
    assert default_max_bytes(1_000_000) == 200_000_000


def test_binary_garbage(setup):
    task, answers, tmp = setup
    rng = np.random.default_rng(0)
    path = write(tmp, b"\x00" + rng.bytes(4096))
    expect_invalid("unreadable_csv", path, task, answers, "binary")


def test_bad_encoding(setup):
    task, answers, tmp = setup
    text = csv_text(IDS, perfect(kind_of(task))).encode() + b"1,\xff\xfe\n"
    expect_invalid("unreadable_csv", path := write(tmp, text), task, answers, "not UTF-8", "0xff")
    assert path.exists()


def test_latin1_text_is_not_utf8(setup):
    task, answers, tmp = setup
    path = write(tmp, "id,target\n1000,caf\u00e9\n".encode("latin-1"))
    expect_invalid("unreadable_csv", path, task, answers, "UTF-8")


@pytest.mark.parametrize("content", [b"", b"\n\n", b"   \r\n  "])
def test_empty_file(setup, content):
    task, answers, tmp = setup
    expect_invalid("unreadable_csv", write(tmp, content), task, answers, "empty")


def test_ragged_rows_are_a_parse_error(setup):
    task, answers, tmp = setup
    text = csv_text(IDS, perfect(kind_of(task))).replace("1003,", "1003,0.5,", 1)
    err = expect_invalid(
        "unreadable_csv",
        write(tmp, text),
        task,
        answers,
        "Data row 2 of the submission submission.csv has 3 fields but the header has 2",
        "'1003,0.5,",
        "quote a value that contains a comma",
    )
    assert "CSV parse error" not in err.message


def test_a_short_row_is_named_by_its_data_row(setup):
    task, answers, tmp = setup
    lines = csv_text(IDS, perfect(kind_of(task))).splitlines(keepends=True)
    lines[15] = "\r\n" + IDS[14] + "\n"  # a blank line first: data rows skip it
    expect_invalid(
        "unreadable_csv",
        write(tmp, "".join(lines)),
        task,
        answers,
        f"Data row 15 of the submission submission.csv has 1 fields but the header has 2: "
        f"'{IDS[14]}'",
    )


def test_a_ragged_row_deep_in_a_large_file_is_found(tmp_path):
    n = 300_000  # several Arrow blocks, parsed on several threads
    ids = [str(i) for i in range(n)]
    answers = pd.DataFrame({"id": ids, "target": np.zeros(n)})
    rows = [f"{i},0\n" for i in ids]
    rows[250_000] = "250000,0,7\n"
    path = write(tmp_path, "id,target\n" + "".join(rows))
    with pytest.raises(InvalidSubmission) as info:
        grade_submission(path, REGRESSION, answers)
    assert info.value.code == "unreadable_csv"
    assert "Data row 250,001 of the submission submission.csv has 3 fields" in info.value.message


# --------------------------------------------------------------------------- long lines


def test_a_10_mb_id_is_a_line_too_long(setup):
    task, answers, tmp = setup
    huge = "7" * (10 * 1024 * 1024)
    text = csv_text([huge, *IDS[1:]], perfect(kind_of(task)))
    err = expect_invalid(
        "unreadable_csv",
        write(tmp, text),
        task,
        answers,
        "Line 2 of the submission submission.csv is 10,485,7",  # the id, a comma, a number
        "at most 1,048,576 bytes (1 MiB)",
        "'7777777777",
        "an id as written in test.csv",
    )
    assert "straddl" not in err.message and "block" not in err.message
    assert len(err.message) < 800


def test_the_line_limit_is_exact(tmp_path):
    """A line of MAX_LINE_BYTES parses wherever it falls in Arrow's blocks; one byte more never."""
    limit = csv_scan.MAX_LINE_BYTES
    for pad in (1, 5000, limit // 2, limit - 30):
        for length, code in ((limit, "id_mismatch"), (limit + 1, "unreadable_csv")):
            ids = list(IDS)
            ids[0] = "8" * pad  # shifts where the long line starts
            ids[3] = "9" * (length - len(",0.0"))
            path = write(tmp_path, csv_text(ids, [0.0] * N))
            err = expect_invalid(code, path, REGRESSION, answers_df("regression"))
            if code == "unreadable_csv":
                assert f"Line 5 of the submission submission.csv is {length:,} bytes" in err.message
            else:
                assert "2 submitted ids not among the test ids" in err.message


@pytest.mark.parametrize("where", ["header", "last line without its line end", "bare CR"])
def test_long_lines_anywhere_are_named(tmp_path, where):
    big = "5" * (csv_scan.MAX_LINE_BYTES + 10)
    if where == "header":
        text, line = f"id,{big}\n" + "1000,0.5\n", 1
    elif where == "bare CR":
        text, line = "id,target\r1000,0.5\r" + f"{big},0.5\r1003,1\r", 3
    else:
        text, line = csv_text(IDS, Y_REG) + big, N + 2
    err = expect_invalid("unreadable_csv", write(tmp_path, text), REGRESSION, answers_df("r"))
    assert f"Line {line} of the submission submission.csv" in err.message


@pytest.mark.parametrize("chunk", [3, 7, 64, 1 << 22])
def test_first_long_line_across_scan_chunks(monkeypatch, chunk):
    monkeypatch.setattr(csv_scan, "_SCAN_CHUNK", chunk)
    find = csv_scan.first_long_line
    assert find(b"ab\ncd\r\nef", 0, 2) is None
    assert find(b"ab\ncde\r\nef", 0, 2) == (3, 3)
    assert find(b"ab\r\ncd\rabcdefgh", 0, 5) == (7, 8)  # the last line, no line end
    assert find(b"abcdefg\nxy", 0, 5) == (0, 7)
    assert find(b"\xef\xbb\xbfabcde\nx", 3, 5) is None  # a BOM is not part of the header
    assert find(b"x" * 40 + b"\n" + b"y" * 41 + b"\n", 0, 40) == (41, 41)


def test_first_long_line_agrees_with_splitting_the_lines(monkeypatch):
    monkeypatch.setattr(csv_scan, "_SCAN_CHUNK", 16)
    rng = np.random.default_rng(12)
    for _ in range(3000):
        data = bytes(rng.choice(list(b"aaaaaaa\n\r"), size=int(rng.integers(0, 60))))
        limit = int(rng.integers(1, 12))
        lines, start = [], 0
        for i, byte in enumerate(data):
            if byte in b"\r\n":
                lines.append((start, i - start))
                start = i + 1
        lines.append((start, len(data) - start))
        expected = next(((s, n) for s, n in lines if n > limit), None)
        assert csv_scan.first_long_line(data, 0, limit) == expected, (data, limit)


def test_bad_utf8_is_found_across_scan_chunks(monkeypatch):
    monkeypatch.setattr(csv_scan, "_SCAN_CHUNK", 4)
    text = "id,é€😀\n".encode()  # 2-, 3- and 4-byte characters straddle the 4-byte chunks
    assert csv_scan.first_bad_utf8(text) is None
    bad = text + "ab€".encode()[:-1] + b"x"  # a cut 3-byte character
    assert csv_scan.first_bad_utf8(bad) == len(text) + 2
    assert csv_scan.first_bad_utf8(text + b"\xff") == len(text)
    assert csv_scan.first_bad_utf8(text + "€".encode()[:2]) == len(text)  # cut at the end


def test_nul_bytes_are_named_with_their_line(setup):
    task, answers, tmp = setup
    text = csv_text(IDS, perfect(kind_of(task))).encode().replace(b"1006,", b"10\x0006,")
    expect_invalid(
        "unreadable_csv", write(tmp, text), task, answers, "NUL bytes", "line 4", "byte offset"
    )


# --------------------------------------------------------------------------- columns and rows


def test_extra_column(setup):
    task, answers, tmp = setup
    rows = "".join(f"{i},{p},x\n" for i, p in zip(IDS, perfect(kind_of(task)), strict=True))
    err = expect_invalid("wrong_columns", write(tmp, "id,target,extra\n" + rows), task, answers)
    assert "unexpected 'extra'" in err.message
    assert "missing" not in err.message.split("A valid")[0]


def test_missing_target_column(setup):
    task, answers, tmp = setup
    text = "id\n" + "".join(f"{i}\n" for i in IDS)
    err = expect_invalid("wrong_columns", write(tmp, text), task, answers, "missing 'target'")
    assert "'id,target'" in err.message


def test_renamed_target_column(setup):
    task, answers, tmp = setup
    text = csv_text(IDS, perfect(kind_of(task)), header="id,prediction")
    expect_invalid(
        "wrong_columns",
        write(tmp, text),
        task,
        answers,
        "missing 'target'",
        "unexpected 'prediction'",
    )


def test_repeated_column(setup):
    task, answers, tmp = setup
    rows = "".join(f"{i},{p},{p}\n" for i, p in zip(IDS, perfect(kind_of(task)), strict=True))
    expect_invalid(
        "wrong_columns", write(tmp, "id,target,target\n" + rows), task, answers, "repeated"
    )


def test_missing_id_column(setup):
    task, answers, tmp = setup
    text = csv_text(IDS, perfect(kind_of(task)), header="row,target")
    expect_invalid("missing_id_column", write(tmp, text), task, answers, "'id'", "row,target")


def test_missing_id_column_case_hint(setup):
    task, answers, tmp = setup
    text = csv_text(IDS, perfect(kind_of(task)), header="ID,target")
    expect_invalid("missing_id_column", write(tmp, text), task, answers, "case-sensitive", "'ID'")


def test_very_wide_header(setup):
    task, answers, tmp = setup
    header = ",".join(["id", "target"] + [f"c{i}" for i in range(5000)])
    err = expect_invalid("wrong_columns", write(tmp, header + "\n"), task, answers, "5,002 columns")
    assert len(err.message) < 1000
    no_id = ",".join(f"c{i}" for i in range(5000))
    expect_invalid("missing_id_column", write(tmp, no_id + "\n"), task, answers, "'id'")


def test_header_only(setup):
    task, answers, tmp = setup
    expect_invalid(
        "wrong_row_count", write(tmp, "id,target\n"), task, answers, "0 data rows", f"{N} test rows"
    )


def test_fewer_rows(setup):
    task, answers, tmp = setup
    text = csv_text(IDS[:-1], perfect(kind_of(task))[:-1])
    expect_invalid(
        "wrong_row_count", write(tmp, text), task, answers, f"{N - 1} data rows", "fewer"
    )


def test_more_rows(setup):
    task, answers, tmp = setup
    text = csv_text([*IDS, "9999"], [*perfect(kind_of(task)), 0.5])
    expect_invalid("wrong_row_count", write(tmp, text), task, answers, f"{N + 1} data rows", "more")


# --------------------------------------------------------------------------- ids


def test_blank_id(setup):
    task, answers, tmp = setup
    ids = list(IDS)
    ids[4] = "  "
    text = csv_text(ids, perfect(kind_of(task)))
    expect_invalid("missing_ids", write(tmp, text), task, answers, "Empty 'id' in 1 row", "5")


def test_duplicate_ids(setup):
    task, answers, tmp = setup
    ids = list(IDS)
    ids[7] = ids[3]
    text = csv_text(ids, perfect(kind_of(task)))
    expect_invalid("duplicate_ids", write(tmp, text), task, answers, f"'{IDS[3]}'", "2 times")


def test_duplicate_ids_written_differently(setup):
    task, answers, tmp = setup
    ids = list(IDS)
    ids[7] = ids[3] + ".0"  # the same integer id
    text = csv_text(ids, perfect(kind_of(task)))
    expect_invalid("duplicate_ids", write(tmp, text), task, answers, "2 times")


def test_duplicate_unknown_ids_are_duplicates(setup):
    task, answers, tmp = setup
    ids = list(IDS)
    ids[1] = ids[2] = "abc"
    text = csv_text(ids, perfect(kind_of(task)))
    expect_invalid("duplicate_ids", write(tmp, text), task, answers, "'abc'")


def test_unknown_ids(setup):
    task, answers, tmp = setup
    ids = list(IDS)
    ids[0], ids[1] = "5", "abc"
    text = csv_text(ids, perfect(kind_of(task)))
    err = expect_invalid(
        "id_mismatch", write(tmp, text), task, answers, "2 submitted ids not among", "'abc'"
    )
    assert "2 test ids missing" in err.message
    assert f"'{IDS[0]}'" in err.message


def test_non_integral_float_id_is_unknown(setup):
    task, answers, tmp = setup
    ids = list(IDS)
    ids[0] = IDS[0] + ".5"
    text = csv_text(ids, perfect(kind_of(task)))
    expect_invalid("id_mismatch", write(tmp, text), task, answers, f"'{IDS[0]}.5'")


def test_text_ids_compare_as_text(tmp_path):
    text_ids = [f"00{i}" for i in range(N)]  # leading zeros: not integers, compare as text
    answers = answers_df("regression", text_ids)
    good = csv_text(text_ids, Y_REG)
    assert grade_submission(write(tmp_path, good), REGRESSION, answers).score == 0.0
    stripped = csv_text([str(int(i)) for i in text_ids], Y_REG)
    expect_invalid("id_mismatch", write(tmp_path, stripped), REGRESSION, answers, "'0'")


# --------------------------------------------------------------------------- predictions


def test_non_numeric_prediction(setup):
    task, answers, tmp = setup
    preds: list[object] = perfect(kind_of(task))
    preds[5] = "high"
    text = csv_text(IDS, preds)
    expect_invalid("non_numeric_predictions", write(tmp, text), task, answers, "'high'", "row 6")


@pytest.mark.parametrize("bad", ["0,5", "1_0", "0x1", "True", "1e", "\u0661"])
def test_non_numeric_prediction_forms(tmp_path, bad):
    preds: list[object] = [float(v) for v in Y_REG]
    preds[2] = f'"{bad}"' if "," in bad else bad
    text = csv_text(IDS, preds)
    expect_invalid("non_numeric_predictions", write(tmp_path, text), REGRESSION, answers_df("r"))


def test_non_numeric_is_reported_before_missing(setup):
    task, answers, tmp = setup
    preds: list[object] = perfect(kind_of(task))
    preds[1], preds[2] = "", "oops"
    text = csv_text(IDS, preds)
    expect_invalid("non_numeric_predictions", write(tmp, text), task, answers, "'oops'")


@pytest.mark.parametrize("blank", ["", "  ", "NA", "null", '""'])
def test_missing_prediction(setup, blank):
    task, answers, tmp = setup
    preds: list[object] = perfect(kind_of(task))
    preds[3] = blank
    text = csv_text(IDS, preds)
    expect_invalid(
        "missing_predictions", write(tmp, text), task, answers, "No value in 'target' in 1 row "
    )


@pytest.mark.parametrize("bad", ["inf", "-inf", "nan", "NaN", "Infinity", "1e999"])
def test_non_finite_prediction(setup, bad):
    task, answers, tmp = setup
    preds: list[object] = perfect(kind_of(task))
    preds[0] = bad
    text = csv_text(IDS, preds)
    expect_invalid("non_finite_predictions", write(tmp, text), task, answers, repr(bad), "row 1")


@pytest.mark.parametrize("bad", ["1.5", "-0.01", "100"])
def test_probability_out_of_range_for_auc(tmp_path, bad):
    preds: list[object] = perfect("binary")
    preds[2] = bad
    text = csv_text(IDS, preds)
    expect_invalid(
        "out_of_range_predictions",
        write(tmp_path, text),
        BINARY,
        answers_df("binary"),
        "outside [0, 1]",
        "'auc'",
        float(bad).__repr__(),
    )


def test_out_of_range_is_fine_for_regression(tmp_path):
    preds = [v + 100.0 for v in Y_REG]
    result = grade_submission(write(tmp_path, csv_text(IDS, preds)), REGRESSION, answers_df("r"))
    assert result.score == pytest.approx(100.0)


def test_unexpected_error_becomes_invalid(setup, monkeypatch):
    task, answers, tmp = setup
    path = write(tmp, csv_text(IDS, perfect(kind_of(task))))

    def boom(*args, **kwargs):
        raise RuntimeError("surprise")

    monkeypatch.setattr(validation, "integer_keys", boom)
    monkeypatch.setattr(validation.pc, "index_in", boom)
    err = expect_invalid("invalid", path, task, answers, "RuntimeError", "surprise")
    assert isinstance(err.__cause__, RuntimeError)


def test_every_reason_code_is_a_stable_string():
    assert len(set(REASON_CODES)) == len(REASON_CODES)
    err = InvalidSubmission("missing_file", "No file.")
    assert err.to_dict() == {"code": "missing_file", "message": "No file."}
    assert str(err) == "missing_file: No file."


# --------------------------------------------------------------------------- valid submissions


def test_perfect_auc(tmp_path):
    path = write(tmp_path, csv_text(IDS, perfect("binary")))
    result = grade_submission(path, BINARY, answers_df("binary"))
    assert result == GradeResult(
        score=1.0,
        score_hib=1.0,
        n_rows=N,
        metric="auc",
        submission_sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
        normalized_sha256=result.normalized_sha256,  # its form: test_fingerprint.py
    )


def test_perfect_rmse(tmp_path):
    path = write(tmp_path, csv_text(IDS, perfect("regression")))
    result = grade_submission(path, REGRESSION, answers_df("regression"))
    assert result.score == 0.0
    assert result.score_hib == 0.0
    assert result.metric == "rmse"
    assert result.n_rows == N


def test_shuffled_rows_grade_correctly(setup):
    task, answers, tmp = setup
    rng = np.random.default_rng(3)
    y = np.asarray(perfect(kind_of(task)))
    preds = (
        np.clip(y + rng.normal(scale=0.3, size=N), 0, 1) if task.task_type == "binary" else y + 1
    )
    order = rng.permutation(N)
    path = write(tmp, csv_text([IDS[i] for i in order], [repr(float(p)) for p in preds[order]]))

    aligned = validate_submission(path, task, answers)
    assert aligned.index.equals(answers.index)
    assert aligned.name == "target"
    np.testing.assert_array_equal(aligned.to_numpy(), preds)

    result = grade_submission(path, task, answers)
    if task.task_type == "binary":
        from sklearn.metrics import roc_auc_score

        assert result.score == pytest.approx(roc_auc_score(Y_BIN, preds))
        assert result.score_hib == result.score
    else:
        assert result.score == pytest.approx(1.0)
        assert result.score_hib == pytest.approx(-1.0)


def test_aligned_to_answers_index(tmp_path):
    answers = answers_df("regression")
    answers.index = pd.Index(range(100, 100 + N))
    path = write(tmp_path, csv_text(IDS[::-1], Y_REG[::-1]))
    aligned = validate_submission(path, REGRESSION, answers)
    assert list(aligned.index) == list(answers.index)
    assert aligned.tolist() == Y_REG


@pytest.mark.parametrize("form", ["{}.0", "+{}", "0{}", "{}.000", "{}e0"])
def test_integral_float_ids_accepted_for_integer_ids(setup, form):
    task, answers, tmp = setup
    ids = [form.format(i) for i in IDS]
    path = write(tmp, csv_text(ids, perfect(kind_of(task))))
    result = grade_submission(path, task, answers)
    assert result.score == (1.0 if task.task_type == "binary" else 0.0)


def test_surrounding_whitespace_is_stripped(setup):
    """Decision: blanks around header names, ids and predictions are tolerated (stripped)."""
    task, answers, tmp = setup
    rows = "".join(f"  {i} ,\t{p}  \n" for i, p in zip(IDS, perfect(kind_of(task)), strict=True))
    path = write(tmp, " id , target \n" + rows)
    result = grade_submission(path, task, answers)
    assert result.score == (1.0 if task.task_type == "binary" else 0.0)


def test_inner_whitespace_is_not_stripped(setup):
    task, answers, tmp = setup
    preds: list[object] = perfect(kind_of(task))
    preds[0] = "0 .5"
    path = write(tmp, csv_text(IDS, preds))
    expect_invalid("non_numeric_predictions", path, task, answers, "'0 .5'")


def test_tolerated_csv_variants(setup):
    """BOM, CRLF, swapped column order, quoted fields and blank lines are all fine."""
    task, answers, tmp = setup
    rows = "".join(f'"{p}","{i}"\r\n\r\n' for i, p in zip(IDS, perfect(kind_of(task)), strict=True))
    path = write(tmp, ("\ufefftarget,id\r\n" + rows).encode("utf-8"))
    result = grade_submission(path, task, answers)
    assert result.score == (1.0 if task.task_type == "binary" else 0.0)


def test_bare_cr_line_ends(tmp_path):
    ids = [str(i) for i in range(2000)]
    answers = pd.DataFrame({"id": ids, "target": [float(i) for i in range(2000)]})
    text = csv_text(ids, [float(i) for i in range(2000)]).replace("\n", "\r")
    assert grade_submission(write(tmp_path, text), REGRESSION, answers).score == 0.0


def test_integer_label_predictions_are_valid_probabilities(tmp_path):
    path = write(tmp_path, csv_text(IDS, Y_BIN))
    assert grade_submission(path, BINARY, answers_df("binary")).score == 1.0


# --------------------------------------------------------------------------- answers


def test_load_answers_roundtrip(tmp_path):
    path = tmp_path / "answers.csv"
    answers_df("regression").assign(extra=1).to_csv(path, index=False)
    answers = load_answers(path, REGRESSION)
    assert list(answers.columns) == ["id", "target"]
    assert answers["id"].tolist() == IDS
    assert all(isinstance(v, str) for v in answers["id"])
    assert answers["target"].dtype == np.float64
    sub = write(tmp_path, csv_text(IDS, Y_REG))
    assert grade_submission(sub, REGRESSION, answers).score == 0.0


def test_load_answers_keeps_leading_zeros(tmp_path):
    path = tmp_path / "answers.csv"
    path.write_text("id,target\n007,1.0\n008,2.0\n")
    assert load_answers(path, REGRESSION)["id"].tolist() == ["007", "008"]


def test_broken_answers_are_harness_errors(tmp_path):
    sub = write(tmp_path, csv_text(IDS, Y_REG))
    with pytest.raises(HarnessError, match="not found"):
        load_answers(tmp_path / "missing.csv", REGRESSION)
    (tmp_path / "a.csv").write_text("id,label\n1,2\n")
    with pytest.raises(HarnessError, match="target"):
        load_answers(tmp_path / "a.csv", REGRESSION)
    dup = answers_df("regression", [IDS[0], *IDS[:-1]])
    with pytest.raises(HarnessError, match="duplicate ids"):
        grade_submission(sub, REGRESSION, dup)
    text_dup = answers_df("regression", ["a", *[f"t{i}" for i in range(N - 2)], "a"])
    with pytest.raises(HarnessError, match="duplicate ids"):
        grade_submission(sub, REGRESSION, text_dup)
    nan_target = answers_df("regression").assign(target=np.nan)
    with pytest.raises(HarnessError, match="missing or infinite"):
        grade_submission(sub, REGRESSION, nan_target)


def test_integer_typed_answers_ids_are_accepted(tmp_path):
    answers = pd.DataFrame({"id": [int(i) for i in IDS], "target": Y_REG})
    sub = write(tmp_path, csv_text(IDS, Y_REG))
    assert grade_submission(sub, REGRESSION, answers).score == 0.0


# --------------------------------------------------------------------------- extreme predictions


def with_metric(name: str) -> TaskSpec:
    direction = "maximize" if name == "r2" else "minimize"
    return REGRESSION.model_copy(
        update={
            "metric": REGRESSION.metric.model_copy(update={"name": name, "direction": direction})
        }
    )


@pytest.mark.parametrize(
    "value", ["1e308", "-1e308", "1.7976931348623157e308", "-0.0", "5e-324", "1e-400", "1e160"]
)
def test_any_finite_float_is_a_valid_regression_prediction(tmp_path, value):
    """As on Kaggle: validation accepts every finite float; scoring may still overflow."""
    preds: list[object] = list(Y_REG)
    preds[2] = value
    aligned = validate_submission(
        write(tmp_path, csv_text(IDS, preds)), REGRESSION, answers_df("r")
    )
    assert aligned.iloc[2] == float(value) and np.isfinite(aligned).all()
    assert np.signbit(aligned.iloc[2]) == value.startswith("-")


@pytest.mark.parametrize("value", ["-0.0", "5e-324", "1e-400", "0.99999999999999999"])
def test_edge_probabilities_are_valid_and_score(tmp_path, value):
    preds: list[object] = [float(v) for v in Y_BIN]
    preds[0] = value
    result = grade_submission(write(tmp_path, csv_text(IDS, preds)), BINARY, answers_df("binary"))
    assert np.isfinite(result.score)


def overflow_case(metric: str, values: dict[int, str] | str) -> tuple[TaskSpec, list[object]]:
    preds: list[object] = list(Y_REG)
    if isinstance(values, str):
        preds = [values] * N
    else:
        for row, value in values.items():
            preds[row] = value
    return with_metric(metric), preds


@pytest.mark.parametrize(
    ("metric", "values", "largest", "row"),
    [
        ("rmse", {6: "1e160"}, "1e+160", 6),
        ("rmse", {6: "1e308"}, "1e+308", 6),
        ("rmse", {9: "-1e308"}, "-1e+308", 9),
        # each square (1.44e308) is finite; their sum is not
        ("rmse", {3: "1.2e154", 4: "1.2e154"}, "1.2e+154", 3),
        ("mae", "1e308", "1e+308", 0),  # each error is finite; their sum is not
        ("mae", {1: "1.7e308", 2: "-1.7e308"}, "1.7e+308", 1),
        ("r2", {6: "1e160"}, "1e+160", 6),
        ("r2", {5: "-1e308"}, "-1e+308", 5),
    ],
)
def test_a_metric_overflowing_on_the_predictions_is_an_invalid_submission(
    tmp_path, metric, values, largest, row
):
    task, preds = overflow_case(metric, values)
    path = write(tmp_path, csv_text(IDS, preds))
    validate_submission(path, task, answers_df("r"))  # every value is a valid prediction
    with pytest.raises(InvalidSubmission) as info:
        grade_submission(path, task, answers_df("r"))
    err = info.value
    assert err.code == "non_finite_score" and err.code in REASON_CODES
    assert f"Metric {metric!r} gives " in err.message and "inf" in err.message
    assert f"predictions as large as {largest} (id '{IDS[row]}')" in err.message
    assert "overflow" in err.message and "scale of 'target'" in err.message
    assert str(max(Y_REG)) not in err.message  # nothing about the private answers


@pytest.mark.parametrize(
    ("metric", "values"),
    [
        ("rmse", {6: "1.2e154"}),  # one square is still finite
        ("mae", {6: "1e308"}),
        ("mae", "1e160"),
        ("rmse", "1e150"),
        ("r2", {6: "1e150"}),
    ],
)
def test_huge_predictions_whose_metric_stays_finite_get_their_score(tmp_path, metric, values):
    task, preds = overflow_case(metric, values)
    result = grade_submission(write(tmp_path, csv_text(IDS, preds)), task, answers_df("r"))
    assert np.isfinite(result.score) and np.isfinite(result.score_hib)
    assert abs(result.score) > 1e100


def test_overflow_caused_by_the_answers_scale_is_a_harness_error(tmp_path):
    """Predictions 1% off answers of 1e200 overflow RMSE: the answers' fault, not the agent's."""
    y = [1e200 * (1 if i % 2 else -1) for i in range(N)]
    answers = pd.DataFrame({"id": IDS, "target": y})
    path = write(tmp_path, csv_text(IDS, [repr(v * 0.99) for v in y]))
    with pytest.raises(HarnessError, match=r"within the answers' own range .*overflow"):
        grade_submission(path, REGRESSION, answers)


def test_a_metric_undefined_on_the_answers_is_a_harness_error(tmp_path):
    answers = pd.DataFrame({"id": IDS, "target": [1] * N})  # AUC needs both classes
    path = write(tmp_path, csv_text(IDS, [0.5] * N))
    with pytest.raises(HarnessError, match=r"'auc' is nan .*answers' own range.*one class"):
        grade_submission(path, BINARY, answers)


def fake_metric(fn, overflow: str = "squares the errors") -> Metric:
    return Metric("rmse", "minimize", False, frozenset({"regression"}), "fake", fn, overflow)


def test_a_metric_failing_only_on_the_predictions_is_an_invalid_submission(tmp_path, monkeypatch):
    def picky(y_true, y_pred):
        if np.abs(y_pred).max() > 1e6:
            raise ValueError("predictions too wild")
        return 1.0

    monkeypatch.setattr(scoring, "check_task_metric", lambda task: fake_metric(picky))
    path = write(tmp_path, csv_text(IDS, ["1e9"] * N))
    with pytest.raises(InvalidSubmission) as info:
        grade_submission(path, REGRESSION, answers_df("r"))
    assert info.value.code == "invalid"
    assert "ValueError: predictions too wild" in info.value.message
    good = write(tmp_path, csv_text(IDS, Y_REG), name="good.csv")
    assert grade_submission(good, REGRESSION, answers_df("r")).score == 1.0


def test_a_bounded_metric_that_gives_inf_is_a_harness_error(tmp_path, monkeypatch):
    def broken(y_true, y_pred):
        return float("inf") if y_pred[0] == 42.0 else 0.5

    monkeypatch.setattr(scoring, "check_task_metric", lambda task: fake_metric(broken, ""))
    path = write(tmp_path, csv_text(IDS, [42.0] * N))
    with pytest.raises(HarnessError, match="cannot overflow: a bug in the metric"):
        grade_submission(path, REGRESSION, answers_df("r"))
