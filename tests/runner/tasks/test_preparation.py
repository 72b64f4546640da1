"""Preparation: twins and Kaggle downloads become identical-looking public files and private answers."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from runner.config import REPO_ROOT
from runner.errors import TmlbenchError
from runner.grading import grade_submission, load_answers
from runner.specs import TaskSpec
from runner.specs.registry import list_tasks, load_task
from runner.tasks.preparation import PreparedTask, prepare_from_download, prepare_twin
from runner.tasks.private_meta import KaggleSource
from tests.support.real_data import BANK, SHARED_DATA, kaggle_download_from_churn_modelling


def tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("task_id", list_tasks(REPO_ROOT / "tasks").ids)
def test_preparing_twice_gives_byte_identical_files(paths, task_id):
    task = load_task(paths.tasks_dir, task_id)
    first = tree_digest(prepare_twin(task, paths.tasks_dir, paths.data_dir, rows=400).root)
    second = tree_digest(prepare_twin(task, paths.tasks_dir, paths.data_dir, rows=400).root)
    assert first == second
    assert set(first) >= {
        "public/train.csv",
        "public/test.csv",
        "public/sample_submission.csv",
        "public/description.md",
        "public/manifest.json",
        "private/answers.csv",
        "private/meta.json",
        "private/truth.csv",
    }


def test_public_files_follow_the_contract(paths):
    task = load_task(paths.tasks_dir, BANK)
    prepared = prepare_twin(task, paths.tasks_dir, paths.data_dir, rows=1000)
    train = pd.read_csv(prepared.public / "train.csv")
    test = pd.read_csv(prepared.public / "test.csv")
    sample = pd.read_csv(prepared.public / "sample_submission.csv")
    answers = pd.read_csv(prepared.answers_path)
    assert len(train) == 800 and len(test) == 200
    assert list(train.columns) == [task.id_column, *task.feature_columns, task.target_column]
    assert task.target_column not in test.columns
    assert list(sample.columns) == list(task.submission.columns)
    assert (
        sample[task.id_column].tolist()
        == test[task.id_column].tolist()
        == answers[task.id_column].tolist()
    )
    assert not set(train[task.id_column]) & set(test[task.id_column])
    # stratified: the churn rate is the same on both sides of the split
    assert abs(train["Exited"].mean() - answers["Exited"].mean()) < 0.01
    manifest = prepared.manifest()
    assert manifest.task.target_column == "Exited"
    for name, entry in manifest.files.items():
        assert entry.sha256 == hashlib.sha256((prepared.public / name).read_bytes()).hexdigest()
    assert manifest.rows("train.csv") == 800
    meta = json.loads((prepared.private / "meta.json").read_text())
    assert meta["bayes_optimal_score"] > meta["constant_score"] + 0.1


def test_prepare_from_a_kaggle_zip_of_real_data(paths, tmp_path):
    task = load_task(paths.tasks_dir, BANK)
    archive = kaggle_download_from_churn_modelling(tmp_path)
    prepared = prepare_from_download(task, paths.tasks_dir, paths.data_dir, archive)
    train = pd.read_csv(prepared.public / "train.csv")
    assert len(train) == 6400 and len(pd.read_csv(prepared.answers_path)) == 1600
    source = prepared.meta().source
    assert isinstance(source, KaggleSource) and source.file == "train.csv"
    assert len(source.sha256) == 64  # of the training file as downloaded
    assert prepared.meta().bayes_optimal_score is None
    assert "bayes_optimal_score" not in json.loads(prepared.meta_path.read_text())
    assert prepared.trivial_score() == graded_constant_submission(task, prepared, tmp_path) == 0.5
    first = tree_digest(prepared.root)
    assert (
        tree_digest(prepare_from_download(task, paths.tasks_dir, paths.data_dir, archive).root)
        == first
    )


def test_prepare_from_an_unpacked_folder(paths, tmp_path):
    task = load_task(paths.tasks_dir, BANK)
    archive = kaggle_download_from_churn_modelling(tmp_path)
    folder = tmp_path / "unpacked"
    zipfile.ZipFile(archive).extractall(folder)
    prepared = prepare_from_download(task, paths.tasks_dir, paths.data_dir, folder)
    assert prepared.exists()


def test_download_with_wrong_columns_names_them(paths, tmp_path):
    task = load_task(paths.tasks_dir, BANK)
    real = pd.read_csv(SHARED_DATA / "churn_modelling.csv").head(100)  # still has RowNumber, no id
    archive = tmp_path / "bad.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("train.csv", real.to_csv(index=False))
    with pytest.raises(TmlbenchError, match=r"missing: \['id'\].*unknown: \['RowNumber'\]"):
        prepare_from_download(task, paths.tasks_dir, paths.data_dir, archive)


def test_download_without_train_file_says_what_it_has(paths, tmp_path):
    task = load_task(paths.tasks_dir, BANK)
    archive = tmp_path / "empty.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("readme.txt", "nothing here")
    with pytest.raises(TmlbenchError, match=r"no train\.csv.*readme\.txt"):
        prepare_from_download(task, paths.tasks_dir, paths.data_dir, archive)


def test_a_broken_manifest_is_refused_naming_the_file_and_the_field(paths):
    task = load_task(paths.tasks_dir, BANK)
    prepared = prepare_twin(task, paths.tasks_dir, paths.data_dir, rows=300)
    manifest = json.loads(prepared.manifest_path.read_text())
    manifest["files"]["test.csv"]["rows"] = "two hundred"
    prepared.manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(TmlbenchError) as caught:
        prepared.manifest()
    message = str(caught.value)
    assert str(prepared.manifest_path) in message and "files.test.csv.rows" in message


def graded_constant_submission(task: TaskSpec, prepared: PreparedTask, tmp_path: Path) -> float:
    """What the grader gives a submission of the training mean (the prior) for every test row."""
    train = pd.read_csv(prepared.public / "train.csv")
    sample = pd.read_csv(prepared.public / "sample_submission.csv")
    sample[task.target_column] = float(train[task.target_column].to_numpy().mean())
    path = tmp_path / f"{task.id}-constant.csv"
    sample.to_csv(path, index=False)
    return grade_submission(path, task, load_answers(prepared.answers_path, task)).score


@pytest.mark.parametrize("task_id", list_tasks(REPO_ROOT / "tasks").ids)
def test_the_trivial_score_is_the_graded_score_of_the_training_mean(paths, tmp_path, task_id):
    """The floor the primary points are anchored at: preparation stores it in private/meta.json
    (never public/), and it is exactly what the grader gives the trivial submission."""
    task = load_task(paths.tasks_dir, task_id)
    prepared = prepare_twin(task, paths.tasks_dir, paths.data_dir, rows=400)
    trivial = prepared.trivial_score()
    assert trivial is not None and trivial == prepared.meta().constant_score
    assert trivial == graded_constant_submission(task, prepared, tmp_path)
    public = "".join(p.read_text(errors="replace") for p in prepared.public.iterdir())
    assert "constant_score" not in public
    if task.metric.name == "auc":
        assert trivial == 0.5  # a constant ranks every pair as a tie
    else:
        assert repr(trivial) not in public  # derived from the answers: private


def test_a_task_prepared_without_the_trivial_score_gets_it_from_its_files(paths):
    task = load_task(paths.tasks_dir, "playground-series-s6e1")
    prepared = prepare_twin(task, paths.tasks_dir, paths.data_dir, rows=300)
    stored = prepared.trivial_score()
    meta_path = prepared.private / "meta.json"
    meta = json.loads(meta_path.read_text())
    del meta["constant_score"]
    meta_path.write_text(json.dumps(meta))
    assert prepared.trivial_score() == stored
    assert "constant_score" not in json.loads(meta_path.read_text())  # never written back
    meta_path.unlink()
    assert prepared.trivial_score() == stored


@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        ('{"constant_score": "0.5"}', r"constant_score is '0\.5': Input should be a valid number"),
        ('{"constant_score": true}', r"constant_score is True: Input should be a valid number"),
        (
            '{"source": {"kind": "twin", "rows": 2.5}}',
            r"source\.twin\.rows is 2\.5: .*valid integer",
        ),
        ('{"source": {"kind": "twin"}, "constant": 1}', r"source\.twin\.rows: Field required"),
        ("{not json", r"meta\.json: not readable"),
        ("[1, 2]", r"meta\.json: not readable"),
    ],
)
def test_broken_task_metadata_is_refused_naming_the_file(paths, meta, expected):
    task = load_task(paths.tasks_dir, BANK)
    prepared = prepare_twin(task, paths.tasks_dir, paths.data_dir, rows=300)
    (prepared.private / "meta.json").write_text(meta)
    with pytest.raises(TmlbenchError, match=expected):
        prepared.trivial_score()


def test_a_non_finite_trivial_score_is_no_anchor(paths):
    task = load_task(paths.tasks_dir, BANK)
    prepared = prepare_twin(task, paths.tasks_dir, paths.data_dir, rows=300)
    (prepared.private / "meta.json").write_text('{"constant_score": NaN}')
    assert prepared.trivial_score() is None
