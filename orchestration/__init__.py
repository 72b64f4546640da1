"""Dagster definitions for tmlbench: thin assets, resources, checks and schedules over runner/ and warehouse/."""
