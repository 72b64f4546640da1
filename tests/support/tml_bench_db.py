"""The original TML-bench harness's results database (SQLite), written as its ``orchestrator/db.py``
writes it, in any of its schema generations: the one writer of it in the tests.

The original's ``ensure_db`` creates ``runs`` (and, later, ``baselines``) and migrates an
older ``runs`` by appending the columns it lacks; ``insert_run``/``insert_baseline`` then
write a row (``INSERT OR REPLACE``, one value per column, each taken from the ``RunResult`` the
same way in every generation that has its column). Its ``runs`` table changed at every commit
that touched ``db.py``, so a generation is named by that commit (MykolaPinchuk/TML-bench):

=========  ==========================================  =======  ====================================
generation commit                                      columns  what it added
=========  ==========================================  =======  ====================================
9e850f7    9e850f73ca75f836f2eadf32a34f64d4ed0f6e74       13    the first: no budget, model, hashes
fa7c515    fa7c5156e9275c20af2e555aa312dd516291f999       15    runtime_seconds, budget_time_seconds
b923c5e    b923c5e5fb61a5b0b5f1a30fa8b90bf2de304700       20    provider, model_id, mode,
                                                                temperature, max_tokens
3c34679    3c34679a01abaaf44160aa3f5b25d256162adb98       22    the two submission hashes
0635344    0635344093cad807203ce5bd794382c44b28f86b       27    provenance (spec, prompt, public
                                                                manifest, kilo version and config)
bf057a0    bf057a0ae6dc4cf1ca8f33373cd5d0b004a41530       30    secondary_r2, seed, prompt_profile
05f9f37    05f9f373bbd9bd870514653f68deb64fcd9edf94       30    the ``baselines`` table
0a024d6    0a024d698463d28ed6731d875d956c7434c4ac17       31    prompt_strategy (unchanged since:
                                                                the current generation)
=========  ==========================================  =======  ====================================

Each generation's ``CREATE TABLE`` lists its columns in the order of the current one, with the
same types and text layout, so ``RUN_COLUMNS`` (each column with the generation that added it)
renders every generation's DDL exactly as that commit's ``ensure_db`` has it, and
``MIGRATION_ORDER`` is the order its ``ALTER TABLE`` statements append them in (every
generation's list is this one without the columns it did not have yet). ``baselines`` has one
DDL: it never changed. Not written: the original's migrations of a ``baselines`` table older than its DDL (no
generation has one).

It replaced vendored copies of ``db.py`` at three of these commits (issue 29). Checked then
against every commit's own ``db.py``, run on the same runs (the importer tests' and the
paper database's): the DDL and ``ALTER TABLE`` texts are the commit's, character for
character, and the databases dump (``iterdump``) identically, fresh, migrated from the first
generation, and with baselines.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Any

from tests.support.tml_bench_original.result import RunResult

GENERATIONS = (
    "9e850f7",
    "fa7c515",
    "b923c5e",
    "3c34679",
    "0635344",
    "bf057a0",
    "05f9f37",
    "0a024d6",
)
FIRST, CURRENT = GENERATIONS[0], GENERATIONS[-1]
BASELINES_SINCE = "05f9f37"


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # as declared, constraints included
    since: str  # the generation that added it


# ``runs`` as the current generation declares it, in its order.
RUN_COLUMNS = (
    Column("run_id", "TEXT PRIMARY KEY", "9e850f7"),
    Column("created_at", "TEXT NOT NULL", "9e850f7"),
    Column("competition_id", "TEXT NOT NULL", "9e850f7"),
    Column("status", "TEXT NOT NULL", "9e850f7"),
    Column("metric_name", "TEXT", "9e850f7"),
    Column("score_raw", "REAL", "9e850f7"),
    Column("score_normalized", "REAL", "9e850f7"),
    Column("secondary_r2", "REAL", "bf057a0"),
    Column("local_validation_metric", "REAL", "9e850f7"),
    Column("runtime_seconds", "REAL", "fa7c515"),
    Column("budget_time_seconds", "INTEGER", "fa7c515"),
    Column("seed", "INTEGER", "bf057a0"),
    Column("prompt_profile", "TEXT", "bf057a0"),
    Column("prompt_strategy", "TEXT", "0a024d6"),
    Column("provider", "TEXT", "b923c5e"),
    Column("model_id", "TEXT", "b923c5e"),
    Column("mode", "TEXT", "b923c5e"),
    Column("temperature", "REAL", "b923c5e"),
    Column("max_tokens", "INTEGER", "b923c5e"),
    Column("submission_path", "TEXT", "9e850f7"),
    Column("normalized_submission_path", "TEXT", "9e850f7"),
    Column("submission_sha256", "TEXT", "3c34679"),
    Column("normalized_submission_sha256", "TEXT", "3c34679"),
    Column("spec_sha256", "TEXT", "0635344"),
    Column("prompt_sha256", "TEXT", "0635344"),
    Column("public_manifest_sha256", "TEXT", "0635344"),
    Column("kilo_version", "TEXT", "0635344"),
    Column("kilo_config_sha256", "TEXT", "0635344"),
    Column("benchmark_version", "TEXT", "9e850f7"),
    Column("git_sha", "TEXT", "9e850f7"),
    Column("git_dirty", "INTEGER", "9e850f7"),
)
# The order the current ensure_db's ALTER TABLEs append missing columns in (secondary_r2 comes
# after budget_time_seconds here, unlike in the DDL).
MIGRATION_ORDER = (
    "runtime_seconds",
    "budget_time_seconds",
    "secondary_r2",
    "seed",
    "prompt_profile",
    "prompt_strategy",
    "provider",
    "model_id",
    "mode",
    "temperature",
    "max_tokens",
    "submission_sha256",
    "normalized_submission_sha256",
    "spec_sha256",
    "prompt_sha256",
    "public_manifest_sha256",
    "kilo_version",
    "kilo_config_sha256",
)
BASELINES_DDL = """
            CREATE TABLE IF NOT EXISTS baselines (
              competition_id TEXT NOT NULL,
              baseline_type TEXT NOT NULL,
              created_at TEXT NOT NULL,
              metric_name TEXT NOT NULL,
              score_raw REAL,
              score_normalized REAL,
              local_validation_metric REAL,
              submission_sha256 TEXT,
              normalized_submission_sha256 TEXT,
              spec_sha256 TEXT,
              public_manifest_sha256 TEXT,
              PRIMARY KEY (competition_id, baseline_type)
            )
            """


@dataclass(frozen=True)
class Baseline:
    """A row of ``baselines``, its fields in the table's order."""

    competition_id: str
    baseline_type: str
    created_at: str
    metric_name: str
    score_raw: float | None
    score_normalized: float | None
    local_validation_metric: float | None
    submission_sha256: str | None
    normalized_submission_sha256: str | None
    spec_sha256: str | None
    public_manifest_sha256: str | None


