"""The sensor that keeps every suite's partitions in step with the spec files.

Each tick reads every suite, agent and task file (``orchestration.suites.scan_specs``), adds the
partitions a valid suite now asks for and deletes those it no longer lists. Deleting a partition
removes a name from the UI only: run folders, warehouse rows and the partition's history stay.
A suite whose file, or one of whose agents or tasks, is invalid keeps its partitions as they
are; the tick then fails with one line per problem, naming the file and the field, after the
valid suites are updated.
"""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg

from orchestration.partitions import SuiteKeys, apply_requests
from orchestration.resources import BenchConfig
from orchestration.suites import SpecScan, SuiteFile, scan_specs

SENSOR_NAME = "sync_suite_partitions"
INTERVAL_SECONDS = 30

PartitionRequest = dg.AddDynamicPartitionsRequest | dg.DeleteDynamicPartitionsRequest


class SpecProblems(Exception):
    """Spec files that are invalid: the message has one line per problem."""


def suite_requests(
    suites: Sequence[SuiteFile], scan: SpecScan, instance: dg.DagsterInstance
) -> dict[str, list[PartitionRequest]]:
    """Per suite with a group, what brings its partitions in step with its (valid) file."""
    out = {}
    for suite in suites:
        keys = scan.keys.get(suite.stem)
        if keys is None:  # invalid now: its partitions stay as they were
            continue
        requests = suite.partitions.requests(suite.partitions.current(instance), keys)
        if requests:
            out[suite.stem] = requests
    return out


def describe_tick(
    suites: Sequence[SuiteFile], scan: SpecScan, changes: dict[str, list[PartitionRequest]]
) -> str:
    """What a tick did, for a person: each changed suite, suites waiting for a reload, the rest."""
    known = {s.stem for s in suites}
    lines = [f"{stem}: {_describe(requests)}" for stem, requests in changes.items()]
    new = sorted(set(scan.keys) - known)
    if new:
        lines.append(
            "new suite file(s) without assets yet: "
            + ", ".join(f"{stem}.yaml" for stem in new)
            + " (reload the code location: Deployment → Reload)"
        )
    gone = sorted(known - set(scan.keys) - set(scan.invalid_suites))
    if gone:
        lines.append(
            "suite file(s) gone: "
            + ", ".join(f"{stem}.yaml" for stem in gone)
            + " (their partitions are kept; reload the code location to drop their assets)"
        )
    unchanged = len([s for s in suites if s.stem in scan.keys and s.stem not in changes])
    lines.append(f"{unchanged} suite(s) unchanged")
    return "; ".join(lines)


def problems_message(scan: SpecScan) -> str:
    kept = ", ".join(sorted(scan.invalid_suites))
    head = f"{len(scan.problems)} problem(s) in the spec files"
    if kept:
        head += f"; the partitions of suite(s) {kept} are kept as they were until fixed"
    return head + ":\n" + "\n".join(f"- {line}" for line in scan.problems)


def _describe(requests: list[PartitionRequest]) -> str:
    parts = []
    for request in requests:
        sign = "+" if isinstance(request, dg.AddDynamicPartitionsRequest) else "-"
        kind = request.partitions_def_name.rpartition("__")[2]
        parts.append(
            f"{sign}{len(request.partition_keys)} {kind} ({', '.join(request.partition_keys)})"
        )
    return ", ".join(parts)


def build_suite_sensor(suites: Sequence[SuiteFile]) -> dg.SensorDefinition:
    @dg.sensor(
        name=SENSOR_NAME,
        minimum_interval_seconds=INTERVAL_SECONDS,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Keeps each suite's partitions (tasks, agent@budget) in step with the suite, "
        "agent and task files; a tick fails, naming file and field, while a file is invalid.",
    )
    def sync_suite_partitions(
        context: dg.SensorEvaluationContext, bench: BenchConfig
    ) -> dg.SensorResult:
        scan = scan_specs(bench.paths())
        changes = suite_requests(suites, scan, context.instance)
        requests = [r for rs in changes.values() for r in rs]
        summary = describe_tick(suites, scan, changes)
        if scan.problems:
            # A failed tick applies nothing of its result: the valid suites are updated first.
            apply_requests(context.instance, requests)
            context.log.info(summary)
            raise SpecProblems(problems_message(scan) + f"\nvalid suites: {summary}")
        return dg.SensorResult(dynamic_partitions_requests=requests, skip_reason=summary)

    return sync_suite_partitions


def sync_suite(instance: dg.DagsterInstance, suite: SuiteFile, keys: SuiteKeys) -> SuiteKeys:
    """Bring one suite's partitions in step with ``keys`` now (``make run`` does this before it
    runs); returns the keys as the instance holds them, in its order."""
    partitions = suite.partitions
    apply_requests(instance, partitions.requests(partitions.current(instance), keys))
    return partitions.current(instance)
