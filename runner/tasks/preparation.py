"""Turn a labelled table (an offline twin or a Kaggle download) into a prepared task.

Twins and real data go through the same split and writer, so an agent cannot tell them
apart by their files. Preparing twice gives byte-identical files.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import tempfile
import zipfile
from pathlib import Path

import pandas as pd

from runner.errors import TmlbenchError
from runner.specs import TaskSpec
from runner.specs.registry import task_dir
from runner.tasks.manifest import MANIFEST_FILE, PUBLIC_FILES, Manifest, ManifestFile, ManifestTask
from runner.tasks.metrics import get_metric, trivial_score
from runner.tasks.prepared_files import PreparedTask, prepared_task, sha256_file
from runner.tasks.private_meta import META_FILE, KaggleSource, TaskMeta, TwinSource
from runner.tasks.twins import load_generator

# Fewer rows cannot be split 80/20 with both classes on both sides reliably.
MIN_TWIN_ROWS = 50


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
    source = TwinSource(rows=rows, seed=seed)
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
    source = KaggleSource(file=train_name, sha256=hashlib.sha256(raw).hexdigest())
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
    source: TwinSource | KaggleSource,
    truth: pd.Series | None,
) -> PreparedTask:
    """Split, write public and private files into a fresh folder, then swap it in atomically."""
    # Imported here: scikit-learn takes over a second to import, and every process that runs the
    # suite (`make run`, the Dagster code server) imports this module, most never to split.
    from sklearn.model_selection import train_test_split

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
        bayes_optimal_score = None
        if truth is not None:
            _write_csv(
                pd.DataFrame({id_col: test[id_col], "truth": truth.loc[test.index]}),
                private / "truth.csv",
            )
            bayes_optimal_score = float(
                get_metric(task.metric.name).score(
                    test[target].to_numpy(), truth.loc[test.index].to_numpy()
                )
            )
        meta = TaskMeta(
            source=source,
            constant_score=float(_constant_score(task, train, test)),
            bayes_optimal_score=bayes_optimal_score,
        )
        meta.write(private / META_FILE)
        _manifest(task, public).write(public / MANIFEST_FILE)
        if prepared.root.exists():
            shutil.rmtree(prepared.root)
        staging.rename(prepared.root)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return prepared


def _constant_score(task: TaskSpec, train: pd.DataFrame, test: pd.DataFrame) -> float:
    """The floor, stored as meta.json's ``constant_score``: the trivial prediction's score
    (``runner.tasks.metrics.trivial_score``) on the holdout's answers. ``PreparedTask.trivial_score``
    hands it to every attempt's record, where it anchors the primary points."""
    metric = get_metric(task.metric.name)
    return trivial_score(metric, train[task.target_column], test[task.target_column])


def _manifest(task: TaskSpec, public: Path) -> Manifest:
    files = {}
    for name in PUBLIC_FILES:
        path = public / name
        rows = columns = None
        if name.endswith(".csv"):
            columns = len(pd.read_csv(path, nrows=0).columns)
            with path.open("rb") as fh:
                rows = sum(1 for _ in fh) - 1
        files[name] = ManifestFile(
            sha256=sha256_file(path), bytes=path.stat().st_size, rows=rows, columns=columns
        )
    return Manifest(task=ManifestTask.of(task), files=files)


def _write_csv(frame: pd.DataFrame, path: Path) -> None:
    frame.to_csv(path, index=False, lineterminator="\n")
