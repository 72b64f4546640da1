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
import secrets
import subprocess
import time
from pathlib import Path

from machine import describe_machine  # benchmarks/machine.py

IMAGE = "tmlbench-postgres:15"
CONTAINER = "tmlbench-bench-postgres"


def docker(*args: str) -> str:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=True).stdout


def sessions(password: str) -> int:
    query = "select sessions from pg_stat_database where datname = current_database()"
    out = docker("exec", "-e", f"PGPASSWORD={password}", CONTAINER,
                 "psql", "-h", "127.0.0.1", "-U", "dagster", "-d", "dagster", "-At", "-c", query)  # fmt: skip
    return int(out.strip())


def server_cpu(container_id: str) -> float:
    usage = Path(f"/sys/fs/cgroup/cpuacct/docker/{container_id}/cpuacct.usage")
    return int(usage.read_text()) / 1e9


def wait_ready(password: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            sessions(password)
            return
        except subprocess.CalledProcessError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--queries", type=int, default=300)
    args = ap.parse_args()
    from dagster_postgres import PostgresRunStorage

    from orchestration.postgres_storage import PooledPostgresRunStorage

    print(describe_machine())
    password = secrets.token_hex(12)
    subprocess.run(["docker", "rm", "-f", CONTAINER], capture_output=True, check=False)
    container_id = docker(
        "run", "-d", "--name", CONTAINER, "-p", "127.0.0.1::5432",
        "-e", "POSTGRES_USER=dagster", "-e", f"POSTGRES_PASSWORD={password}",
        "-e", "POSTGRES_DB=dagster", IMAGE,
    ).strip()  # fmt: skip
    try:
        wait_ready(password)
        port = docker("port", CONTAINER, "5432/tcp").split(":")[-1].strip()
        config = {
            "postgres_db": {
                "hostname": "127.0.0.1", "port": int(port), "username": "dagster",
                "password": password, "db_name": "dagster", "scheme": "postgresql+psycopg2",
            }
        }  # fmt: skip
        storages = {
            "dagster-postgres": PostgresRunStorage,
            "tmlbench (kept)": PooledPostgresRunStorage,
        }
        for name, cls in storages.items():
            storage = cls.from_config_value(None, config)
            storage.get_daemon_heartbeats()  # the kept connection opened, as in a running process
            before = (server_cpu(container_id), time.process_time(), time.perf_counter())
            opened = sessions(password)
            for _ in range(args.queries):
                storage.get_daemon_heartbeats()
            opened = sessions(password) - opened - 1  # not the count's own psql
            server = (server_cpu(container_id) - before[0]) / args.queries * 1000
            client = (time.process_time() - before[1]) / args.queries * 1000
            wall = (time.perf_counter() - before[2]) / args.queries * 1000
            print(f"{name}: {server:.2f} ms CPU in Postgres, {client:.2f} ms here, {wall:.2f} ms "
                  f"wall per query; {opened} connections for {args.queries} queries")  # fmt: skip
            storage.dispose()
    finally:
        subprocess.run(["docker", "rm", "-f", CONTAINER], capture_output=True, check=False)
    print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
