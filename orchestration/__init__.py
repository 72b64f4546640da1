"""Dagster definitions for tmlbench: thin assets over runner/ and warehouse/."""
