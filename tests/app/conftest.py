"""Fixtures of the dashboard's tests: ``app_snapshot`` (one hand-made snapshot for the whole
session) lives in tests/conftest.py, shared with the report's tests."""
