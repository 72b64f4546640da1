"""Every dbt model (staging → intermediate → marts) as an asset; dbt tests become asset checks."""

from collections.abc import Iterator, Mapping
from typing import Any, TypeAlias

import dagster as dg
from dagster_dbt import DagsterDbtTranslator, DbtCliResource, dbt_assets

from orchestration.assets.warehouse import DUCKDB_POOL
from orchestration.conditions import on_new_data
from orchestration.resources import DuckDBWarehouse, dbt_project
from runner.errors import TmlbenchError
from warehouse.dbt import DBT_PROJECT_DIR, step_target

# What a dbt build streams (``DbtCliInvocation.stream``): each model's output (no value: dbt wrote
# the table) and the results of its tests.
DbtEvent: TypeAlias = (
    dg.Output[None]
    | dg.AssetMaterialization
    | dg.AssetObservation
    | dg.AssetCheckResult
    | dg.AssetCheckEvaluation
)


class TmlbenchDbtTranslator(DagsterDbtTranslator):
    """Group each model by its folder (staging, intermediate, marts); describe it as its YAML
    does; rebuild when what it is built from changed (its inputs' data versions, or its code)."""

    def get_description(self, dbt_resource_props: Mapping[str, Any]) -> str:
        """The YAML's description and the file that defines it, never its SQL: dagster-dbt's
        default appends the model's whole raw SQL. A model without a description says where
        one goes (tests/orchestration/test_descriptions.py wants one for every model)."""
        description = (dbt_resource_props.get("description") or "").strip()
        path = dbt_resource_props.get("original_file_path")
        where = f"`{DBT_PROJECT_DIR.name}/{path}`" if path else "its file"
        if not description:
            kind, name = dbt_resource_props["resource_type"], dbt_resource_props["name"]
            description = f"dbt {kind} `{name}`: no description yet; add one in its YAML file."
        return f"{description}\n\nDefined in {where}."

    def get_group_name(self, dbt_resource_props: Mapping[str, Any]) -> str | None:
        fqn = dbt_resource_props.get("fqn", [])
        return fqn[1] if len(fqn) > 2 else "dbt"

    def get_automation_condition(
        self, dbt_resource_props: Mapping[str, Any]
    ) -> dg.AutomationCondition[dg.AssetKey] | None:
        return on_new_data()


def build_dbt_assets() -> dg.AssetsDefinition:
    project = dbt_project()
    if not project.manifest_path.is_file():
        raise TmlbenchError(
            f"no dbt manifest at {project.manifest_path}; build it with: make manifest"
        )

    @dbt_assets(
        manifest=project.manifest_path,
        project=project,
        dagster_dbt_translator=TmlbenchDbtTranslator(),
        pool=DUCKDB_POOL,
    )
    def tmlbench_dbt_models(
        context: dg.AssetExecutionContext, dbt: DbtCliResource, warehouse: DuckDBWarehouse
    ) -> Iterator[DbtEvent]:
        with warehouse.connection():  # a fresh warehouse gets the raw schema first
            pass
        # dbt's unit tests check the models' SQL on fixed inputs, not the warehouse's data: `make
        # test` runs them; here they would only delay every published snapshot (about half of
        # this build's time, benchmarks/ui_loop.py).
        args = ["build", "--exclude-resource-type", "unit_test", *warehouse.dbt_args()]
        target = step_target(context.run_id)  # not dagster-dbt's default: it keeps every one
        yield from dbt.cli(args, context=context, target_path=target).stream()

    return tmlbench_dbt_models


def mart_keys(models: dg.AssetsDefinition) -> list[dg.AssetKey]:
    return [key for key, group in models.group_names_by_key.items() if group == "marts"]
