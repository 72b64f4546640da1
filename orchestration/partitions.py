"""Partitions of a suite: prepared data per task, agent runs per setting, as a task × agent@budget grid.

Within one suite the settings are exactly agents × tasks × budgets, so a suite's ``agent_runs``
is partitioned two ways: ``task`` (the very partitions of its ``prepared_tasks``) and
``agent_budget`` (``<agent>@<budget>s``, e.g. ``baseline-gbm@240s``). Both dimensions are dynamic:
the ``sync_suite_partitions`` sensor keeps them in step with the suite's file (and ``make run``
does the same for the suite it runs). Nothing in this module reads a file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import dagster as dg

from runner.specs import SuiteSpec
from runner.suites import setting_key

TASK_DIM = "task"
AGENT_BUDGET_DIM = "agent_budget"
BUDGET_MARK = "@"
# Dagster joins the dimensions of a multi-partition key with "|" and reserves "," "[" "]" in them;
# "..." and control characters are refused in any partition key.
RESERVED_IN_KEYS = ("|", ",", "[", "]", "...", "\n", "\r", "\t", "\0")


def agent_budget_key(agent_id: str, budget_seconds: int) -> str:
    return f"{agent_id}{BUDGET_MARK}{budget_seconds}s"


def parse_agent_budget_key(key: str) -> tuple[str, int]:
    agent_id, _, budget = key.rpartition(BUDGET_MARK)
    if not agent_id or not budget.endswith("s") or not budget[:-1].isdigit():
        raise ValueError(f"{key!r} is not of the form <agent>@<budget seconds>s")
    return agent_id, int(budget[:-1])


def settings_partition_key(
    agent_id: str, task_id: str, budget_seconds: int
) -> dg.MultiPartitionKey:
    """The ``agent_runs`` partition of one setting."""
    return dg.MultiPartitionKey(
        {AGENT_BUDGET_DIM: agent_budget_key(agent_id, budget_seconds), TASK_DIM: task_id}
    )


def setting_of(partition_key: str) -> str:
    """The runner's setting key (``agent|task|budget``) of an ``agent_runs`` partition key."""
    if isinstance(partition_key, dg.MultiPartitionKey):
        by_dim = partition_key.keys_by_dimension
        agent_budget, task = by_dim[AGENT_BUDGET_DIM], by_dim[TASK_DIM]
    else:  # the string form: dimensions in name order, agent_budget before task
        agent_budget, _, task = partition_key.partition("|")
    agent_id, budget = parse_agent_budget_key(agent_budget)
    return setting_key(agent_id, task, budget)


@dataclass(frozen=True)
class SuiteKeys:
    """The partition keys a suite's file asks for, in the suite's order."""

    tasks: tuple[str, ...]
    agent_budgets: tuple[str, ...]

    @classmethod
    def of(cls, suite: SuiteSpec) -> SuiteKeys:
        return cls(
            tasks=tuple(suite.tasks),
            agent_budgets=tuple(
                agent_budget_key(agent, budget)
                for agent in suite.agents
                for budget in suite.budgets
            ),
        )

    def problems(self) -> list[str]:
        """Ids Dagster cannot use in a partition key, as ``field: why`` lines."""
        out = []
        for field, ids in (("tasks", self.tasks), ("agents", self.agent_budgets)):
            for key in ids:
                bad = [s for s in RESERVED_IN_KEYS if s in key]
                if bad:
                    shown = key.rpartition(BUDGET_MARK)[0] if field == "agents" else key
                    out.append(
                        f"{field}: {shown!r} contains {', '.join(map(repr, bad))}, which Dagster "
                        "reserves in partition keys; rename it"
                    )
        return sorted(set(out))


@dataclass(frozen=True)
class SuitePartitions:
    """The dynamic partitions of one suite file (``suites/<stem>.yaml``), by name only."""

    stem: str

    @property
    def tasks_name(self) -> str:
        return f"{self.stem}__tasks"

    @property
    def agent_budgets_name(self) -> str:
        return f"{self.stem}__agent_budgets"

    @property
    def tasks(self) -> dg.DynamicPartitionsDefinition:
        return dg.DynamicPartitionsDefinition(name=self.tasks_name)

    @property
    def settings(self) -> dg.MultiPartitionsDefinition:
        return dg.MultiPartitionsDefinition(
            {
                TASK_DIM: self.tasks,
                AGENT_BUDGET_DIM: dg.DynamicPartitionsDefinition(name=self.agent_budgets_name),
            }
        )

    @staticmethod
    def setting_to_task() -> dg.MultiToSingleDimensionPartitionMapping:
        """Each setting depends on the prepared data of its own task only."""
        return dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name=TASK_DIM)

    def wanted(self, keys: SuiteKeys) -> dict[str, tuple[str, ...]]:
        return {self.tasks_name: keys.tasks, self.agent_budgets_name: keys.agent_budgets}

    def current(self, instance: dg.DagsterInstance) -> SuiteKeys:
        """The keys the instance holds now, in the order they were added."""
        return SuiteKeys(
            tasks=tuple(instance.get_dynamic_partitions(self.tasks_name)),
            agent_budgets=tuple(instance.get_dynamic_partitions(self.agent_budgets_name)),
        )

    def requests(
        self, current: SuiteKeys, wanted: SuiteKeys
    ) -> list[dg.AddDynamicPartitionsRequest | dg.DeleteDynamicPartitionsRequest]:
        """What brings the instance from ``current`` to ``wanted`` (new keys in the suite's order).

        Deleting a partition deletes a name in Dagster's instance, nothing else: run folders,
        warehouse rows and the partition's event history stay.
        """
        have = self.wanted(current)
        out: list[dg.AddDynamicPartitionsRequest | dg.DeleteDynamicPartitionsRequest] = []
        for name, keys in self.wanted(wanted).items():
            added = [k for k in keys if k not in have[name]]
            removed = [k for k in have[name] if k not in keys]
            if added:
                out.append(dg.AddDynamicPartitionsRequest(name, added))
            if removed:
                out.append(dg.DeleteDynamicPartitionsRequest(name, removed))
        return out

    def settings_range(self, keys: SuiteKeys) -> tuple[str, str] | None:
        """First and last ``agent_runs`` key of a range covering every setting, in the order
        the instance holds ``keys`` (the range of a grid is its whole rectangle)."""
        if not keys.tasks or not keys.agent_budgets:
            return None
        first = dg.MultiPartitionKey(
            {TASK_DIM: keys.tasks[0], AGENT_BUDGET_DIM: keys.agent_budgets[0]}
        )
        last = dg.MultiPartitionKey(
            {TASK_DIM: keys.tasks[-1], AGENT_BUDGET_DIM: keys.agent_budgets[-1]}
        )
        return str(first), str(last)


def apply_requests(
    instance: dg.DagsterInstance,
    requests: Sequence[dg.AddDynamicPartitionsRequest | dg.DeleteDynamicPartitionsRequest],
) -> None:
    """Apply partition requests now (what a sensor's result does once the tick ends)."""
    for request in requests:
        if isinstance(request, dg.AddDynamicPartitionsRequest):
            instance.add_dynamic_partitions(request.partitions_def_name, request.partition_keys)
        else:
            for key in request.partition_keys:
                instance.delete_dynamic_partition(request.partitions_def_name, key)
