"""When automation rebuilds an asset: on new data, not on every new materialization upstream."""

import dagster as dg


def on_new_data() -> dg.AutomationCondition:
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
