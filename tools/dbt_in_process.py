"""dbt run in this process, the project parsed once: what the test warehouses build with.

``build_marts(path, run=run_in_process)`` builds what ``build_marts(path)`` builds: the same
``dbt build`` arguments, the same run_results.json read back, the same errors. What it skips is
what every dbt process does before its first node: importing dbt and parsing the project. A
small warehouse's build took 18.9–22.2 s of CPU through the CLI and 9.5–11.6 s here, once the
process had parsed (2026-12-06, AMD EPYC). dbt's programmatic entry point takes a parsed
manifest for that (``dbtRunner(manifest=...)``, "Reusing objects" in dbt's docs); the profile,
the vars and the adapter are still made anew for each invocation, from its arguments.

A manifest is parsed once per warehouse name and set of project vars: dbt-duckdb names the
database after the file's stem, and the parse writes that name into every node; a var may shape
what the parse makes (a model's config). The rest of the warehouse's path is read from the
profile (dbt_project/profiles.yml), which every invocation reads again.

The product runs dbt in a subprocess (warehouse/dbt.py): the DuckDB file dbt-duckdb keeps open
is closed when the process ends. Here it is closed after every invocation.

The processes of one test session (pytest-xdist's workers) share their parses too
(``share_parses_in``): the first to need a manifest parses it and pickles it into the session's
folder, the others read it. A parse here costs ~9 s of CPU (~6.5 s once dbt is imported), a read
0.2 s (1.9 MB; 2026-12-06, AMD EPYC). Pickled field by field: dbt 1.11's own ``__reduce_ex__``
lists the fields by position and misses two (``fixtures``, ``_function_lookup``), so what it
unpickles has every later field one place off and fails its first ``ref``.

One dbt thread, not the profile's four: in the worker's process the threads share its GIL, and
taking turns at it cost CPU. The same build took 14.8-15.5 s of CPU on four threads and
12.8-13.5 s on one, and no more time (three of each, 2026-12-06, AMD EPYC).
"""

from __future__ import annotations

import copyreg
import dataclasses
import hashlib
import io
import json
import pickle
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from filelock import FileLock

from warehouse.dbt import WAREHOUSE_VAR, project_args

_manifests: dict[str, Any] = {}  # [warehouse file stem, other project vars] as JSON → Manifest
_shared_folder: Path | None = None  # where this process shares its parses, if anywhere


def share_parses_in(folder: Path) -> None:
    """Share this process's parses with every process that shares ``folder`` (the workers of one
    test session): a manifest another parsed is read from there, one parsed here is left there.
    The folder is the session's own: what is in it was parsed from this checkout's project."""
    global _shared_folder
    folder.mkdir(parents=True, exist_ok=True)
    _shared_folder = folder


def _project_vars(args: Sequence[str]) -> dict[str, Any]:
    """The ``--vars`` of a dbt command line (warehouse.dbt.vars_args writes exactly one)."""
    index = list(args).index("--vars")
    found: dict[str, Any] = json.loads(args[index + 1])
    return found


def _manifest(project_vars: dict[str, Any]) -> Any:
    # dbt-duckdb names the database after the file's stem, and the parse writes that name into
    # every node: a manifest serves the warehouses of one stem (a test's is warehouse.duckdb).
    others = {k: v for k, v in project_vars.items() if k != WAREHOUSE_VAR}
    key = json.dumps([Path(project_vars[WAREHOUSE_VAR]).stem, others], sort_keys=True)
    if key not in _manifests:
        if _shared_folder is None:
            _manifests[key] = _parse(project_vars)
        else:
            _manifests[key] = _shared_parse(_shared_folder, key, project_vars)
    return _manifests[key]


def _shared_parse(folder: Path, key: str, project_vars: dict[str, Any]) -> Any:
    """The manifest of ``key`` from ``folder``, parsed and left there by the first process that
    needs it (the others wait for it rather than parse it too)."""
    pickled = folder / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.pickle"
    with FileLock(pickled.with_suffix(".lock")):
        if pickled.is_file():
            return pickle.loads(pickled.read_bytes())
        manifest = _parse(project_vars)
        partial = pickled.with_suffix(".partial")  # a process killed mid-write leaves no pickle
        partial.write_bytes(_pickled(manifest))
        partial.replace(pickled)
        return manifest


def _pickled(manifest: Any) -> bytes:
    """The manifest pickled as its dataclass fields, by name; what only this process can use (its
    lock) and the caches it rebuilds on demand (the lookups, the macros by name) left out."""
    from dbt.contracts.graph.manifest import Manifest

    def by_field(manifest: Manifest) -> tuple[Any, tuple[dict[str, Any]]]:
        state = {
            field.name: getattr(manifest, field.name)
            for field in dataclasses.fields(manifest)
            if not field.name.startswith("_") or field.name == "_parsing_info"
        }
        return _manifest_of, (state,)

    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer)
    pickler.dispatch_table = {**copyreg.dispatch_table, Manifest: by_field}
    pickler.dump(manifest)
    return buffer.getvalue()


def _manifest_of(state: dict[str, Any]) -> Any:
    from dbt.contracts.graph.manifest import Manifest

    return Manifest(**state)


def _parse(project_vars: dict[str, Any]) -> Any:
    from dbt.cli.main import dbtRunner

    with tempfile.TemporaryDirectory(prefix="dbt-parse-") as target:
        parsed = dbtRunner().invoke(
            ["parse", "--quiet", "--no-partial-parse", "--target-path", target,
             "--log-path", target, "--vars", json.dumps(project_vars), *project_args()]
        )  # fmt: skip
    if not parsed.success:
        raise RuntimeError(f"dbt parse failed: {parsed.exception}")
    return parsed.result


def run_in_process(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """``warehouse.dbt.run_dbt``'s contract, in this process: ``dbt <args>`` on the project, a
    failing exit returned, not raised (its exception, if any, as the output)."""
    from dbt.cli.main import dbtRunner

    # The log file keeps warnings and errors only: at dbt's default (debug: every event and
    # query, 21,600 lines) writing it took ~5 % of a small build's CPU (0.4-0.6 s of 9.4-10 s,
    # 19 builds of each, 2026-12-07). A failing node is named from run_results.json either way.
    command = [*args, "--threads", "1", "--log-level-file", "warn", *project_args()]
    try:
        outcome = dbtRunner(manifest=_manifest(_project_vars(args))).invoke(command)
    finally:
        _close_warehouse()
    output = "" if outcome.exception is None else f"{outcome.exception}"
    return subprocess.CompletedProcess(command, 0 if outcome.success else 1, "", output)


def _close_warehouse() -> None:
    """Close the DuckDB file dbt-duckdb keeps open for the process (a subprocess closes it by
    ending), so that the test may open it, read-only or not, and the next build another file."""
    from dbt.adapters.duckdb.connections import DuckDBConnectionManager

    with DuckDBConnectionManager._LOCK:
        environment = DuckDBConnectionManager._ENV
        if environment is not None:
            environment.close()
        DuckDBConnectionManager.close_all_connections()  # type: ignore[no-untyped-call]
