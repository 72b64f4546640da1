"""The closed vocabularies (run statuses, metric directions, leaderboard variants) agree in
every layer that must spell them out.

Python declares each one as a type (runner.attempts.records.Status, runner.tasks.vocabulary.Direction); dbt
declares it once as a macro (dbt_project/macros/vocabulary.sql) that models loop over and
accepted_values tests take; the DDL checks it in raw.runs and raw.tasks; a contracted mart
lists one n_<status> column per status. Any other file that spells out the whole status list
is a copy to remove (import runner.attempts.records.STATUSES, or call the macro).
"""

from __future__ import annotations

import re
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import jinja2
import pytest
import yaml

from runner.attempts.records import STATUSES, RunRecord
from runner.tasks.vocabulary import Direction
from warehouse.importers import tml_bench_format

ROOT = Path(__file__).resolve().parents[1]
DBT = ROOT / "dbt_project"
VOCABULARY_MACROS = DBT / "macros" / "vocabulary.sql"
RAW_DDL = ROOT / "warehouse" / "ddl" / "raw.sql"

DIRECTIONS = typing.get_args(Direction)

# Files that may spell out the whole status list, each checked below against STATUSES.
STATUS_HOMES = {
    "runner/attempts/records.py",  # the type: the one Python home
    "dbt_project/macros/vocabulary.sql",  # the one dbt home
    "warehouse/ddl/raw.sql",  # the database's check constraint on raw.runs.status
}
SWEPT_FOLDERS = (
    "runner",
    "warehouse",
    "app",
    "orchestration",
    "agents",
    "benchmarks",
    "dbt_project",
)
SWEPT_SUFFIXES = {".py", ".sql", ".yml", ".yaml"}


class _Returned(Exception):
    """dbt's return() inside a macro: stops rendering and hands back a value."""

    def __init__(self, value: Any) -> None:
        super().__init__(value)
        self.value = value


def _raise_return(value: Any) -> None:
    raise _Returned(value)


def dbt_vocabulary(macro: str) -> tuple[str, ...]:
    """Call a macro of vocabulary.sql the way dbt does (its return() value)."""
    env = jinja2.Environment(extensions=["jinja2.ext.do"])
    env.globals["return"] = _raise_return
    module = env.from_string(VOCABULARY_MACROS.read_text()).module
    with pytest.raises(_Returned) as returned:
        getattr(module, macro)()
    return tuple(returned.value.value)


def check_constraints(table: str) -> list[str]:
    """The CHECK constraints of raw.<table> as DuckDB reads warehouse/ddl/raw.sql."""
    with duckdb.connect() as con:
        con.execute(RAW_DDL.read_text())
        rows = con.execute(
            "select expression from duckdb_constraints() "
            "where schema_name = 'raw' and table_name = ? and constraint_type = 'CHECK'",
            [table],
        ).fetchall()
    return [expression for (expression,) in rows]


def ddl_vocabulary(table: str, column: str) -> tuple[str, ...]:
    """The values of the `<column> IN (...)` check on raw.<table>."""
    pattern = re.compile(rf"\b{column}\s+IN\s*\(([^)]*)\)", re.IGNORECASE)
    found = [m.group(1) for e in check_constraints(table) if (m := pattern.search(e))]
    assert len(found) == 1, f"raw.sql: expected one IN check on raw.{table}.{column}: {found}"
    return tuple(re.findall(r"'([^']*)'", found[0]))


def dbt_model_yamls() -> Iterator[tuple[Path, dict[str, Any]]]:
    for path in sorted((DBT / "models").rglob("*.yml")):
        for model in (yaml.safe_load(path.read_text()) or {}).get("models", []):
            yield path, model


def test_statuses_agree_between_python_dbt_and_the_ddl():
    assert dbt_vocabulary("run_statuses") == STATUSES
    assert ddl_vocabulary("runs", "status") == STATUSES


