"""Turn a labelled table (an offline twin or a Kaggle download) into a prepared task.

Twins and real data go through the same split and writer, so an agent cannot tell them
apart by their files. Preparing twice gives byte-identical files.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from sklearn.model_selection import train_test_split

from runner.errors import TmlbenchError
from runner.metrics import get_metric
from runner.registry import task_dir
from runner.specs import TaskSpec
from runner.twins import load_generator

MANIFEST_SCHEMA_VERSION = 1
# Fewer rows cannot be split 80/20 with both classes on both sides reliably.
MIN_TWIN_ROWS = 50
PUBLIC_FILES = ("train.csv", "test.csv", "sample_submission.csv", "description.md")


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
        return self.public / "manifest.json"

    @property
    def answers_path(self) -> Path:
        return self.private / "answers.csv"

    def exists(self) -> bool:
        return self.manifest_path.is_file() and self.answers_path.is_file()

    def manifest(self) -> dict:
        return json.loads(self.manifest_path.read_text(encoding="utf-8"))

    def manifest_sha256(self) -> str:
        return sha256_file(self.manifest_path)

    def private_meta(self) -> dict:
        path = self.private / "meta.json"
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


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
        files = prepared.manifest()["files"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise TmlbenchError(
            f"{prepared.manifest_path}: unreadable manifest ({exc}); "
            f"re-prepare the task: tmlbench tasks prepare {prepared.root.name}"
        ) from exc
    problems = []
    for name in PUBLIC_FILES:
        path = prepared.public / name
        entry = files.get(name) if isinstance(files, dict) else None
        if not isinstance(entry, dict) or "sha256" not in entry:
            problems.append(f"{path}: not listed in {prepared.manifest_path.name}")
            continue
        try:
            st = path.stat()
        except OSError as exc:
            problems.append(f"{path}: missing ({exc.strerror or exc})")
            continue
        key = (str(path), st.st_size, st.st_mtime_ns, entry["sha256"])
        if key in _VERIFIED:
            continue
        if entry.get("bytes") is not None and st.st_size != entry["bytes"]:
            problems.append(
                f"{path}: {st.st_size} bytes, the manifest says {entry['bytes']} (truncated or changed)"
            )
            continue
        actual = sha256_file(path)
        if actual != entry["sha256"]:
            problems.append(
                f"{path}: sha256 {actual} does not match the manifest's {entry['sha256']} (changed)"
            )
            continue
        _VERIFIED.add(key)
    if problems:
        raise TmlbenchError(
            f"task {prepared.root.name}: public files do not match {prepared.manifest_path}, "
            "refusing to run it:\n  "
            + "\n  ".join(problems)
            + f"\nre-prepare it: tmlbench tasks prepare {prepared.root.name}, or delete {prepared.root} "
            "and let the bench prepare it again"
        )


def prepare_twin(
    task: TaskSpec,
    tasks_dir: Path,
    data_dir: Path,
    rows: int | None = None,
    seed: int | None = None,
    scale: float | None = None,
) -> PreparedTask:
    """Generate the task's offline twin and prepare it.

    Size: ``rows``, else ``scale`` × the competition's size, else the competition's size.
    """
    if task.source.twin is None:
        raise TmlbenchError(
            f"task {task.id} has no offline twin; prepare it with --from <Kaggle download>"
        )
    twin_spec = task.source.twin
    generate = load_generator(task_dir(tasks_dir, task.id) / twin_spec.generator)
    if rows is None:
        rows = (
            max(MIN_TWIN_ROWS, round(twin_spec.default_rows * scale))
            if scale
            else twin_spec.default_rows
        )
    seed = twin_spec.seed if seed is None else seed
    twin = generate(rows, seed)
    _check_columns(task, twin.table, f"twin generator of {task.id}")
    source = {"kind": "twin", "rows": rows, "seed": seed}
    return _write_prepared(
        task, tasks_dir, twin.table, prepared_task(data_dir, task.id), source, twin.truth
    )


def prepare_from_download(
    task: TaskSpec, tasks_dir: Path, data_dir: Path, download: Path
) -> PreparedTask:
    """Prepare the real competition data from its Kaggle download (the zip or an unpacked folder)."""
    train_name = task.source.kaggle.train_file if task.source.kaggle else "train.csv"
    raw, origin = _read_download(download, train_name)
    try:
        table = pd.read_csv(io.BytesIO(raw), low_memory=False)
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        raise TmlbenchError(f"{origin}: not a readable CSV ({exc})") from exc
    _check_columns(task, table, origin)
    table = table[[task.id_column, *task.feature_columns, task.target_column]]
    source = {"kind": "kaggle", "file": train_name, "sha256": hashlib.sha256(raw).hexdigest()}
    return _write_prepared(
        task, tasks_dir, table, prepared_task(data_dir, task.id), source, truth=None
    )


def _read_download(download: Path, train_name: str) -> tuple[bytes, str]:
    """The bytes of the labelled training file inside a Kaggle zip or folder (read, never extracted)."""
    if download.is_dir():
        matches = sorted(download.rglob(train_name))
        if not matches:
            raise TmlbenchError(
                f"{download}: no {train_name} inside; pass the competition's download"
            )
        return matches[0].read_bytes(), str(matches[0])
    if zipfile.is_zipfile(download):
        with zipfile.ZipFile(download) as archive:
            names = [n for n in archive.namelist() if Path(n).name == train_name]
            if not names:
                raise TmlbenchError(
                    f"{download}: the zip holds no {train_name} (it has: {', '.join(archive.namelist()[:10])})"
                )
            return archive.read(sorted(names, key=len)[0]), f"{download}:{names[0]}"
    if download.is_file() and download.name.endswith(".csv"):
        return download.read_bytes(), str(download)
    raise TmlbenchError(f"{download}: not found, or not a zip, a folder or a CSV file")


def _check_columns(task: TaskSpec, table: pd.DataFrame, origin: str) -> None:
    expected = [task.id_column, *task.feature_columns, task.target_column]
    missing = [c for c in expected if c not in table.columns]
    unknown = [c for c in table.columns if c not in expected]
    if missing or unknown:
        raise TmlbenchError(
            f"{origin}: columns do not match task {task.id} "
            f"(missing: {missing or 'none'}; unknown: {unknown or 'none'}); "
            f"expected exactly {expected}"
        )
    if table[task.id_column].isna().any() or table[task.id_column].duplicated().any():
        raise TmlbenchError(f"{origin}: id column {task.id_column!r} has blank or duplicate values")
    if table[task.target_column].isna().any():
        raise TmlbenchError(f"{origin}: target column {task.target_column!r} has blank values")


def _write_prepared(
    task: TaskSpec,
    tasks_dir: Path,
    table: pd.DataFrame,
    prepared: PreparedTask,
    source: dict,
    truth: pd.Series | None,
) -> PreparedTask:
    """Split, write public and private files into a fresh folder, then swap it in atomically."""
    table = table.reset_index(drop=True)
    stratify = table[task.target_column] if task.split.strategy == "stratified" else None
    train, test = train_test_split(
        table, test_size=task.split.test_fraction, random_state=task.split.seed, stratify=stratify
    )
    id_col, target = task.id_column, task.target_column
    prepared.root.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{task.id}.", dir=prepared.root.parent))
    try:
        public, private = staging / "public", staging / "private"
        public.mkdir()
        private.mkdir()
        _write_csv(train, public / "train.csv")
        _write_csv(test.drop(columns=[target]), public / "test.csv")
        placeholder = 0.5 if task.task_type == "binary" else round(float(train[target].mean()), 6)
        sample = pd.DataFrame({id_col: test[id_col].to_numpy(), target: placeholder})
        _write_csv(sample, public / "sample_submission.csv")
        shutil.copyfile(task_dir(tasks_dir, task.id) / "description.md", public / "description.md")
        _write_csv(test[[id_col, target]], private / "answers.csv")
        meta = {"source": source, "constant_score": _constant_score(task, train, test)}
        if truth is not None:
            _write_csv(
                pd.DataFrame({id_col: test[id_col], "truth": truth.loc[test.index]}),
                private / "truth.csv",
            )
            meta["bayes_optimal_score"] = get_metric(task.metric.name).score(
                test[target].to_numpy(), truth.loc[test.index].to_numpy()
            )
        _write_json(private / "meta.json", meta)
        _write_json(public / "manifest.json", _manifest(task, public))
        if prepared.root.exists():
            shutil.rmtree(prepared.root)
        staging.rename(prepared.root)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return prepared


def _constant_score(task: TaskSpec, train: pd.DataFrame, test: pd.DataFrame) -> float:
    """The floor: predict the training prior or mean for every test row (AUC 0.5 by construction)."""
    y_true = test[task.target_column].to_numpy()
    constant = float(train[task.target_column].mean())
    return get_metric(task.metric.name).score(y_true, [constant] * len(y_true))


def _manifest(task: TaskSpec, public: Path) -> dict:
    files = {}
    for name in PUBLIC_FILES:
        path = public / name
        entry = {"sha256": sha256_file(path), "bytes": path.stat().st_size}
        if name.endswith(".csv"):
            header = pd.read_csv(path, nrows=0)
            with path.open("rb") as fh:
                entry["rows"] = sum(1 for _ in fh) - 1
            entry["columns"] = len(header.columns)
        files[name] = entry
    return {
        "schema_version": MANIFEST_SCHEMA_VERSION,
        "task": {
            "id": task.id,
            "title": task.title,
            "task_type": task.task_type,
            "id_column": task.id_column,
            "target_column": task.target_column,
            "metric": task.metric.model_dump(),
            "submission": {"file": task.submission.file, "columns": list(task.submission.columns)},
        },
        "files": files,
    }


def _write_csv(frame: pd.DataFrame, path: Path) -> None:
    frame.to_csv(path, index=False, lineterminator="\n")


def _write_json(path: Path, payload: dict) -> None:
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n", encoding="utf-8")