def _index(generation: str) -> int:
    if generation not in GENERATIONS:
        raise ValueError(f"no schema generation {generation!r}: one of {', '.join(GENERATIONS)}")
    return GENERATIONS.index(generation)


def run_columns(generation: str) -> list[Column]:
    """The columns of ``runs`` in ``generation``, in its CREATE TABLE's order."""
    upto = _index(generation)
    return [c for c in RUN_COLUMNS if GENERATIONS.index(c.since) <= upto]


def has_baselines(generation: str) -> bool:
    return _index(generation) >= GENERATIONS.index(BASELINES_SINCE)


def runs_ddl(generation: str) -> str:
    """``ensure_db``'s CREATE TABLE of ``runs`` at ``generation``, character for character (SQLite
    keeps the text in ``sqlite_master``)."""
    body = ",\n".join(f"              {c.name} {c.type}" for c in run_columns(generation))
    return f"\n            CREATE TABLE IF NOT EXISTS runs (\n{body}\n            )\n            "


def ensure(con: sqlite3.Connection, generation: str) -> None:
    """``ensure_db`` of ``generation``: create its tables, append the columns an older ``runs``
    lacks."""
    con.execute(runs_ddl(generation))
    if has_baselines(generation):
        con.execute(BASELINES_DDL)
    types = {c.name: c.type for c in run_columns(generation)}
    present = {row[1] for row in con.execute("PRAGMA table_info(runs)")}
    for name in MIGRATION_ORDER:
        if name in types and name not in present:
            con.execute(f"ALTER TABLE runs ADD COLUMN {name} {types[name]}")


