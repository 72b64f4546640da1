"""A prepared task's public manifest (``public/manifest.json``), as a validated model.

Written once when the task is prepared (``runner.tasks.preparation``); read to check the public files
before every attempt, to size the grader's cap and the instructions by the row counts, and to
describe a prepared task. Every reader goes through :meth:`Manifest.read`, so a broken file
is one clear error naming the file and the field.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from runner.errors import TmlbenchError, describe_validation_error
from runner.specs import Frozen, MetricSpec, SubmissionSpec, TaskSpec

MANIFEST_SCHEMA_VERSION = 1
MANIFEST_FILE = "manifest.json"
# What an agent is given of a prepared task (besides the manifest itself), in this order.
PUBLIC_FILES = ("train.csv", "test.csv", "sample_submission.csv", "description.md")


class ManifestFile(Frozen):
    """One public file: its fingerprint, and for a CSV its shape."""

    sha256: str
    bytes: int
    rows: int | None = None  # data rows (header excluded); CSV files only
    columns: int | None = None  # CSV files only


class ManifestTask(Frozen):
    """The task's contract as the agent reads it beside the data."""

    id: str
    title: str
    task_type: str
    id_column: str
    target_column: str
    metric: MetricSpec
    submission: SubmissionSpec

    @classmethod
    def of(cls, task: TaskSpec) -> ManifestTask:
        return cls(
            id=task.id,
            title=task.title,
            task_type=task.task_type,
            id_column=task.id_column,
            target_column=task.target_column,
            metric=task.metric,
            submission=task.submission,
        )


class Manifest(Frozen):
    schema_version: int = MANIFEST_SCHEMA_VERSION
    task: ManifestTask
    files: dict[str, ManifestFile]

    @classmethod
    def read(cls, path: Path) -> Manifest:
        """The manifest at ``path``; ``TmlbenchError`` naming the file and the field if it is broken."""
        try:
            return cls.model_validate_json(path.read_bytes())
        except OSError as exc:
            raise TmlbenchError(
                f"{path}: cannot read the manifest ({exc.strerror or exc})"
            ) from exc
        except ValidationError as exc:
            raise TmlbenchError(
                f"{path}: not a valid manifest: {describe_validation_error(exc)}"
            ) from exc

    def write(self, path: Path) -> None:
        """As JSON with sorted keys: preparing twice gives byte-identical files."""
        payload = self.model_dump(mode="json", exclude_none=True)
        path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n", encoding="utf-8")

    def rows(self, name: str) -> int:
        """Data rows of the public CSV ``name`` (a manifest without them is a broken manifest)."""
        entry = self.files.get(name)
        if entry is None or entry.rows is None:
            raise TmlbenchError(
                f"the manifest of task {self.task.id} gives no row count for {name}"
            )
        return entry.rows
