"""A prepared task on disk: where its public and private files are, and a check of its public files.

Light on purpose (no pandas, no scikit-learn): the attempt runner, the bench and the CLI read
prepared tasks; only ``runner.tasks.preparation`` makes them.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

from runner.errors import TmlbenchError
from runner.tasks.manifest import MANIFEST_FILE, PUBLIC_FILES, Manifest
from runner.tasks.private_meta import META_FILE, TaskMeta


@dataclass(frozen=True)
class PreparedTask:
    """Locations of one prepared task; ``public`` is what agents see, ``private`` never leaves the harness."""

    root: Path

    @property
    def public(self) -> Path:
        return self.root / "public"

    @property
    def private(self) -> Path:
        return self.root / "private"

    @property
    def manifest_path(self) -> Path:
        return self.public / MANIFEST_FILE

    @property
    def answers_path(self) -> Path:
        return self.private / "answers.csv"

    def exists(self) -> bool:
        return self.manifest_path.is_file() and self.answers_path.is_file()

    def manifest(self) -> Manifest:
        return Manifest.read(self.manifest_path)

    def manifest_sha256(self) -> str:
        return sha256_file(self.manifest_path)

    @property
    def meta_path(self) -> Path:
        return self.private / META_FILE

    def meta(self) -> TaskMeta:
        """Its private metadata (:class:`TaskMeta`: empty for a folder prepared by hand);
        ``TmlbenchError`` naming the file and the field if it is broken."""
        return TaskMeta.read(self.meta_path)

    def trivial_score(self) -> float | None:
        """The trivial prediction's score on this task's holdout (``runner.tasks.metrics.trivial_score``).

        Preparation stores it as meta.json's ``constant_score``; a task prepared without one
        (a hand-made folder) gets it computed here from its own files, never written back, so
        prepared files only ever change by preparing. None if it is not finite (no anchor).
        """
        value = self.meta().constant_score
        if value is None:
            value = self._trivial_score_from_files()
        return value if math.isfinite(value) else None

    def _trivial_score_from_files(self) -> float:
        # Imported here: pandas is heavy, and only folders prepared without the score need it.
        import pandas as pd

        from runner.tasks.metrics import get_metric, trivial_score

        task = self.manifest().task
        target = task.target_column
        try:
            train = pd.read_csv(self.public / "train.csv", usecols=[target])[target]
            holdout = pd.read_csv(self.answers_path, usecols=[target])[target]
        except (OSError, ValueError) as exc:
            raise TmlbenchError(
                f"task {self.root.name}: cannot read {target!r} from its train.csv and answers "
                f"to score the trivial prediction ({exc}); re-prepare it: "
                f"tmlbench tasks prepare {self.root.name}"
            ) from exc
        return trivial_score(get_metric(task.metric.name), train, holdout)


def prepared_task(data_dir: Path, task_id: str) -> PreparedTask:
    return PreparedTask(data_dir / "tasks" / task_id)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# (path, size, mtime_ns, expected sha256) of public files already found intact in this process.
_VERIFIED: set[tuple[str, int, int, str]] = set()


def verify_public(prepared: PreparedTask) -> None:
    """Check every public file against the manifest's size and sha256; refuse a tampered task.

    Raises a ``TmlbenchError`` naming each missing, truncated or changed file. A file is hashed
    once per process while its size and modification time stay the same, so checking before
    every attempt is cheap.
    """
    try:
        problems = public_problems(prepared)
    except TmlbenchError as exc:
        raise TmlbenchError(
            f"{exc}; re-prepare the task: tmlbench tasks prepare {prepared.root.name}"
        ) from exc
    if problems:
        raise TmlbenchError(
            f"task {prepared.root.name}: public files do not match {prepared.manifest_path}, "
            "refusing to run it:\n  "
            + "\n  ".join(problems)
            + f"\nre-prepare it: tmlbench tasks prepare {prepared.root.name}, or delete {prepared.root} "
            "and let the bench prepare it again"
        )


def public_problems(prepared: PreparedTask) -> list[str]:
    """Each public file that is missing, truncated or changed against the manifest, one line
    each (a ``TmlbenchError`` if the manifest itself is unreadable)."""
    files = prepared.manifest().files
    problems = []
    for name in PUBLIC_FILES:
        path = prepared.public / name
        entry = files.get(name)
        if entry is None:
            problems.append(f"{path}: not listed in {prepared.manifest_path.name}")
            continue
        try:
            st = path.stat()
        except OSError as exc:
            problems.append(f"{path}: missing ({exc.strerror or exc})")
            continue
        key = (str(path), st.st_size, st.st_mtime_ns, entry.sha256)
        if key in _VERIFIED:
            continue
        if st.st_size != entry.bytes:
            problems.append(
                f"{path}: {st.st_size} bytes, the manifest says {entry.bytes} (truncated or changed)"
            )
            continue
        actual = sha256_file(path)
        if actual != entry.sha256:
            problems.append(
                f"{path}: sha256 {actual} does not match the manifest's {entry.sha256} (changed)"
            )
            continue
        _VERIFIED.add(key)
    return problems
