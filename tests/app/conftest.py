"""Fixtures of the dashboard's tests: one hand-made snapshot for the whole session."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.dashboard_snapshot import build_snapshot


@pytest.fixture(scope="session")
def app_snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_snapshot(tmp_path_factory.mktemp("app-snapshot"))
