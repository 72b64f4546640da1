"""tools/postgres_container.py: servers started at once keep their own, and a server whose process
was killed is removed by the next one.

A fixed container name once let one xdist worker's module fixture remove another's server under
its tests (connection refused on the first's port)."""

from __future__ import annotations

import subprocess
import sys

import psycopg2
import pytest

from runner.config import REPO_ROOT
from tools.postgres_container import DATABASE, USER, PostgresContainer, postgres_container

# integration: Postgres servers in Docker (the image `make deploy-deps` builds)
pytestmark = pytest.mark.integration

KILLED_OWNER = """
import time
from tools.postgres_container import postgres_container
with postgres_container("tmlbench-test-killed-owner") as server:
    print(server.name, flush=True)
    time.sleep(600)
"""


def answers(server: PostgresContainer) -> bool:
    """A client on the host reaches the server through its published port."""
    try:
        psycopg2.connect(
            host="127.0.0.1", port=server.port, user=USER, password=server.password,
            dbname=DATABASE, connect_timeout=10,
        ).close()  # fmt: skip
    except psycopg2.OperationalError:
        return False
    return True


def exists(name: str) -> bool:
    return subprocess.run(["docker", "inspect", name], capture_output=True).returncode == 0


def test_two_servers_for_one_purpose_at_once_each_keep_their_own() -> None:
    with (
        postgres_container("tmlbench-test-twice") as first,
        postgres_container("tmlbench-test-twice") as second,
    ):
        assert first.name != second.name and first.port != second.port
        assert answers(first) and answers(second)
    assert not exists(first.name) and not exists(second.name)


def test_a_server_whose_process_was_killed_is_removed_by_the_next() -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", KILLED_OWNER], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert owner.stdout is not None
        left = owner.stdout.readline().strip()
    finally:
        owner.kill()  # no finally of its own runs: the server stays
        owner.wait()
    assert left and exists(left)
    with postgres_container("tmlbench-test-after-a-kill") as server:
        assert answers(server)
        assert not exists(left)
