"""A folder built once and shared by every test that reads it (a warehouse with its marts).

A dbt build of a test warehouse costs half a minute, so each is built once per session and
read, never written, by the tests that share it; what a test needs besides the folder (the
records it was built from) it derives again from the same deterministic scenario.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest


def built_once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], object]) -> Path:
    """The folder ``name``, filled by ``build(folder)`` once, for a session-scoped fixture.

    One pytest process builds it once. Under pytest-xdist each worker is a session of its own:
    this is the one place to swap for a cross-worker build (a folder beside every worker's
    basetemp, built under a file lock by the first worker, read by the others).
    """
    folder = factory.mktemp(name)
    build(folder)
    return folder
