"""A suite's run: its benchmark settings, the bench that brings each to N successes, and its checks.

The benchmark settings grid (``benchmark_settings``: agent × task × budget cells, their keys and
run folders), the bench (``bench``), scheduling attempts on pinned CPUs (``scheduling``), the
pre-flight that refuses a run every attempt of which would fail alike (``preflight``), resuming
a setting stopped at a fault ceiling (``resumptions``) and the integrity checks over a suite's
prepared data and records (``audit``); where a suite's run folders and records are
(``suite_runs``).

The surface below is what code outside ``runner/`` imports (see ``runner.rooms``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runner.rooms import lazy_surface

if TYPE_CHECKING:
    from runner.suites.audit import PreparedFacts as PreparedFacts
    from runner.suites.audit import coverage_gaps as coverage_gaps
    from runner.suites.audit import describe_prepared as describe_prepared
    from runner.suites.audit import manifest_drift as manifest_drift
    from runner.suites.audit import private_references as private_references
    from runner.suites.bench import Bench as Bench
    from runner.suites.bench import BenchRun as BenchRun
    from runner.suites.benchmark_settings import Setting as Setting
    from runner.suites.benchmark_settings import SettingOutcome as SettingOutcome
    from runner.suites.benchmark_settings import SuiteLayout as SuiteLayout
    from runner.suites.benchmark_settings import parse_setting_key as parse_setting_key
    from runner.suites.benchmark_settings import setting_key as setting_key
    from runner.suites.benchmark_settings import suite_settings as suite_settings
    from runner.suites.preflight import Fault as Fault
    from runner.suites.preflight import RunRefused as RunRefused
    from runner.suites.resumptions import RESUMPTIONS_FILE as RESUMPTIONS_FILE
    from runner.suites.resumptions import RESUMPTIONS_MAX_BYTES as RESUMPTIONS_MAX_BYTES
    from runner.suites.resumptions import parse_resumption as parse_resumption
    from runner.suites.scheduling import AttemptDone as AttemptDone
    from runner.suites.suite_runs import run_folder as run_folder
    from runner.suites.suite_runs import settings_run_prefixes as settings_run_prefixes
    from runner.suites.suite_runs import suite_records as suite_records

__getattr__ = lazy_surface(__name__)
