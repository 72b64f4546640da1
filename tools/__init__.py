"""What the tests and the benchmarks both use: hand-made records and warehouses, and the real
servers (Dagster UI, dashboard, Docker deployment) started and stopped on this host.

Imports runner/, warehouse/, orchestration/ and app/ as a test would; nothing there imports
this package, and nothing here imports tests/ (tests/test_layout.py checks both). What only the
tests use stays in tests/support/.
"""