def run_row(run: RunResult) -> dict[str, Any]:
    """Every column's value as the current ``insert_run`` takes it from ``run`` (an older
    generation takes each of its columns the same way)."""
    notes = run.artifacts.notes if run.artifacts else None
    notes = notes if isinstance(notes, dict) else {}
    model, versions, artifacts = run.model, run.versions, run.artifacts
    # provenance: the run's own, else what older result.json files kept in the notes
    provenance = {
        name: (getattr(run.provenance, name) if run.provenance else None) or notes.get(name)
        for name in (
            "spec_sha256",
            "prompt_sha256",
            "public_manifest_sha256",
            "kilo_version",
            "kilo_config_sha256",
        )
    }
    secondary_r2 = notes.get("secondary_r2")
    dirty = versions.git_dirty if versions else None
    return {
        "run_id": run.run_id,
        "created_at": run.created_at,
        "competition_id": run.competition_id,
        "status": run.status,
        "metric_name": run.metric_name,
        "score_raw": run.score_raw,
        "score_normalized": run.score_normalized,
        "secondary_r2": float(secondary_r2) if secondary_r2 is not None else None,
        "local_validation_metric": run.local_validation_metric,
        "runtime_seconds": run.runtime_seconds,
        "budget_time_seconds": run.budget.time_seconds if run.budget else None,
        "seed": run.seed,
        **{
            name: str(notes[name]) if notes.get(name) is not None else None
            for name in ("prompt_profile", "prompt_strategy")
        },
        "provider": model.provider if model else None,
        "model_id": model.model_id if model else None,
        "mode": model.mode if model else None,
        "temperature": model.temperature if model else None,
        "max_tokens": model.max_tokens if model else None,
        "submission_path": artifacts.submission_path if artifacts else None,
        "normalized_submission_path": artifacts.normalized_submission_path if artifacts else None,
        "submission_sha256": notes.get("submission_sha256"),
        "normalized_submission_sha256": notes.get("normalized_submission_sha256"),
        **provenance,
        "benchmark_version": versions.benchmark if versions else None,
        "git_sha": versions.git_sha if versions else None,
        "git_dirty": None if dirty is None else int(bool(dirty)),
    }


def baseline_row(baseline: Baseline) -> tuple[Any, ...]:
    """``insert_baseline``'s values: its text and float casts, an empty hash stored as NULL."""
    values = astuple(baseline)
    return (
        *(str(v) for v in values[:4]),
        *(None if v is None else float(v) for v in values[4:7]),
        *(str(v) if v else None for v in values[7:]),
    )


def write_database(
    path: Path,
    runs: Iterable[RunResult],
    *,
    generation: str = CURRENT,
    baselines: Iterable[Baseline] = (),
) -> Path:
    """``runs`` and ``baselines`` in the database at ``path`` (made, or migrated, to
    ``generation`` first), as that generation's ensure_db, insert_run and insert_baseline
    write them, in the order given."""
    columns = [c.name for c in run_columns(generation)]
    baselines = list(baselines)
    if baselines and not has_baselines(generation):
        raise ValueError(f"generation {generation} has no baselines table (from {BASELINES_SINCE})")
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    try:
        ensure(con, generation)
        con.executemany(
            f"INSERT OR REPLACE INTO runs ({', '.join(columns)}) "
            f"VALUES ({', '.join('?' * len(columns))})",
            ([run_row(run)[name] for name in columns] for run in runs),
        )
        if baselines:
            con.executemany(
                "INSERT OR REPLACE INTO baselines VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [baseline_row(b) for b in baselines],
            )
        con.commit()
    finally:
        con.close()
    return path
