"""orchestration/postgres_storage.py on the Docker deployment's own Postgres (its image, alone):
one connection kept per storage, the duckdb pool held in it, and a Postgres restart survived."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from dagster_postgres import PostgresRunStorage

from orchestration.postgres_storage import (
    PooledPostgresEventLogStorage,
    PooledPostgresRunStorage,
    PooledPostgresScheduleStorage,
)
from tools.postgres_container import PostgresContainer, postgres_container

# integration: a Postgres server in Docker (the image `make deploy-deps` builds).
# xdist_group: the module's server is started once, on one worker, not on each.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("postgres_storage")]

QUERIES = 30


@pytest.fixture(scope="module")
def server() -> Iterator[PostgresContainer]:
    with postgres_container("tmlbench-test-postgres-storage") as server:
        yield server


def connections_for(server: PostgresContainer, query: Callable[[], object]) -> int:
    """How many connections Postgres accepted while ``query`` ran ``QUERIES`` times."""
    return server.connections_opened_by(query, QUERIES)


def test_each_storage_keeps_one_connection_where_dagster_postgres_opens_one_per_query(
    server: PostgresContainer,
) -> None:
    config = server.storage_config()
    theirs = PostgresRunStorage.from_config_value(None, config)
    assert connections_for(server, theirs.get_daemon_heartbeats) == QUERIES  # what it measures

    runs = PooledPostgresRunStorage.from_config_value(None, config)
    events = PooledPostgresEventLogStorage.from_config_value(None, config)
    schedules = PooledPostgresScheduleStorage.from_config_value(None, config)
    queries = [runs.get_daemon_heartbeats, events.get_concurrency_keys]
    queries.append(schedules.all_instigator_state)
    for query in queries:
        query()  # its connection opened, as in a running process
        assert connections_for(server, query) == 0, query


def test_the_duckdb_pool_is_held_in_postgres(server: PostgresContainer) -> None:
    """The event log is the class itself (not Dagster's legacy adapter): it has the concurrency
    tables, so the duckdb pool's one slot is claimed and freed there."""
    events = PooledPostgresEventLogStorage.from_config_value(None, server.storage_config())
    assert events.supports_global_concurrency_limits
    events.set_concurrency_slots("duckdb", 1)
    first = events.claim_concurrency_slot("duckdb", "run-a", "raw_warehouse")
    second = events.claim_concurrency_slot("duckdb", "run-b", "raw_warehouse")
    assert (first.is_claimed, second.is_claimed) == (True, False)
    events.free_concurrency_slots_for_run("run-a")
    assert events.claim_concurrency_slot("duckdb", "run-b", "raw_warehouse").is_claimed


def test_a_postgres_restart_costs_no_query(server: PostgresContainer) -> None:
    """The kept connection dies with the server; the next query gets a new one instead of the
    error a run worker would fail on. The server stops at once though a client is connected
    (its image's stop signal: a fast shutdown)."""
    runs = PooledPostgresRunStorage.from_config_value(None, server.storage_config())
    assert runs.get_daemon_heartbeats() == {}
    assert server.restart() < 8, "the stop waited for the kept connection to leave"
    assert runs.get_daemon_heartbeats() == {}
    assert connections_for(server, runs.get_daemon_heartbeats) == 0
