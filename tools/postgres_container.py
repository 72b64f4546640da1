"""The Docker deployment's Postgres alone: its image (tmlbench-postgres:15, `make deploy-deps`) in a
container of its own on a loopback port, for a Dagster storage to talk to.

Used by tests/orchestration/test_postgres_storage.py and benchmarks/postgres_connections.py;
``sessions`` by tools/docker_stack.py too, for the compose stack's Postgres.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.sandbox.docker_engine import harness_labels, remove_orphans
from tools.servers import free_port

IMAGE = "tmlbench-postgres:15"
USER = DATABASE = "dagster"
OWNER_LABEL = "tmlbench.test_postgres"  # its value: the purpose the caller named


def _docker(*args: str) -> str:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, check=True, timeout=120
    ).stdout


def sessions(container: str) -> int:
    """The connections the database of the tmlbench-postgres container ``container`` has accepted
    since it started (Postgres's own count, ``pg_stat_database.sessions``), asked with psql in the
    container as the role, password and database its environment gave it."""
    query = "select sessions from pg_stat_database where datname = current_database()"
    psql = 'PGPASSWORD="$POSTGRES_PASSWORD" psql -h 127.0.0.1 -U "$POSTGRES_USER"'
    psql += f' -d "$POSTGRES_DB" -At -c "{query}"'
    return int(_docker("exec", container, "sh", "-c", psql).strip())


@dataclass(frozen=True)
class PostgresContainer:
    name: str
    container_id: str
    password: str
    port: int

    def storage_config(self) -> dict[str, Any]:
        """A dagster-postgres storage's config (``postgres_db``) pointing at this server."""
        db = {
            "hostname": "127.0.0.1",
            "port": self.port,
            "username": USER,
            "password": self.password,
        }
        return {"postgres_db": {**db, "db_name": DATABASE, "scheme": "postgresql+psycopg2"}}

    def sessions(self) -> int:
        """The connections the database has accepted so far (``sessions``)."""
        return sessions(self.name)

    def connections_opened_by(self, query: Callable[[], object], times: int = 1) -> int:
        """How many connections Postgres accepted while ``query`` ran ``times`` times (not the
        count's own)."""
        before = self.sessions()
        for _ in range(times):
            query()
        return self.sessions() - before - 1  # the first count's own psql ended before the second

    def cpu_seconds(self) -> float:
        """The CPU the server's processes have used (the container's cgroup, v1)."""
        usage = Path(f"/sys/fs/cgroup/cpuacct/docker/{self.container_id}/cpuacct.usage")
        return int(usage.read_text()) / 1e9

    def restart(self) -> float:
        """Restart the server (every connection it held is dropped) and wait until it answers;
        the seconds Docker took to stop and start it (a stop the server ignores lasts Docker's
        timeout, 10 s, then is a SIGKILL)."""
        started = time.monotonic()
        _docker("restart", self.name)
        took = time.monotonic() - started
        self.wait_ready()
        return took

    def wait_ready(self, timeout: float = 60) -> None:
        """Until the server answers a query (a start, a restart)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.sessions()
                return
            except subprocess.CalledProcessError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)


@contextmanager
def postgres_container(purpose: str) -> Iterator[PostgresContainer]:
    """A fresh server of its own, removed afterwards.

    Named ``<purpose>-<pid>-<random>`` and labelled with its process as the docker sandbox labels
    an attempt's container: two at once (two xdist workers, two clones on one host) never share a
    name, where a fixed one let the second remove the first's server under its tests; and a
    server whose process was killed is removed by the next one.
    """
    remove_orphans("docker", label=OWNER_LABEL)
    name = f"{purpose}-{os.getpid()}-{secrets.token_hex(4)}"
    password, port = secrets.token_hex(12), free_port()  # a fixed one: a restart keeps it
    container_id = _docker(
        "run", "-d", "--name", name, "--label", f"{OWNER_LABEL}={purpose}", *harness_labels(),
        "-p", f"127.0.0.1:{port}:5432",
        "-e", f"POSTGRES_USER={USER}", "-e", f"POSTGRES_PASSWORD={password}",
        "-e", f"POSTGRES_DB={DATABASE}", IMAGE,
    ).strip()  # fmt: skip
    try:
        server = PostgresContainer(name, container_id, password, port)
        server.wait_ready()
        yield server
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)
