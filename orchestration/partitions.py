"""Partitions of a suite: prepared data per task, agent runs per setting (agent|task|budget)."""

import dagster as dg

from runner.settings import parse_setting_key, setting_key
from runner.specs import SuiteSpec


def setting_keys(suite: SuiteSpec) -> list[str]:
    """Agents outermost, then tasks, then budgets (the UI lists them in this order)."""
    return [
        setting_key(agent, task, budget)
        for agent in suite.agents
        for task in suite.tasks
        for budget in suite.budgets
    ]


def task_partitions(suite: SuiteSpec) -> dg.StaticPartitionsDefinition:
    return dg.StaticPartitionsDefinition(list(suite.tasks))


def setting_partitions(suite: SuiteSpec) -> dg.StaticPartitionsDefinition:
    return dg.StaticPartitionsDefinition(setting_keys(suite))


def setting_to_task(suite: SuiteSpec) -> dg.StaticPartitionMapping:
    """Each setting depends on the prepared data of its own task only."""
    keys = setting_keys(suite)
    return dg.StaticPartitionMapping(
        {task: [k for k in keys if parse_setting_key(k)[1] == task] for task in suite.tasks}
    )