def test_imported_tml_bench_statuses_are_ours():
    """The importer keeps TML-bench's status as is: each word it accepts must be one of ours."""
    assert set(tml_bench_format.STATUSES) <= set(STATUSES)


def test_metric_directions_agree_between_python_dbt_and_the_ddl():
    assert typing.get_args(RunRecord.model_fields["metric_direction"].annotation) == DIRECTIONS
    assert dbt_vocabulary("metric_directions") == DIRECTIONS
    assert ddl_vocabulary("runs", "metric_direction") == DIRECTIONS
    assert ddl_vocabulary("tasks", "metric_direction") == DIRECTIONS


def test_leaderboard_variants_are_the_ones_the_leaderboard_model_emits():
    sql = (DBT / "models" / "marts" / "leaderboard.sql").read_text()
    emitted = tuple(re.findall(r"'(\w+)' as variant", sql))
    assert dbt_vocabulary("leaderboard_variants") == emitted


def test_contracted_status_counts_list_one_column_per_status():
    """A model built with status_counts() contracts its n_<status> columns in its YAML."""
    expected = [f"n_{status}" for status in STATUSES]
    checked = []
    for path, model in dbt_model_yamls():
        sql = path.with_name(f"{model['name']}.sql")
        if not sql.exists() or "status_counts()" not in sql.read_text():
            continue
        columns = [
            c["name"]
            for c in model.get("columns", [])
            # n_unforgiven_<status>: the faults a ceiling counts (not forgiven by a resumption)
            if c["name"].startswith("n_") and not c["name"].startswith("n_unforgiven_")
        ]
        assert columns == expected, f"{path.relative_to(ROOT)}: {model['name']}"
        checked.append(model["name"])
    assert {"success_rates", "setting_success_rates"} <= set(checked)


def _accepted_values(node: Any) -> Iterator[Any]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "accepted_values":
                yield (value.get("arguments", value) or {}).get("values")
            else:
                yield from _accepted_values(value)
    elif isinstance(node, list):
        for item in node:
            yield from _accepted_values(item)


def test_dbt_yaml_takes_each_vocabulary_from_its_macro():
    vocabularies = {
        frozenset(STATUSES): "run_statuses",
        frozenset(DIRECTIONS): "metric_directions",
        frozenset(dbt_vocabulary("leaderboard_variants")): "leaderboard_variants",
    }
    for path in sorted((DBT / "models").rglob("*.yml")):
        for values in _accepted_values(yaml.safe_load(path.read_text())):
            if isinstance(values, list) and frozenset(values) in vocabularies:
                macro = vocabularies[frozenset(values)]
                pytest.fail(f'{path.relative_to(ROOT)}: values: "{{{{ {macro}() }}}}", not a copy')


def _spells_out_every_status(text: str) -> bool:
    """Whether the text holds a literal list of every status: a tuple, a SQL IN (...), a YAML
    flow or block list (statuses used one by one, e.g. in a CASE, are not a copy of the list)."""
    word = "|".join(map(re.escape, STATUSES))
    item = rf"""['"]?(?:{word})['"]?"""
    lists = re.finditer(rf"{item}(?:(?:\s*,\s*|\s*\n\s*-\s*){item})+", text)
    return any(set(STATUSES) <= set(re.findall(word, m.group(0))) for m in lists)


def test_no_other_file_spells_out_the_status_list():
    copies = {
        str(path.relative_to(ROOT))
        for folder in SWEPT_FOLDERS
        for path in (ROOT / folder).rglob("*")
        if path.suffix in SWEPT_SUFFIXES
        and "target" not in path.relative_to(ROOT).parts
        and _spells_out_every_status(path.read_text(errors="replace"))
    }
    assert copies <= STATUS_HOMES, (
        "spell the statuses out once: import runner.attempts.records.STATUSES (Python) or call "
        f"run_statuses() (dbt); copies: {sorted(copies - STATUS_HOMES)}"
    )
