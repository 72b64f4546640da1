"""When automation rebuilds an asset: the raw load on every new agent run, whatever state other
suites are in; dbt, the snapshot and the reports on new data, not on every new materialization
upstream."""

import dagster as dg


def on_new_data() -> dg.AutomationCondition[dg.AssetKey]:
    """``AutomationCondition.eager()``, but a dependency counts as updated only when its data
    version changed, or its code did (a raw load that found nothing new rebuilds nothing).

    The raw assets report data versions from their tables' content; a rebuilt dbt model gets one
    Dagster derives from its code version and its inputs' data versions, so the change runs down
    the graph and stops where nothing changed. An asset whose own code changed is rebuilt too.
    """
    changed = (
        dg.AutomationCondition.data_version_changed()
        & ~dg.AutomationCondition.executed_with_root_target()
    ).with_label("data_version_changed_without_root")
    eager = dg.AutomationCondition.eager().replace("newly_updated_without_root", changed)
    return (eager | dg.AutomationCondition.code_version_changed()).with_label("on_new_data")


# Made of conditions Dagster types for assets or checks (any_deps_updated, newly_requested,
# in_progress), so typed so too: the type parameter is invariant.
def on_new_agent_runs() -> dg.AutomationCondition[dg.AssetKey | dg.AssetCheckKey]:
    """The raw load: as soon as any suite's ``agent_runs`` has a new materialization, once.

    Not ``eager()``: it waits while any partition of any dependency is missing or in progress,
    and the raw load depends on every partition of every suite (a suite whose settings are not all
    run, such as an LLM suite nobody paid for, would hold it back for ever). Here a new
    materialization of any partition is the trigger, and it stays pending until the load is
    requested: a setting that finishes while a load runs is loaded by the next one (the load
    reads what was materialized since the last load *started*, ``settings_run_since_last_load``),
    never dropped because a load finished after it. Nothing new, no load.
    """
    new_agent_runs = dg.AutomationCondition.any_deps_updated().since(
        dg.AutomationCondition.newly_requested()
    )
    return (new_agent_runs & ~dg.AutomationCondition.in_progress()).with_label("on_new_agent_runs")


def with_the_raw_load(raw_runs: dg.AssetKey) -> dg.AutomationCondition[dg.AssetKey]:
    """For every other output of the raw load: true exactly when the load itself is requested.

    The load's outputs go out together (one step), and Dagster requests them together, but it
    evaluates conditions level by level of the asset graph: raw/tasks, with no dependency, is
    evaluated before raw/runs, and so is the staging model reading it, which would then find
    raw/tasks neither requested nor materialized and stay behind, holding back every mart and
    the snapshot. Evaluated on raw/runs from the first level, the load is requested there, and
    every dbt model sees its raw table coming in the same tick (one run: load, dbt, snapshot).
    """
    return dg.AutomationCondition.asset_matches(raw_runs, on_new_agent_runs()).with_label(
        "with_the_raw_load"
    )
