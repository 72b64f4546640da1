"""Strict submission validation and grading (runner.grading)."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from runner import grading
from runner.errors import HarnessError
from runner.grading import (
    REASON_CODES,
    GradeResult,
    InvalidSubmission,
    grade_submission,
    load_answers,
    validate_submission,
)
from runner.specs import TaskSpec

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
    assert grading.default_max_bytes(N) == 64 * 1024 * 1024
    expect_invalid("too_large", path, task, answers, "67,108,864")
    assert grading.default_max_bytes(1_000_000) == 200_000_000


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
    expect_invalid("unreadable_csv", write(tmp, text), task, answers, "parsed as CSV", "3")


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

    monkeypatch.setattr(grading, "_integer_keys", boom)
    monkeypatch.setattr(grading.pc, "index_in", boom)
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
    assert result == GradeResult(score=1.0, score_hib=1.0, n_rows=N, metric="auc")


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
