"""What a Dagster storage query costs in Postgres connections: dagster-postgres's own run storage
(a new connection per query) against ours (one kept: orchestration/postgres_storage.py).

    uv run python benchmarks/postgres_connections.py [--queries 300]

The Docker deployment's Postgres (tmlbench-postgres:15, `make deploy-deps`, SCRAM passwords) in
a container of its own on a loopback port; each storage asks it ``--queries`` times for the
daemon heartbeats (one small query, as the daemon and the run workers ask theirs). For each:
the CPU per query in Postgres (its container's cgroup) and in this process, the wall time, and
the connections Postgres accepted (``pg_stat_database.sessions``). Target: none; the kept
connection's query is the floor.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from machine import describe_machine

from tools.postgres_container import postgres_container


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--queries", type=int, default=300)
    args = ap.parse_args()
    from dagster_postgres import PostgresRunStorage

    from orchestration.postgres_storage import PooledPostgresRunStorage

    print(describe_machine())
    with postgres_container("tmlbench-bench-postgres") as server:
        storages = {
            "dagster-postgres": PostgresRunStorage,
            "tmlbench (kept)": PooledPostgresRunStorage,
        }
        for name, cls in storages.items():
            storage = cls.from_config_value(None, server.storage_config())
            storage.get_daemon_heartbeats()  # the kept connection opened, as in a running process
            cpu, mine, wall = server.cpu_seconds(), time.process_time(), time.perf_counter()
            opened = server.connections_opened_by(storage.get_daemon_heartbeats, args.queries)
            per_query = {
                "in Postgres": server.cpu_seconds() - cpu,
                "here": time.process_time() - mine,
                "wall": time.perf_counter() - wall,
            }
            ms = {k: f"{v / args.queries * 1000:.2f} ms" for k, v in per_query.items()}
            print(f"{name}: CPU per query {ms['in Postgres']} in Postgres, {ms['here']} here; "
                  f"{ms['wall']} wall; {opened} connections for {args.queries} queries")  # fmt: skip
            storage.dispose()
    print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
