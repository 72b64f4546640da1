"""A task spec (``tasks/<id>/task.yaml``): the data's columns, the metric, the submission, the split."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import Field, field_validator, model_validator

from runner.specs.base import Frozen
from runner.tasks.vocabulary import Direction, TaskType


class MetricSpec(Frozen):
    name: str = Field(description="metric name in runner.tasks.metrics, e.g. 'auc' or 'rmse'")
    direction: Direction


class SubmissionSpec(Frozen):
    # One name in the workspace's top folder: the grader refuses a symlinked file, but a
    # folder in a longer path would be the agent's and could be a symlink out of it.
    file: str = "submission.csv"
    columns: tuple[str, ...]

    @field_validator("file")
    @classmethod
    def _one_name(cls, value: str) -> str:
        if not value or "/" in value or "\x00" in value or value in (".", ".."):
            raise ValueError(
                f"must be one file name in the workspace's top folder (e.g. submission.csv), "
                f"not {value!r}"
            )
        return value


class SplitSpec(Frozen):
    strategy: Literal["stratified", "random"]
    test_fraction: float = Field(gt=0, lt=1)
    seed: int


class TwinSource(Frozen):
    generator: str = Field(description="file in the task folder defining generate(n_rows, seed)")
    default_rows: int = Field(
        gt=0, description="rows of the full-size twin (the real competition's size)"
    )
    seed: int = 20240101


class KaggleSource(Frozen):
    competition: str
    train_file: str = "train.csv"
    url: str | None = None


class SourceSpec(Frozen):
    twin: TwinSource | None = None
    kaggle: KaggleSource | None = None


class TaskSpec(Frozen):
    id: str
    title: str
    task_type: TaskType
    id_column: str
    target_column: str
    feature_columns: tuple[str, ...]
    metric: MetricSpec
    submission: SubmissionSpec
    split: SplitSpec
    source: SourceSpec
    start_date: dt.date = Field(description="competition start, for contamination checks")

    @model_validator(mode="after")
    def _consistent(self) -> TaskSpec:
        if set(self.submission.columns) != {self.id_column, self.target_column}:
            raise ValueError(
                f"submission.columns {list(self.submission.columns)} must be exactly "
                f"[{self.id_column!r}, {self.target_column!r}] (id column and target column)"
            )
        if self.task_type == "binary" and self.split.strategy != "stratified":
            raise ValueError("binary tasks must use split.strategy 'stratified'")
        clash = {self.id_column, self.target_column} & set(self.feature_columns)
        if clash:
            raise ValueError(
                f"feature_columns must not contain the id or target column: {sorted(clash)}"
            )
        return self
