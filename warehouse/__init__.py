"""The DuckDB warehouse: raw schema DDL, the run-record loader, importers, SQL access."""
