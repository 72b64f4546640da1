"""dagster-postgres's three storages, each keeping its connection to Postgres open.

Outside the webserver, dagster-postgres opens a new connection for every query (SQLAlchemy's
``NullPool``), and a run writes each of its events with one: the Docker deployment's test opened
~3,000 in two minutes, ~50 a second while runs were going. Each cost ~9 ms of CPU in Postgres (a
backend started) and ~5 ms in the Dagster process (SCRAM's key derivation), against ~1 ms for
the query and a ping on a kept connection (benchmarks/postgres_connections.py; 2026-12-07). These
classes take the pool the webserver takes (one connection kept, more opened while threads need
them) in every process, the daemon's and the run workers' too, with no statement timeout (a
run's long query is not cut, as it is not with ``NullPool``) and a ping before each use.

dagster.yaml names them per storage (``run_storage``, ``event_log_storage``,
``schedule_storage``), never as one ``storage: custom``: Dagster wraps a custom unified storage
in its legacy adapters, whose event log says it has no concurrency pools (the ``duckdb`` pool).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage, PostgresScheduleStorage
from dagster_postgres.utils import (
    create_pg_engine,
    get_token_provider_from_config,
    pg_url_from_config,
)

if TYPE_CHECKING:  # the type of the instance data Dagster hands a storage (not exported)
    from dagster._serdes import ConfigurableClassData

# dagster-webserver's own pool settings (--db-pool-recycle, --db-pool-max-overflow).
POOL_RECYCLE_SECONDS = 3600
POOL_MAX_OVERFLOW = 20

Storage = TypeVar(
    "Storage", bound=PostgresRunStorage | PostgresEventLogStorage | PostgresScheduleStorage
)


def _pooled(storage: Storage) -> Storage:
    """``storage`` on the engine dagster-postgres's ``optimize_for_webserver`` makes (one
    connection kept, up to ``POOL_MAX_OVERFLOW`` more while threads need them), without its
    statement timeout and with a ping before each use: a kept connection that Postgres dropped
    (a restart) is replaced, not failed, as a new connection per query would not have failed."""
    kwargs: dict[str, Any] = {
        "isolation_level": "AUTOCOMMIT",
        "pool_size": 1,
        "max_overflow": POOL_MAX_OVERFLOW,
        "pool_recycle": POOL_RECYCLE_SECONDS,
        "pool_pre_ping": True,
    }
    options = storage._engine.url.query.get("options")  # as optimize_for_webserver keeps them
    if options:
        kwargs["connect_args"] = {"options": options}
    storage._engine.dispose()
    storage._engine = create_pg_engine(storage.postgres_url, storage._token_provider, **kwargs)
    return storage


def _arguments(
    inst_data: ConfigurableClassData | None, config_value: Mapping[str, Any]
) -> dict[str, Any]:
    """What dagster-postgres's own ``from_config_value`` passes its storage."""
    return {
        "inst_data": inst_data,
        "postgres_url": pg_url_from_config(config_value),
        "should_autocreate_tables": config_value.get("should_autocreate_tables", True),
        "token_provider": get_token_provider_from_config(config_value),
    }


class PooledPostgresRunStorage(PostgresRunStorage):
    """Runs, daemon heartbeats and instance info, over one kept connection."""

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData | None, config_value: Mapping[str, Any]
    ) -> Self:
        return _pooled(cls(**_arguments(inst_data, config_value)))


class PooledPostgresEventLogStorage(PostgresEventLogStorage):
    """Event logs, asset records and concurrency slots, over one kept connection."""

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData | None, config_value: Mapping[str, Any]
    ) -> Self:
        return _pooled(cls(**_arguments(inst_data, config_value)))


class PooledPostgresScheduleStorage(PostgresScheduleStorage):
    """Schedule and sensor state and ticks, over one kept connection."""

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData | None, config_value: Mapping[str, Any]
    ) -> Self:
        return _pooled(cls(**_arguments(inst_data, config_value)))
