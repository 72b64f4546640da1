"""The benchmark's assets: prepared tasks → agent runs → raw warehouse → dbt models → snapshot →
report bundles."""
